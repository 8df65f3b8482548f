// Files for tests: a whole file read into a string.
//
// Thread-safety: pure functions.
#ifndef TESTS_SUPPORT_FILES_H_
#define TESTS_SUPPORT_FILES_H_

#include <fstream>
#include <sstream>
#include <string>

namespace bloomtest {

// The contents of `path`; empty when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace bloomtest

#endif  // TESTS_SUPPORT_FILES_H_

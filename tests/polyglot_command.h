// The command that runs one client language's polyglot program (client/*/polyglot*): the
// Python, Go and Node.js sides of the cross-language tests (polyglot_test.cc,
// replication_test.cc). Needs BLOOM_SOURCE_DIR, BLOOM_PYTHON_STUBS_DIR and BLOOM_GO_POLYGLOT
// defined by the test's CMake target.
#ifndef TESTS_POLYGLOT_COMMAND_H_
#define TESTS_POLYGLOT_COMMAND_H_

#include <string>

#include "absl/strings/str_cat.h"

namespace bloomtest {

// "python", "go" or "node"; a prefix such as `timeout 20 ` may go before it (the Python one
// sets its PYTHONPATH through env).
inline std::string PolyglotCommand(const std::string& language) {
  const std::string source = BLOOM_SOURCE_DIR;
  if (language == "go") return BLOOM_GO_POLYGLOT;
  if (language == "node") return "node " + source + "/client/node/polyglot.js";
  return absl::StrCat("env PYTHONPATH=", BLOOM_PYTHON_STUBS_DIR, ":", source,
                      "/client/python /usr/bin/python3 ", source, "/client/python/polyglot.py");
}

}  // namespace bloomtest

#endif  // TESTS_POLYGLOT_COMMAND_H_

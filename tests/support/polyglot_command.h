// The command that runs one client language's polyglot program (client/*/polyglot*): the
// Python, Go, Node.js and Java sides of the cross-language tests (polyglot_test.cc,
// replication_test.cc). Needs BLOOM_SOURCE_DIR, BLOOM_PYTHON_STUBS_DIR, BLOOM_GO_POLYGLOT and
// BLOOM_JAVA_CLASSPATH (the file client/java/build.sh writes) defined by the test's CMake target.
#ifndef TESTS_SUPPORT_POLYGLOT_COMMAND_H_
#define TESTS_SUPPORT_POLYGLOT_COMMAND_H_

#include <string>

#include "absl/strings/str_cat.h"

namespace bloomtest {

// "python", "go", "node" or "java"; a prefix such as `timeout 20 ` may go before it (the
// Python one sets its PYTHONPATH through env). The JVM runs with the options that start it
// fastest: each run is a short program.
inline std::string PolyglotCommand(const std::string& language) {
  const std::string source = BLOOM_SOURCE_DIR;
  if (language == "go") return BLOOM_GO_POLYGLOT;
  if (language == "java") {
    return absl::StrCat("java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp \"$(cat ",
                        BLOOM_JAVA_CLASSPATH, ")\" io.bloomserver.client.Polyglot");
  }
  if (language == "node") return "node " + source + "/client/node/polyglot.js";
  return absl::StrCat("env PYTHONPATH=", BLOOM_PYTHON_STUBS_DIR, ":", source,
                      "/client/python /usr/bin/python3 ", source, "/client/python/polyglot.py");
}

}  // namespace bloomtest

#endif  // TESTS_SUPPORT_POLYGLOT_COMMAND_H_

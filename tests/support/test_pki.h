// A throwaway PKI for TLS tests, made with openssl at test time.
//
// Thread-safety: not thread-safe; owned by one test.
#ifndef TESTS_SUPPORT_TEST_PKI_H_
#define TESTS_SUPPORT_TEST_PKI_H_

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace bloomtest {

// Two independent CAs, each with a server certificate (127.0.0.1 and localhost) and a client
// certificate, in one directory: ca1.crt, server1.{crt,key}, client1.{crt,key}, and the same
// with 2.
class TestPki {
 public:
  TestPki() {
    for (const char* n : {"1", "2"}) {
      Run(
          absl::StrCat("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
                       "-keyout ca",
                       n, ".key -out ca", n, ".crt -days 2 -subj /CN=test-ca-", n));
      Issue(absl::StrCat("server", n), absl::StrCat("ca", n),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
      Issue(absl::StrCat("client", n), absl::StrCat("ca", n), "extendedKeyUsage=clientAuth\n");
    }
  }
  std::string Path(const std::string& file) const { return dir_.path() + "/" + file; }

 private:
  void Run(const std::string& command) {
    CommandResult result = RunCommand("cd " + dir_.path() + " && " + command);
    ASSERT_EQ(result.exit_code, 0) << command << "\n" << result.out;
  }
  void Issue(const std::string& name, const std::string& ca, const std::string& extensions) {
    std::ofstream(Path(name + ".ext")) << extensions;
    Run(absl::StrCat("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ",
                     name, ".key -out ", name, ".csr -subj /CN=", name));
    Run(absl::StrCat("openssl x509 -req -in ", name, ".csr -CA ", ca, ".crt -CAkey ", ca,
                     ".key -CAcreateserial -days 2 -out ", name, ".crt -extfile ", name, ".ext"));
  }

  TempDir dir_;
};

}  // namespace bloomtest

#endif  // TESTS_SUPPORT_TEST_PKI_H_

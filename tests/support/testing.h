// Test helpers: status assertions and a unique temporary directory.
#ifndef TESTS_SUPPORT_TESTING_H_
#define TESTS_SUPPORT_TESTING_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/http_get.h"
#include "gtest/gtest.h"

#define ASSERT_OK(expr)                                         \
  do {                                                          \
    const auto& bloom_test_status_ = (expr);                    \
    ASSERT_TRUE(bloom_test_status_.ok()) << bloom_test_status_; \
  } while (0)
#define EXPECT_OK(expr)                                         \
  do {                                                          \
    const auto& bloom_test_status_ = (expr);                    \
    EXPECT_TRUE(bloom_test_status_.ok()) << bloom_test_status_; \
  } while (0)

namespace bloomtest {

// A fresh directory under the test temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "bloom-test-XXXXXX";
    char* made = mkdtemp(pattern.data());
    if (made == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The body of the server's /metrics page on `port`, checking that it answered 200.
inline std::string ScrapeMetrics(int port) {
  const std::string response = bloomhttp::HttpGet(port, "/metrics");
  const size_t body = response.find("\r\n\r\n");
  EXPECT_NE(body, std::string::npos) << response;
  EXPECT_NE(response.find(" 200 "), std::string::npos) << response;
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The status of a call that returns a Status or a StatusOr, for tests that check either.
inline absl::Status StatusOf(const absl::Status& status) { return status; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& value) {
  return value.status();
}

struct CommandResult {
  int exit_code;    // -1 if it did not exit normally
  std::string out;  // stdout and stderr
};

// Polls `done` every 20 ms until it is true (then true) or `timeout` of real time passed
// (then false): for what a background thread does in its own time.
template <typename Done>
bool WaitFor(Done done, absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// Runs `command` with /bin/sh and returns its exit code and output.
inline CommandResult RunCommand(const std::string& command) {
  CommandResult result{-1, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The SHA-256 hex digest of `token` for a --auth_token_file line, made by sha256sum rather than
// by the server's own code. `token` must not contain a single quote.
inline std::string TokenDigest(const std::string& token) {
  return RunCommand("printf %s '" + token + "' | sha256sum").out.substr(0, 64);
}

// The state letter of process `pid` in /proc/<pid>/stat ('R', 'S', 'T' once SIGSTOP took hold,
// ...), or '?' if it cannot be read: signals are delivered in their own time.
inline char ProcessState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
}

// HTTP GET and Prometheus samples for the tests (common/http_get.h).
using bloomhttp::HttpGet;
using bloomhttp::PrometheusSample;

}  // namespace bloomtest

#endif  // TESTS_SUPPORT_TESTING_H_

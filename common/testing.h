// Test helpers: status assertions and a unique temporary directory.
#ifndef COMMON_TESTING_H_
#define COMMON_TESTING_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
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

// GET http://127.0.0.1:<port><path> with HTTP/1.0; returns the whole response (status line,
// headers, body), or "" if the connection failed; what arrived if nothing came for 20 s.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  const timeval timeout{.tv_sec = 20, .tv_usec = 0};  // a test must not hang on a stuck server
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
    }
  }
  close(fd);
  return response;
}

// The value of the sample `series` (metric name plus labels exactly as exposed, e.g.
// `bloom_rpc_requests_total{code="OK",method="Add"}`) in Prometheus text, or -1 if absent.
inline double PrometheusSample(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n')
      return std::strtod(text.c_str() + at + series.size(), nullptr);
    at += series.size();
  }
  return -1;
}

}  // namespace bloomtest

#endif  // COMMON_TESTING_H_

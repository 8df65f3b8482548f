// Runs the real bloom-server binary for integration tests: a fresh temporary data directory
// (unless one is given), port 0, and --port_file to learn the bound port.
//
// Thread-safety: not thread-safe; owned by one test.
#ifndef TESTS_SUPPORT_SERVER_PROCESS_H_
#define TESTS_SUPPORT_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/support/testing.h"

namespace bloomtest {

class ServerProcess {
 public:
  // Starts bloom-server with `args` added; waits (up to `timeout`) until it serves. Returns
  // nullptr, with a test failure, if it does not.
  static std::unique_ptr<ServerProcess> Start(const std::string& data_dir,
                                              const std::vector<std::string>& args = {},
                                              const std::vector<std::string>& env = {},
                                              absl::Duration timeout = absl::Seconds(30));
  // SIGKILL if still running. If the current test has failed, prints the tail of the server's
  // log to stderr first (the log is deleted with the server's scratch directory).
  ~ServerProcess();

  int port() const { return port_; }
  // The --metrics_listen and --health_listen ports; 0 if the server has none.
  int metrics_port() const { return metrics_port_; }
  int health_port() const { return health_port_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  // The server's resident memory now (VmRSS) and at its peak so far (VmHWM), in KiB; 0 if it
  // is not running.
  uint64_t ResidentKb() const;
  uint64_t PeakResidentKb() const;
  std::string ReadLog() const;

  // Starts bloom-server without waiting for it to serve (to kill it during start-up).
  static std::unique_ptr<ServerProcess> Spawn(const std::string& data_dir,
                                              const std::vector<std::string>& args = {});
  // Sends `signal`. SIGSTOP returns once every thread of the server has stopped (at most 5 s);
  // any other signal, without waiting.
  void Signal(int signal);

  // Whether the process has exited (or was killed) without the test stopping it: reaps it.
  bool Exited();
  // Sends SIGTERM and waits; returns the exit status (or -signal if killed by one). Anything
  // but 0 also prints the tail of the log to stderr.
  int Terminate(absl::Duration timeout = absl::Seconds(20));
  // SIGKILL, like a crash.
  void Kill();

  // Runs bloom-server to completion (for runs expected to fail fast) and returns its exit
  // status; its output goes to *output.
  static int RunToExit(const std::vector<std::string>& args, std::string* output,
                       absl::Duration timeout = absl::Seconds(20));

 private:
  ServerProcess() = default;
  int WaitForExit(absl::Duration timeout);
  void PrintLogTail(absl::string_view why) const;

  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  int health_port_ = 0;
  std::string log_path_;
  std::unique_ptr<TempDir> scratch_;  // port file and log
};

}  // namespace bloomtest

#endif  // TESTS_SUPPORT_SERVER_PROCESS_H_

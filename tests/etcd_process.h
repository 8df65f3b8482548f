// Runs a real single-member etcd (Debian's etcd-server) for tests: a fresh temporary data
// directory, free loopback ports for clients and peers, and its log kept for a failing test.
//
//   std::unique_ptr<EtcdProcess> etcd = EtcdProcess::Start();
//   ASSERT_NE(etcd, nullptr);
//   ... --etcd_endpoints=etcd->endpoint() ...
//
// etcd cannot report a port it chose itself (it advertises the URL it was given), so the ports
// are picked free just before it starts; a start that loses one to another process is retried.
//
// Thread-safety: not thread-safe; owned by one test.
#ifndef TESTS_ETCD_PROCESS_H_
#define TESTS_ETCD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/testing.h"

namespace bloomtest {

class EtcdProcess {
 public:
  // Starts etcd and waits (up to `timeout`) until it answers. nullptr, with a test failure, if
  // it does not.
  static std::unique_ptr<EtcdProcess> Start(absl::Duration timeout = absl::Seconds(30));
  // SIGKILL if still running; prints the tail of its log if the test failed.
  ~EtcdProcess();

  // host:port for clients.
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  pid_t pid() const { return pid_; }
  void Signal(int signal);
  void Kill();
  std::string ReadLog() const;

 private:
  EtcdProcess() = default;
  // One attempt with fresh ports: true once etcd answers.
  bool TryStart(absl::Duration timeout);

  pid_t pid_ = -1;
  int client_port_ = 0;
  std::string log_path_;
  std::unique_ptr<TempDir> scratch_;  // data dir and log
};

// A loopback TCP port that was free a moment ago.
int FreeLoopbackPort();

}  // namespace bloomtest

#endif  // TESTS_ETCD_PROCESS_H_

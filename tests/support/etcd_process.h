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
#ifndef TESTS_SUPPORT_ETCD_PROCESS_H_
#define TESTS_SUPPORT_ETCD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tests/support/testing.h"

namespace bloomtest {

// How to run etcd beyond the defaults. With `cert_file`: TLS on the client URL with that
// serving certificate (for 127.0.0.1) and key, and with `client_ca_file` the CA that client
// certificates must chain to (etcd's --client-cert-auth). `extra_flags` are added as given
// (e.g. "--auth-token-ttl=1").
struct EtcdSettings {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  std::vector<std::string> extra_flags;
};

class EtcdProcess {
 public:
  // Starts etcd and waits (up to `timeout`) until it answers. nullptr, with a test failure, if
  // it does not.
  static std::unique_ptr<EtcdProcess> Start(absl::Duration timeout = absl::Seconds(30));
  // The same with `settings` (with TLS, its health is asked on a plaintext metrics URL).
  static std::unique_ptr<EtcdProcess> StartWith(const EtcdSettings& settings,
                                                absl::Duration timeout = absl::Seconds(30));
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
  EtcdSettings settings_;
  std::string log_path_;
  std::unique_ptr<TempDir> scratch_;  // data dir and log
};

// A real etcd cluster of several members on loopback, each with its own data dir, which a test
// can kill and restart (with its data, on its ports) while the others keep a quorum.
//
//   std::unique_ptr<EtcdCluster> etcd = EtcdCluster::Start(3);
//   ... --etcd_endpoints=etcd->endpoints() ...
//   etcd->Kill(1);  ...  ASSERT_TRUE(etcd->Restart(1));
class EtcdCluster {
 public:
  // nullptr, with a test failure, if the members do not all answer within `timeout`.
  static std::unique_ptr<EtcdCluster> Start(int members,
                                            absl::Duration timeout = absl::Seconds(30));
  ~EtcdCluster();  // SIGKILLs every member; prints their logs' tails if the test failed

  // host:port,... of every member's client URL.
  std::string endpoints() const;
  int size() const { return static_cast<int>(members_.size()); }
  void Kill(int member);
  // Starts a killed member again and waits until it answers healthy.
  bool Restart(int member, absl::Duration timeout = absl::Seconds(30));

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
    std::string log_path;
  };
  EtcdCluster() = default;
  bool TryStart(int members, absl::Duration timeout);
  bool Spawn(Member& member);
  bool WaitHealthy(const Member& member, absl::Time deadline);

  std::unique_ptr<TempDir> scratch_;
  std::vector<Member> members_;
  std::string initial_cluster_;
};

// A loopback TCP port that was free a moment ago.
int FreeLoopbackPort();

}  // namespace bloomtest

#endif  // TESTS_SUPPORT_ETCD_PROCESS_H_

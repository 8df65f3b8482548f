// A primary and its followers as real bloom-server processes on loopback, for the replication
// tests: fixed data dirs (a killed pod comes back with its data), the primary back on its own
// port (followers know it by that address), and the checks the tests share: caught up, and
// every filter exported byte for byte alike from every pod.
//
// Thread-safety: not thread-safe; owned by one test. The targets may be read from other
// threads while no pod is (re)started.
#ifndef TESTS_REPLICATION_CLUSTER_H_
#define TESTS_REPLICATION_CLUSTER_H_

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace bloomtest {

class ReplicationCluster {
 public:
  // `primary_args` and `follower_args` are added to every start of that role.
  ReplicationCluster(int followers, std::vector<std::string> primary_args,
                     std::vector<std::string> follower_args = {})
      : follower_dirs_(followers),
        primary_args_(std::move(primary_args)),
        follower_args_(std::move(follower_args)),
        followers_(followers),
        follower_ports_(followers, 0) {}

  // Starts (or restarts) the primary; its port stays the one it got first.
  bool StartPrimary() {
    // Tests that need token auth pass their own --auth_token_file (the flag then does nothing).
    std::vector<std::string> args = {"--metrics_listen=127.0.0.1:0",
                                     "--allow_unauthenticated_replication"};
    args.insert(args.end(), primary_args_.begin(), primary_args_.end());
    if (primary_port_ != 0) args.push_back(absl::StrCat("--listen=127.0.0.1:", primary_port_));
    primary_ = ServerProcess::Start(primary_dir_.path(), args);
    if (primary_ == nullptr) return false;
    primary_port_ = primary_->port();
    return true;
  }

  // Starts (or restarts) follower `i`, on the port it got first.
  bool StartFollower(int i, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--metrics_listen=127.0.0.1:0",
                                     absl::StrCat("--replicate_from=127.0.0.1:", primary_port_)};
    args.insert(args.end(), follower_args_.begin(), follower_args_.end());
    args.insert(args.end(), extra.begin(), extra.end());
    if (follower_ports_[i] != 0) {
      args.push_back(absl::StrCat("--listen=127.0.0.1:", follower_ports_[i]));
    }
    followers_[i] = ServerProcess::Start(follower_dirs_[i].path(), args);
    if (followers_[i] == nullptr) return false;
    follower_ports_[i] = followers_[i]->port();
    return true;
  }

  bool Start() {
    if (!StartPrimary()) return false;
    for (int i = 0; i < static_cast<int>(followers_.size()); ++i) {
      if (!StartFollower(i)) return false;
    }
    return true;
  }

  ServerProcess& primary() { return *primary_; }
  ServerProcess& follower(int i) { return *followers_[i]; }
  void KillPrimary() { primary_->Kill(); }
  void KillFollower(int i) { followers_[i]->Kill(); }
  const std::string& follower_dir(int i) const { return follower_dirs_[i].path(); }
  const std::string& primary_dir() const { return primary_dir_.path(); }
  int followers() const { return static_cast<int>(followers_.size()); }

  // "127.0.0.1:port" of the primary, then of each follower: every pod.
  std::vector<std::string> targets() const {
    std::vector<std::string> out = {absl::StrCat("127.0.0.1:", primary_port_)};
    for (int port : follower_ports_) out.push_back(absl::StrCat("127.0.0.1:", port));
    return out;
  }

  // The primary's latest sequence, and what follower `i` has applied (metrics); -1 if unknown.
  double PrimarySequence() {
    return PrometheusSample(HttpGet(primary_->metrics_port(), "/metrics"),
                            "bloom_replication_sequence");
  }
  double AppliedSequence(int i) {
    return PrometheusSample(HttpGet(followers_[i]->metrics_port(), "/metrics"),
                            "bloom_replica_applied_sequence");
  }

  // Waits until every follower has applied everything the primary has written.
  bool WaitCaughtUp(absl::Duration timeout = absl::Seconds(60)) {
    return WaitFor(
        [&] {
          const double latest = PrimarySequence();
          if (latest < 0) return false;
          for (int i = 0; i < followers(); ++i) {
            if (AppliedSequence(i) != latest) return false;
          }
          return true;
        },
        timeout);
  }

  // The dump of `name` from the pod at `target`.
  static std::string Export(const std::string& target, const std::string& name) {
    std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(target);
    std::ostringstream out;
    const absl::Status status = client->Export(name, out);
    EXPECT_TRUE(status.ok()) << target << " " << name << ": " << status;
    return out.str();
  }

  // Every pod's export of each of `names` is the primary's, byte for byte.
  void ExpectIdenticalExports(const std::vector<std::string>& names) {
    const std::vector<std::string> pods = targets();
    for (const std::string& name : names) {
      const std::string primary = Export(pods[0], name);
      EXPECT_FALSE(primary.empty()) << name;
      for (size_t i = 1; i < pods.size(); ++i) {
        EXPECT_TRUE(Export(pods[i], name) == primary)
            << "follower " << i - 1 << " exports " << name << " differently from the primary";
      }
    }
  }

 private:
  TempDir primary_dir_;
  std::vector<TempDir> follower_dirs_;
  const std::vector<std::string> primary_args_;
  const std::vector<std::string> follower_args_;
  std::unique_ptr<ServerProcess> primary_;
  std::vector<std::unique_ptr<ServerProcess>> followers_;
  int primary_port_ = 0;
  std::vector<int> follower_ports_;
};

}  // namespace bloomtest

#endif  // TESTS_REPLICATION_CLUSTER_H_

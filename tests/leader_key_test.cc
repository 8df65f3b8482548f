// Role changes in orders the failover tests never make: the leader key in etcd written by hand
// (as etcdctl can on a plaintext etcd), naming a follower, overwritten with garbage, deleted,
// in a fuzzed series with pods killed between. Real bloom-server pods and a real etcd. After
// each series: no pod aborted, never two primaries acknowledged in one term (their ack logs),
// the pods elect a primary that takes writes, and every acknowledged add is on it.
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/bloom_client.h"
#include "coordination/cluster_state.h"
#include "coordination/etcd_client.h"
#include "gtest/gtest.h"
#include "tests/elected_cluster.h"
#include "tests/support/etcd_process.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace bloomtest {
namespace {

constexpr char kLeaderKeyCluster[] = "leader-key-test";

class LeaderKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = EtcdProcess::Start();
    ASSERT_NE(etcd_, nullptr);
    etcd_client_ = ConnectEtcd(etcd_->endpoint());
    ASSERT_NE(etcd_client_, nullptr);
    for (int i = 0; i < 3; ++i) {
      data_dirs_.push_back(std::make_unique<TempDir>());
      ports_.push_back(FreeLoopbackPort());
      pods_.emplace_back();
      StartPod(i);
    }
  }

  void StartPod(int i) {
    if (pods_[i] != nullptr) stopped_.push_back(std::move(pods_[i]));  // its log, for failures
    pods_[i] = ServerProcess::Start(
        data_dirs_[i]->path(),
        {"--listen=" + Target(i), "--advertise_address=" + Target(i),
         "--etcd_endpoints=" + etcd_->endpoint(), absl::StrCat("--cluster=", kLeaderKeyCluster),
         "--leader_ttl=2s", absl::StrCat("--min_replica_acks=", min_replica_acks_),
         "--replica_ack_timeout=2s", "--allow_unauthenticated_replication",
         "--ack_log=" + AckLog(i)});
    ASSERT_NE(pods_[i], nullptr);
  }

  [[nodiscard]] std::string Target(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }
  [[nodiscard]] std::string AckLog(int i) const {
    return absl::StrCat(scratch_.path(), "/acks-", i);
  }

  // The pod the leader key names (a well-formed key), or -1.
  int Named() {
    return NamedPrimary(*etcd_client_, kLeaderKeyCluster, {Target(0), Target(1), Target(2)});
  }

  bool Add(int pod, const std::string& item) {
    if (!AddOne(Target(pod), "keyed", item, absl::Seconds(4))) return false;
    acknowledged_.push_back(item);
    return true;
  }
  bool HoldsEveryAdd(int pod) { return AllPresent(Target(pod), "keyed", acknowledged_); }

  // Puts `value` as the leader key, without a lease (as `etcdctl put` does).
  void PutLeaderKey(const std::string& value) {
    ASSERT_TRUE(etcd_client_->Put(coordination::LeaderKey(kLeaderKeyCluster), value).ok());
  }
  void DeleteLeaderKey() {
    // Only if present; either way fine.
    etcd_client_->DeleteIfValue(coordination::LeaderKey(kLeaderKeyCluster), CurrentLeaderValue())
        .IgnoreError();
  }
  std::string CurrentLeaderValue() {
    absl::StatusOr<coordination::KeyValue> leader =
        etcd_client_->Get(coordination::LeaderKey(kLeaderKeyCluster));
    return leader.ok() ? leader->value : "";
  }
  std::string LeaderNaming(int i) {
    return coordination::Encode(coordination::LeaderRecord{Target(i), Target(i), 0});
  }

  // Every pod still runs (none aborted), a primary is elected that takes writes within
  // `within`, and every acknowledged add reads present through it.
  void ExpectRecovered(const std::string& tag, absl::Duration within = absl::Seconds(30)) {
    for (int i = 0; i < 3; ++i) {
      if (pods_[i] == nullptr) continue;
      EXPECT_FALSE(pods_[i]->Exited()) << "pod " << i << " died: " << pods_[i]->ReadLog();
      EXPECT_FALSE(absl::StrContains(pods_[i]->ReadLog(), "assertion failed")) << "pod " << i;
    }
    int elected = -1;
    int n = 0;
    ASSERT_TRUE(WaitFor(
        [&] {
          elected = Named();
          return elected >= 0 && pods_[elected] != nullptr &&
                 Add(elected, absl::StrCat(tag, "-", n++));
        },
        within))
        << "no primary took writes after " << tag;
    EXPECT_TRUE(HoldsEveryAdd(elected)) << "after " << tag << ": an acknowledged add is lost";
  }

  void ExpectOnePrimaryPerTerm() {
    bloomtest::ExpectOnePrimaryPerTerm({AckLog(0), AckLog(1), AckLog(2)});
  }

  int min_replica_acks_ = 1;
  TempDir scratch_;
  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<coordination::EtcdClient> etcd_client_;
  std::vector<std::unique_ptr<TempDir>> data_dirs_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<ServerProcess>> pods_;
  std::vector<std::unique_ptr<ServerProcess>> stopped_;
  std::vector<std::string> acknowledged_;
};

// The leader key named a follower, then was deleted: a follower aborted in gRPC ("API misuse")
// as the old primary came back in a new term, two runs of two.
TEST_F(LeaderKeyTest, ALeaderKeyNamingAFollowerThenDeletedCrashesNobody) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Named()) >= 0; }));
  int n = 0;
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("before-", n++)); }));
  for (int round = 0; round < 2; ++round) {
    primary = Named();
    ASSERT_GE(primary, 0);
    const int follower = (primary + 1) % 3;
    PutLeaderKey(LeaderNaming(follower));
    absl::SleepFor(absl::Milliseconds(500));  // the pods act on it
    DeleteLeaderKey();
    ExpectRecovered(absl::StrCat("round-", round));
  }
  ExpectOnePrimaryPerTerm();
}

// A leader key overwritten with garbage (no lease) stops no write for long: a key that does not
// parse, or has no lease, is no leader, and the pods replace it by an election.
TEST_F(LeaderKeyTest, AGarbageOrLeaselessLeaderKeyIsReplacedByAnElection) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Named()) >= 0; }));
  int n = 0;
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("before-", n++)); }));
  PutLeaderKey("garbage");
  ExpectRecovered("garbage", absl::Seconds(15));
  // A well-formed key without a lease, naming the primary itself.
  primary = Named();
  ASSERT_GE(primary, 0);
  PutLeaderKey(LeaderNaming(primary));
  ExpectRecovered("leaseless", absl::Seconds(15));
  ExpectOnePrimaryPerTerm();
}

// A fuzzed series of leader-key writes, deletes and pod kills (seeded, so a failure
// reproduces).
TEST_F(LeaderKeyTest, AFuzzedSeriesOfKeyWritesDeletesAndKillsLosesNothing) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Named()) >= 0; }));
  int n = 0;
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("before-", n++)); }));
  std::mt19937 random(62);
  for (int step = 0; step < 8; ++step) {
    const int pod = static_cast<int>(random() % 3);
    switch (random() % 4) {
      case 0:
        PutLeaderKey(LeaderNaming(pod));
        break;
      case 1:
        PutLeaderKey(random() % 2 == 0 ? "garbage" : "name=x");
        break;
      case 2:
        DeleteLeaderKey();
        break;
      case 3:
        pods_[pod]->Kill();
        StartPod(pod);
        break;
    }
    absl::SleepFor(absl::Milliseconds(static_cast<int>(random() % 700)));
    if (step % 2 == 1) ExpectRecovered(absl::StrCat("step-", step));
  }
  ExpectRecovered("end");
  ExpectOnePrimaryPerTerm();
}

// A follower killed and restarted while the same primary leads holds more than the primary's
// start sequence, as every follower of a term does once it applied a write. Its data's term is
// kept beside the data (REPLICATION_TERM), so it tails on from where it was instead of copying
// the primary anew.
TEST_F(LeaderKeyTest, AFollowerRestartedInTheSameTermIsNotCopiedAnew) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Named()) >= 0; }));
  int n = 0;
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("before-", n++)); }));
  const int follower = (primary + 1) % 3;
  ASSERT_TRUE(WaitFor([&] { return HoldsEveryAdd(follower); }));
  pods_[follower]->Kill();
  StartPod(follower);
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("after-", n++)); }));
  EXPECT_EQ(Named(), primary);
  const std::string log = pods_[follower]->ReadLog();
  EXPECT_FALSE(absl::StrContains(log, "copying its data anew")) << log;
  EXPECT_FALSE(absl::StrContains(log, "copying a snapshot")) << log;
  ExpectRecovered("restarted");
}

// A pod killed while it copied a snapshot leaves a partial copy (its marker, a CURRENT naming a
// manifest that never came). A partial copy holds nothing: restarted, the pod does not open it
// (that fails at every start), but copies again and serves.
TEST_F(LeaderKeyTest, APodKilledDuringACopyStartsAgain) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Named()) >= 0; }));
  int n = 0;
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("before-", n++)); }));
  const int follower = (primary + 1) % 3;
  pods_[follower]->Kill();
  const std::string dir = data_dirs_[follower]->path();
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::filesystem::remove_all(entry.path(), error);
  }
  std::ofstream(dir + "/REPLICA_COPY_INCOMPLETE") << "a snapshot copy is in progress\n";
  std::ofstream(dir + "/CURRENT") << "MANIFEST-000099\n";
  StartPod(follower);
  ASSERT_NE(pods_[follower], nullptr);
  ASSERT_TRUE(WaitFor([&] { return HoldsEveryAdd(follower); }));
  ExpectRecovered("copied again");
}

// Pods whose writes wait for no follower: any member holding the most takes over.
class LeaderKeyAsyncTest : public LeaderKeyTest {
 protected:
  LeaderKeyAsyncTest() { min_replica_acks_ = 0; }
};

// A pod copying a snapshot from a primary that died stops retrying it once the election that
// follows names another primary, or itself: a change of role ends the copy, and the pod copies
// from the new primary and serves.
TEST_F(LeaderKeyAsyncTest, AnElectionEndsACopyFromAPrimaryThatIsGone) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Named()) >= 0; }));
  int n = 0;
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("before-", n++)); }));
  const int keeps = (primary + 1) % 3;
  const int wiped = (primary + 2) % 3;
  // Asynchronous followers: wait until the one that will take over holds every add.
  ASSERT_TRUE(WaitFor([&] { return HoldsEveryAdd(keeps); }));

  // The primary dies; before its key expires, a follower restarts with its data lost: it
  // starts copying from the dead primary, which the key still names.
  pods_[primary]->Kill();
  pods_[wiped]->Kill();
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(data_dirs_[wiped]->path())) {
    std::filesystem::remove_all(entry.path(), error);
  }
  stopped_.push_back(std::move(pods_[wiped]));
  pods_[wiped] = ServerProcess::Spawn(
      data_dirs_[wiped]->path(),
      {"--listen=" + Target(wiped), "--advertise_address=" + Target(wiped),
       "--etcd_endpoints=" + etcd_->endpoint(), absl::StrCat("--cluster=", kLeaderKeyCluster),
       "--leader_ttl=2s", "--min_replica_acks=0", "--allow_unauthenticated_replication",
       "--ack_log=" + AckLog(wiped)});
  ASSERT_NE(pods_[wiped], nullptr);
  stopped_.push_back(std::move(pods_[primary]));
  // The other follower takes over; the wiped pod gives up the dead primary, copies from the
  // new one, and serves what it holds.
  ASSERT_TRUE(WaitFor([&] { return Named() == keeps; }, absl::Seconds(15)));
  ExpectRecovered("elected");
  ASSERT_TRUE(WaitFor([&] { return HoldsEveryAdd(wiped); }, absl::Seconds(20)));
  EXPECT_TRUE(absl::StrContains(pods_[wiped]->ReadLog(), "while this pod copied a snapshot"));
  ExpectOnePrimaryPerTerm();
}

}  // namespace
}  // namespace bloomtest

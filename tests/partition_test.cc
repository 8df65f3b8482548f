// Partitions: the failover chaos test kills, pauses and loses etcd members, but never cuts a
// link. Here three bloom-server pods and a real etcd talk only through TcpProxy links the test
// cuts (black holes: nothing passes, nothing is reset): each pod's inbound link (what the other
// pods dial: its advertised address) and its link to etcd. A writer adds through whichever pod
// etcd names the primary (on its own port, outside the partition) and records what was
// acknowledged. The nemesis, in turn:
// - the primary cut off from etcd (its followers still reach etcd and it);
// - the primary cut off from its followers (it still reaches etcd);
// - a minority side: the primary cut off from everyone;
// - a minority side: a follower cut off from everyone.
// The checks, as the chaos test's: nothing acknowledged is lost, no two pods acknowledge in
// one term (their --ack_log), and writes are taken again within a bound once a majority can
// elect (during the cut where it can, after the heal where only the heal gives it one).
#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
#include "tests/support/tcp_proxy.h"
#include "tests/support/testing.h"

namespace bloomtest {
namespace {

constexpr char kPartitionCluster[] = "partition-test";
constexpr int kPartitionPods = 3;
// A majority elects within the lease (2 s), its settle time and the followers' catching up.
constexpr absl::Duration kElectedWithin = absl::Seconds(15);

bloom::v1::FilterSpec PartitionSpec() {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1'000'000);
  spec.set_error_rate(0.001);
  return spec;
}

class PartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = EtcdProcess::Start();
    ASSERT_NE(etcd_, nullptr);
    etcd_client_ = ConnectEtcd(etcd_->endpoint());
    ASSERT_NE(etcd_client_, nullptr);
    const int etcd_port = std::stoi(etcd_->endpoint().substr(etcd_->endpoint().rfind(':') + 1));
    for (int i = 0; i < kPartitionPods; ++i) {
      data_dirs_.push_back(std::make_unique<TempDir>());
      ports_.push_back(FreeLoopbackPort());
      inbound_.push_back(TcpProxy::Start(ports_[i]));
      to_etcd_.push_back(TcpProxy::Start(etcd_port));
      ASSERT_NE(inbound_.back(), nullptr);
      ASSERT_NE(to_etcd_.back(), nullptr);
    }
    for (int i = 0; i < kPartitionPods; ++i) {
      pods_.push_back(
          ServerProcess::Start(data_dirs_[i]->path(),
                               {absl::StrCat("--listen=127.0.0.1:", ports_[i]),
                                absl::StrCat("--advertise_address=", Advertised(i)),
                                absl::StrCat("--etcd_endpoints=127.0.0.1:", to_etcd_[i]->port()),
                                absl::StrCat("--cluster=", kPartitionCluster), "--leader_ttl=2s",
                                "--min_replica_acks=1", "--replica_ack_timeout=2s",
                                "--allow_unauthenticated_replication", "--ack_log=" + AckLog(i)}));
      ASSERT_NE(pods_.back(), nullptr);
    }
  }

  void TearDown() override {
    writing_.store(false);
    if (writer_.joinable()) writer_.join();
  }

  std::string Advertised(int i) const { return absl::StrCat("127.0.0.1:", inbound_[i]->port()); }
  std::string Direct(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }
  std::string AckLog(int i) const { return absl::StrCat(scratch_.path(), "/acks-", i); }

  // The pod etcd names as the primary (read directly, outside the partition), or -1.
  int Primary() {
    std::vector<std::string> advertised;
    for (int i = 0; i < kPartitionPods; ++i) advertised.push_back(Advertised(i));
    return NamedPrimary(*etcd_client_, kPartitionCluster, advertised);
  }

  // Adds one new item at a time through the primary's own port, recording what was
  // acknowledged and when.
  void StartWriter() {
    writing_.store(true);
    writer_ = std::thread([this] {
      std::map<int, std::unique_ptr<bloomclient::BloomClient>> clients;
      bloomclient::ClientOptions options;
      options.timeout = absl::Seconds(2);
      const bloom::v1::FilterSpec spec = PartitionSpec();
      for (int n = 0; writing_.load(); ++n) {
        const int primary = Primary();
        if (primary < 0) {
          absl::SleepFor(absl::Milliseconds(50));
          continue;
        }
        std::unique_ptr<bloomclient::BloomClient>& client = clients[primary];
        if (client == nullptr) client = bloomclient::BloomClient::Connect(Direct(primary), options);
        const std::string item = absl::StrCat("item-", n);
        if (client->Add("partitioned", {item}, &spec).ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          acknowledged_.push_back(item);
          last_ack_ = absl::Now();
        } else {
          absl::SleepFor(absl::Milliseconds(20));
        }
      }
    });
  }

  absl::Time LastAck() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_ack_;
  }

  // Waits until a write is acknowledged after `since`; false if none is within `within`.
  bool AcknowledgedAfter(absl::Time since, absl::Duration within) {
    return WaitFor([&] { return LastAck() > since; }, within);
  }

  // Every acknowledged add reads present through the primary (every pod caught up first).
  void ExpectNothingLost(const std::string& after) {
    int primary = -1;
    ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }, kElectedWithin));
    std::vector<std::string> acknowledged;
    {
      std::lock_guard<std::mutex> lock(mu_);
      acknowledged = acknowledged_;
    }
    EXPECT_TRUE(acknowledged.empty() || AllPresent(Direct(primary), "partitioned", acknowledged))
        << after << ": an acknowledged add is lost";
  }

  void ExpectOnePrimaryPerTerm() {
    std::vector<std::string> logs;
    for (int i = 0; i < kPartitionPods; ++i) logs.push_back(AckLog(i));
    bloomtest::ExpectOnePrimaryPerTerm(logs);
  }

  TempDir scratch_;
  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<coordination::EtcdClient> etcd_client_;
  std::vector<std::unique_ptr<TempDir>> data_dirs_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<TcpProxy>> inbound_;
  std::vector<std::unique_ptr<TcpProxy>> to_etcd_;
  std::vector<std::unique_ptr<ServerProcess>> pods_;
  std::atomic<bool> writing_{false};
  std::thread writer_;
  std::mutex mu_;
  std::vector<std::string> acknowledged_;       // guarded by mu_
  absl::Time last_ack_ = absl::InfinitePast();  // guarded by mu_
};

TEST_F(PartitionTest, NoCutLinkLosesAnAcknowledgedAddOrMakesTwoPrimaries) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }));
  StartWriter();
  ASSERT_TRUE(AcknowledgedAfter(absl::Now(), kElectedWithin));

  struct Cut {
    std::string what;
    bool inbound;          // the pod's inbound link
    bool etcd;             // its link to etcd
    bool primary;          // the primary, or a follower
    bool majority_elects;  // writes go on during the cut (the others elect, or keep, one)
  };
  const std::vector<Cut> cuts = {
      {"the primary cut off from etcd", false, true, true, true},
      {"the primary cut off from its followers", true, false, true, false},
      {"the primary alone (a minority side)", true, true, true, true},
      {"a follower alone (a minority side)", true, true, false, true},
  };
  for (const Cut& cut : cuts) {
    ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }, kElectedWithin)) << cut.what;
    const int pod = cut.primary ? primary : (primary + 1) % kPartitionPods;
    SCOPED_TRACE(absl::StrCat(cut.what, " (pod ", pod, ")"));
    ASSERT_TRUE(AcknowledgedAfter(absl::Now(), kElectedWithin)) << "no writes before the cut";
    const absl::Time cut_at = absl::Now();
    if (cut.inbound) inbound_[pod]->Cut();
    if (cut.etcd) to_etcd_[pod]->Cut();
    if (cut.majority_elects) {
      // A cut primary is replaced; then writes are acknowledged by the pods that can.
      if (cut.primary) {
        EXPECT_TRUE(WaitFor([&] { return Primary() >= 0 && Primary() != pod; }, kElectedWithin))
            << "the cut primary is still the primary";
      }
      EXPECT_TRUE(AcknowledgedAfter(absl::Now(), kElectedWithin))
          << "no write acknowledged within " << kElectedWithin << " of the cut";
    } else {
      // The primary keeps its lease but no follower acknowledges: once the writes in flight
      // timed out (--replica_ack_timeout=2s), none is acknowledged until the heal.
      absl::SleepFor(absl::Seconds(3));
      const absl::Time quiet_from = absl::Now();
      absl::SleepFor(absl::Seconds(3));
      EXPECT_LT(LastAck(), quiet_from) << "a write was acknowledged without a follower";
      EXPECT_EQ(Primary(), pod);
    }
    inbound_[pod]->Heal();
    to_etcd_[pod]->Heal();
    const absl::Time healed = absl::Now();
    EXPECT_TRUE(AcknowledgedAfter(healed, kElectedWithin))
        << "no write acknowledged within " << kElectedWithin << " of the heal (cut for "
        << absl::FormatDuration(healed - cut_at) << ")";
    ExpectNothingLost(cut.what);
  }
  writing_.store(false);
  writer_.join();
  ExpectNothingLost("the end");
  ExpectOnePrimaryPerTerm();
  for (int i = 0; i < kPartitionPods; ++i)
    EXPECT_FALSE(pods_[i]->Exited()) << "pod " << i << " died";
}

}  // namespace
}  // namespace bloomtest

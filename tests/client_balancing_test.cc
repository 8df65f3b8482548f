// BloomClient with a target that names every pod of a replicated deployment: its calls are
// spread over the pods, it reads its own writes whichever pod answers, and a pod killed under it
// is skipped at once. And --max_connection_age, which makes such clients look for new pods.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/replication_cluster.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloomclient::BloomClient;
using bloomclient::ClientOptions;
using bloomtest::ReplicationCluster;

// "ipv4:127.0.0.1:a,127.0.0.1:b,...": gRPC's list of addresses, as a headless Service's DNS
// name would resolve.
std::string EveryPod(const ReplicationCluster& cluster) {
  std::vector<std::string> addresses = cluster.targets();
  return absl::StrCat("ipv4:", absl::StrJoin(addresses, ","));
}

// MightContain calls the pod at `metrics_port` answered OK.
double ChecksServed(int metrics_port) {
  return bloomhttp::PrometheusSample(
      bloomhttp::HttpGet(metrics_port, "/metrics"),
      R"(bloom_rpc_requests_total{code="OK",method="MightContain"})");
}

bloom::v1::FilterSpec Spec() {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(10'000);
  spec.set_error_rate(0.01);
  return spec;
}

class ClientBalancingTest : public ::testing::TestWithParam<bool> {
 protected:
  static ClientOptions Options() {
    ClientOptions options;
    options.pipelined = GetParam();
    options.timeout = absl::Seconds(5);
    return options;
  }
};

TEST_P(ClientBalancingTest, CallsAreSpreadOverThePodsAndEachReadsTheClientsWrites) {
  ReplicationCluster cluster(2, {});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  auto client = BloomClient::Connect(EveryPod(cluster), Options());
  const bloom::v1::FilterSpec spec = Spec();
  // Unary calls take turns over the pods; pipelined ones share one stream to one of them. Each
  // add is read back at once, wherever the read lands (read-your-writes).
  for (int i = 0; i < 60; ++i) {
    const std::string item = absl::StrCat("item-", i);
    absl::StatusOr<std::vector<bool>> added = client->Add("spread", {item}, &spec);
    ASSERT_TRUE(added.ok()) << added.status();
    absl::StatusOr<std::vector<bool>> present = client->MightContain("spread", {item});
    ASSERT_TRUE(present.ok()) << present.status();
    ASSERT_TRUE((*present)[0]) << item << " read absent after its add was acknowledged";
  }
  if (GetParam()) return;  // the pipelined checks are counted as Pipeline calls
  const std::vector<double> served = {ChecksServed(cluster.primary().metrics_port()),
                                      ChecksServed(cluster.follower(0).metrics_port()),
                                      ChecksServed(cluster.follower(1).metrics_port())};
  double total = 0;
  int pods_serving = 0;
  for (double checks : served) {
    total += std::max(checks, 0.0);
    if (checks > 0) ++pods_serving;
  }
  // At least 60: a follower that had not applied the add in time forwards the read.
  EXPECT_GE(total, 60) << absl::StrJoin(served, ", ");
  EXPECT_EQ(pods_serving, 3) << "checks by pod: " << absl::StrJoin(served, ", ");
}

// Reads go on without an error: one sent to the killed pod is retried on another. A write is
// not retried (its answer may be lost after it was made): the first one sent to the killed pod
// may fail UNAVAILABLE, when the client was idle as the pod went (this client reads a
// connection's end only while a call polls); every later one goes to the pods that are left.
TEST_P(ClientBalancingTest, AKilledFollowerIsSkippedWithoutFailingTheCallsAfterIt) {
  ReplicationCluster cluster(2, {});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  auto client = BloomClient::Connect(EveryPod(cluster), Options());
  const bloom::v1::FilterSpec spec = Spec();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(client->Add("outlive", {absl::StrCat("before-", i)}, &spec).ok());
  }
  for (int victim = 0; victim < 2; ++victim) {
    cluster.KillFollower(victim);
    absl::SleepFor(absl::Milliseconds(300));
    for (int i = 0; i < 30; ++i) {
      absl::StatusOr<std::vector<bool>> present =
          client->MightContain("outlive", {"before-0", absl::StrCat("before-", i % 10)});
      ASSERT_TRUE(present.ok()) << "read " << i << " after follower " << victim
                                << " was killed: " << present.status();
      EXPECT_EQ(*present, std::vector<bool>({true, true}));
    }
    int failed_writes = 0;
    for (int i = 0; i < 30; ++i) {
      const std::string item = absl::StrCat("after-", victim, "-", i);
      absl::StatusOr<std::vector<bool>> added = client->Add("outlive", {item}, &spec);
      if (!added.ok()) {
        EXPECT_EQ(added.status().code(), absl::StatusCode::kUnavailable) << added.status();
        ++failed_writes;
        continue;
      }
      absl::StatusOr<std::vector<bool>> present = client->MightContain("outlive", {item});
      ASSERT_TRUE(present.ok()) << present.status();
      EXPECT_TRUE((*present)[0]) << item << " read absent after its add was acknowledged";
    }
    EXPECT_LE(failed_writes, 1) << "after follower " << victim << " was killed";
    ASSERT_TRUE(cluster.StartFollower(victim));  // back on its port, for the next round
  }
}

// --max_connection_age: the server sends each connection GOAWAY after its age, so a client
// balancing over a DNS name resolves it again (and finds pods added since). A pipelined
// client's stream, opened before, goes on to its end on the old connection.
TEST(ClientConnectionAgeTest, AConnectionIsSentAwayAfterItsAgeWhileItsStreamGoesOn) {
  bloomtest::TempDir data;
  auto server = bloomtest::ServerProcess::Start(data.path(), {"--max_connection_age=1s"});
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.pipelined = true;
  auto pipelined = BloomClient::Connect(server->target(), options);
  auto unary = BloomClient::Connect(server->target());
  const bloom::v1::FilterSpec spec = Spec();
  ASSERT_TRUE(pipelined->Add("aged", {"early"}, &spec).ok());
  ASSERT_TRUE(unary->MightContain("aged", {"early"}).ok());
  ASSERT_EQ(unary->channel()->GetState(/*try_to_connect=*/false), GRPC_CHANNEL_READY);
  // The GOAWAY comes after 0.9-1.1 s: the unary client's channel leaves READY.
  EXPECT_TRUE(unary->channel()->WaitForStateChange(
      GRPC_CHANNEL_READY, absl::ToChronoTime(absl::Now() + absl::Seconds(10))));
  absl::SleepFor(absl::Milliseconds(500));
  for (int i = 0; i < 20; ++i) {  // both clients go on without an error
    const std::string item = absl::StrCat("late-", i);
    absl::StatusOr<std::vector<bool>> added = pipelined->Add("aged", {item}, &spec);
    ASSERT_TRUE(added.ok()) << added.status();
    absl::StatusOr<std::vector<bool>> present = unary->MightContain("aged", {item, "early"});
    ASSERT_TRUE(present.ok()) << present.status();
    EXPECT_EQ(*present, std::vector<bool>({true, true}));
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ClientBalancingTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Pipelined" : "Unary";
                         });

}  // namespace

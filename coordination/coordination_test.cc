// EtcdClient and LeaseKeeper against a real etcd (tests/etcd_process.h).
#include <atomic>
#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "coordination/etcd_client.h"
#include "coordination/lease_keeper.h"
#include "gtest/gtest.h"
#include "tests/support/etcd_process.h"
#include "tests/support/testing.h"

namespace coordination {
namespace {

using bloomtest::EtcdProcess;

using bloomtest::StatusOf;
using bloomtest::WaitFor;

class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = EtcdProcess::Start();
    ASSERT_NE(etcd_, nullptr);
    absl::StatusOr<std::unique_ptr<EtcdClient>> client =
        EtcdClient::Connect({etcd_->endpoint()}, absl::Seconds(2));
    ASSERT_OK(StatusOf(client));
    client_ = *std::move(client);
  }

  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdTest, PutGetAndPrefixReadTheStore) {
  absl::StatusOr<int64_t> first = client_->Put("c1/members/a", "1");
  ASSERT_OK(StatusOf(first));
  ASSERT_OK(StatusOf(client_->Put("c1/members/b", "2")));
  ASSERT_OK(StatusOf(client_->Put("c10/members/x", "other cluster")));  // shares "c1" but not "c1/"
  ASSERT_OK(StatusOf(client_->Put("c1/members/a", "3")));

  int64_t revision = 0;
  absl::StatusOr<KeyValue> a = client_->Get("c1/members/a", &revision);
  ASSERT_OK(StatusOf(a));
  EXPECT_EQ(a->value, "3");
  EXPECT_EQ(a->create_revision, *first);
  EXPECT_GT(a->mod_revision, a->create_revision);
  EXPECT_EQ(revision, a->mod_revision);  // the last write of all

  absl::StatusOr<std::vector<KeyValue>> members = client_->GetPrefix("c1/");
  ASSERT_OK(StatusOf(members));
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[0].key, "c1/members/a");
  EXPECT_EQ((*members)[1].key, "c1/members/b");

  EXPECT_TRUE(absl::IsNotFound(client_->Get("c1/none").status()));
}

TEST_F(EtcdTest, CreateIfAbsentLetsOneOfManyWin) {
  constexpr int kContenders = 8;
  std::atomic<int> winners{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  threads.reserve(kContenders);
  for (int i = 0; i < kContenders; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<bool> created =
          client_->CreateIfAbsent("c1/leader", "pod-" + std::to_string(i));
      if (!created.ok()) ++errors;
      if (created.ok() && *created) ++winners;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(winners.load(), 1);
  absl::StatusOr<KeyValue> leader = client_->Get("c1/leader");
  ASSERT_OK(StatusOf(leader));
  EXPECT_EQ(leader->value.rfind("pod-", 0), 0u);
}

TEST_F(EtcdTest, GuardedWritesCompareBeforeTheyWrite) {
  ASSERT_OK(StatusOf(client_->Put("k", "v1")));
  absl::StatusOr<KeyValue> kv = client_->Get("k");
  ASSERT_OK(StatusOf(kv));
  // A stale revision loses; the current one wins, once.
  absl::StatusOr<bool> stale = client_->PutIfModRevision("k", "x", kv->mod_revision - 1);
  ASSERT_OK(StatusOf(stale));
  EXPECT_FALSE(*stale);
  absl::StatusOr<bool> current = client_->PutIfModRevision("k", "v2", kv->mod_revision);
  ASSERT_OK(StatusOf(current));
  EXPECT_TRUE(*current);
  absl::StatusOr<bool> again = client_->PutIfModRevision("k", "v3", kv->mod_revision);
  ASSERT_OK(StatusOf(again));
  EXPECT_FALSE(*again);
  EXPECT_EQ(client_->Get("k")->value, "v2");

  absl::StatusOr<bool> wrong = client_->DeleteIfValue("k", "v1");
  ASSERT_OK(StatusOf(wrong));
  EXPECT_FALSE(*wrong);
  absl::StatusOr<bool> right = client_->DeleteIfValue("k", "v2");
  ASSERT_OK(StatusOf(right));
  EXPECT_TRUE(*right);
  EXPECT_TRUE(absl::IsNotFound(client_->Get("k").status()));
}

TEST_F(EtcdTest, RevokingALeaseDeletesItsKeys) {
  absl::StatusOr<EtcdLease> lease = client_->GrantLease(absl::Seconds(30));
  ASSERT_OK(StatusOf(lease));
  EXPECT_EQ(lease->ttl, absl::Seconds(30));
  ASSERT_OK(StatusOf(client_->Put("c1/members/a", "addr", lease->id)));
  EXPECT_EQ(client_->Get("c1/members/a")->lease, lease->id);
  absl::StatusOr<absl::Duration> renewed = client_->KeepAliveOnce(lease->id);
  ASSERT_OK(StatusOf(renewed));
  EXPECT_EQ(*renewed, absl::Seconds(30));

  ASSERT_OK(StatusOf(client_->RevokeLease(lease->id)));
  EXPECT_TRUE(absl::IsNotFound(client_->Get("c1/members/a").status()));
  EXPECT_TRUE(absl::IsNotFound(client_->KeepAliveOnce(lease->id).status()));
  EXPECT_OK(client_->RevokeLease(lease->id));  // already gone: nothing to do
  EXPECT_TRUE(absl::IsInvalidArgument(client_->GrantLease(absl::Milliseconds(500)).status()));
}

TEST_F(EtcdTest, AWatchSeesPutsAndDeletesUnderItsPrefixInOrder) {
  int64_t revision = 0;
  ASSERT_OK(StatusOf(client_->Put("c1/leader", "pod-0")));
  ASSERT_OK(StatusOf(client_->Get("c1/leader", &revision)));
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
      client_->Watch("c1/", /*prefix=*/true, revision + 1);
  ASSERT_OK(StatusOf(watch));
  ASSERT_OK(StatusOf(client_->Put("c2/leader", "elsewhere")));  // not watched
  ASSERT_OK(StatusOf(client_->Put("c1/leader", "pod-1")));
  ASSERT_TRUE(*client_->DeleteIfValue("c1/leader", "pod-1"));

  std::vector<WatchEvent> seen;
  while (seen.size() < 2) {
    absl::StatusOr<std::vector<WatchEvent>> events = (*watch)->Next();
    ASSERT_OK(StatusOf(events));
    seen.insert(seen.end(), events->begin(), events->end());
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(seen[0].kv.key, "c1/leader");
  EXPECT_EQ(seen[0].kv.value, "pod-1");
  EXPECT_EQ(seen[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(seen[1].kv.key, "c1/leader");
  EXPECT_GT(seen[1].kv.mod_revision, seen[0].kv.mod_revision);

  // Cancel ends a Next() blocked on another thread.
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(200));
    (*watch)->Cancel();
  });
  EXPECT_TRUE(absl::IsCancelled((*watch)->Next().status()));
  canceller.join();
}

TEST_F(EtcdTest, CallsMoveToTheNextEndpointWhenOneIsDown) {
  const std::string dead = "127.0.0.1:" + std::to_string(bloomtest::FreeLoopbackPort());
  absl::StatusOr<std::unique_ptr<EtcdClient>> client =
      EtcdClient::Connect({dead, etcd_->endpoint()}, absl::Seconds(2));
  ASSERT_OK(StatusOf(client));
  EXPECT_EQ((*client)->current_endpoint(), dead);
  absl::Status first = (*client)->Put("k", "v").status();
  EXPECT_TRUE(absl::IsUnavailable(first) || absl::IsDeadlineExceeded(first)) << first;
  EXPECT_NE(first.message().find(dead), absl::string_view::npos) << first;
  EXPECT_EQ((*client)->current_endpoint(), etcd_->endpoint());
  EXPECT_OK(StatusOf((*client)->Put("k", "v")));

  EXPECT_TRUE(absl::IsInvalidArgument(EtcdClient::Connect({}, absl::Seconds(1)).status()));
}

TEST_F(EtcdTest, AKeptLeaseOutlivesItsTtlAndItsKeysStay) {
  LeaseOptions options;
  options.ttl = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<LeaseKeeper>> keeper = LeaseKeeper::Start(client_.get(), options);
  ASSERT_OK(StatusOf(keeper));
  ASSERT_OK(StatusOf(client_->Put("c1/leader", "pod-0", (*keeper)->id())));
  EXPECT_TRUE((*keeper)->Held());
  // The grant's bound is at most its TTL (less the margins) ahead.
  EXPECT_LE((*keeper)->held_until(), bloomtime::Clock::Monotonic()->Now() + absl::Seconds(2));

  absl::SleepFor(absl::Seconds(5));  // two and a half TTLs
  EXPECT_TRUE((*keeper)->Held());
  EXPECT_FALSE((*keeper)->Lost());
  EXPECT_OK(StatusOf(client_->Get("c1/leader")));

  ASSERT_OK(StatusOf((*keeper)->Revoke()));
  EXPECT_FALSE((*keeper)->Held());
  EXPECT_TRUE((*keeper)->Lost());
  EXPECT_TRUE(absl::IsNotFound(client_->Get("c1/leader").status()));
}

TEST_F(EtcdTest, AStoppedEtcdFencesTheHolderBeforeTheLeaseCanExpire) {
  std::atomic<int> lost_calls{0};
  LeaseOptions options;
  options.ttl = absl::Seconds(2);
  options.on_lost = [&] { ++lost_calls; };
  absl::StatusOr<std::unique_ptr<LeaseKeeper>> keeper = LeaseKeeper::Start(client_.get(), options);
  ASSERT_OK(StatusOf(keeper));
  ASSERT_TRUE(WaitFor([&] { return (*keeper)->Held(); }));
  // etcd stops answering: no renewal can succeed. From the last renewal that succeeded, etcd
  // keeps the lease at least its TTL; the keeper must let go before that.
  const bloomtime::Clock& clock = *bloomtime::Clock::Monotonic();
  const absl::Time stopped = clock.Now();
  etcd_->Signal(SIGSTOP);
  // Every renewal that succeeded was sent before now, so the bound is under a TTL from now.
  EXPECT_LT((*keeper)->held_until(), stopped + absl::Seconds(2));
  ASSERT_TRUE(WaitFor([&] { return !(*keeper)->Held(); }, absl::Seconds(5)));
  const absl::Time fenced = clock.Now();
  EXPECT_LT(fenced - stopped, absl::Seconds(2));  // before the lease could expire
  ASSERT_TRUE(WaitFor([&] { return (*keeper)->Lost(); }, absl::Seconds(5)));
  EXPECT_EQ(lost_calls.load(), 1);

  // etcd comes back: the lease is lost for good, whatever etcd now says of it.
  etcd_->Signal(SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return client_->Put("c1/back", "yes").ok(); }, absl::Seconds(10)));
  EXPECT_FALSE((*keeper)->Held());
  EXPECT_TRUE((*keeper)->Lost());
  EXPECT_EQ(lost_calls.load(), 1);
}

// The fence by stepped time (a ManualClock for the keeper; etcd keeps real time): the bound is
// exactly what the header says, a renewal moves it from the moment it was sent, and a holder
// whose clock passes the bound (a process stopped that long) is fenced at once, while etcd
// still holds the lease: before anyone else could take the leader key.
TEST_F(EtcdTest, TheFenceIsTheRenewalPlusTheTtlLessTheMargins) {
  bloomtime::ManualClock clock;
  std::atomic<int> lost_calls{0};
  LeaseOptions options;
  options.ttl = absl::Seconds(3);
  options.renewals_per_ttl = 3;  // one renewal a second
  options.on_lost = [&] { ++lost_calls; };
  options.clock = &clock;
  const absl::Duration held_for =
      options.ttl * (1.0 - options.clock_rate_margin) - options.safety_margin;  // 2.44 s
  const absl::Time granted = clock.Now();
  absl::StatusOr<std::unique_ptr<LeaseKeeper>> keeper = LeaseKeeper::Start(client_.get(), options);
  ASSERT_OK(StatusOf(keeper));
  EXPECT_EQ((*keeper)->held_until(), granted + held_for);

  // The first renewal is due a second later: before, nothing moves.
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  clock.Advance(absl::Milliseconds(999));
  EXPECT_EQ((*keeper)->held_until(), granted + held_for);
  EXPECT_TRUE((*keeper)->Held());
  // At the second, it renews; its bound counts from when it was sent.
  clock.Advance(absl::Milliseconds(1));
  const absl::Time renewed = clock.Now();
  ASSERT_TRUE(WaitFor([&] { return (*keeper)->held_until() == renewed + held_for; }));
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));  // waiting for the next one

  // Stalled past the bound (no renewal ran meanwhile): fenced at once, and lost for good.
  clock.Advance(held_for);
  EXPECT_FALSE((*keeper)->Held());
  ASSERT_TRUE(WaitFor([&] { return (*keeper)->Lost(); }));
  EXPECT_EQ(lost_calls.load(), 1);
  EXPECT_FALSE((*keeper)->Held());
  // etcd, on real time, still holds the lease: the fence came before any expiry.
  EXPECT_OK(StatusOf(client_->KeepAliveOnce((*keeper)->id())));
  ASSERT_OK(client_->RevokeLease((*keeper)->id()));
}

TEST_F(EtcdTest, AnExpiredLeaseIsReportedLost) {
  absl::StatusOr<EtcdLease> lease = client_->GrantLease(absl::Seconds(1));
  ASSERT_OK(StatusOf(lease));
  ASSERT_OK(client_->RevokeLease(lease->id));  // what expiry does, at once
  EXPECT_TRUE(absl::IsNotFound(client_->KeepAliveOnce(lease->id).status()));

  LeaseOptions options;
  options.ttl = absl::Seconds(2);
  options.renewals_per_ttl = 4;
  absl::StatusOr<std::unique_ptr<LeaseKeeper>> keeper = LeaseKeeper::Start(client_.get(), options);
  ASSERT_OK(StatusOf(keeper));
  ASSERT_OK(client_->RevokeLease((*keeper)->id()));  // behind the keeper's back
  EXPECT_TRUE(WaitFor([&] { return (*keeper)->Lost(); }, absl::Seconds(3)));
  EXPECT_FALSE((*keeper)->Held());

  options.renewals_per_ttl = 1;
  EXPECT_TRUE(absl::IsInvalidArgument(LeaseKeeper::Start(client_.get(), options).status()));
}

// An etcd whose Watch ends every stream at once, before it can answer "created" (as a member
// cut off by gRPC's keep-alive does).
class EndingWatchService final : public etcdserverpb::Watch::Service {
  grpc::Status Watch(grpc::ServerContext* /*context*/,
                     grpc::ServerReaderWriter<etcdserverpb::WatchResponse,
                                              etcdserverpb::WatchRequest>* /*stream*/) override {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away");
  }
};

TEST(EtcdWatchTest, AWatchEndedBeforeItWasCreatedFailsUnavailable) {
  EndingWatchService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  absl::StatusOr<std::unique_ptr<EtcdClient>> client =
      EtcdClient::Connect({"127.0.0.1:" + std::to_string(port)}, absl::Seconds(2));
  ASSERT_OK(StatusOf(client));
  // The stream is finished once, here; destroying the failed watch must not finish it again.
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = (*client)->Watch("c1/leader", false, 1);
  EXPECT_TRUE(absl::IsUnavailable(watch.status())) << watch.status();
  server->Shutdown();
}

}  // namespace
}  // namespace coordination

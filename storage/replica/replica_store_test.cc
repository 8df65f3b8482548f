// A replica store (StoreOptions::replica) that follows a primary through its RocksDB log:
// snapshot, ReadLogSince, ApplyReplicated; and ReplicaAcks, the primary's wait for followers.
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/filter_store.h"
#include "storage/replica/replica_acks.h"
#include "storage/replica/replication_log.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

std::string ExportAll(FilterStore& store, absl::string_view name) {
  std::string dump;
  absl::Status s = store.Export(name, [&](absl::string_view chunk) {
    dump.append(chunk.data(), chunk.size());
    return absl::OkStatus();
  });
  EXPECT_OK(s);
  return dump;
}

class ReplicaStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.data_dir = primary_dir_.path();
    options.background_checkpoints = false;
    options.log_retention = {absl::Hours(1), 1 << 30};
    absl::StatusOr<std::unique_ptr<FilterStore>> primary = FilterStore::Open(options);
    ASSERT_OK(primary.status());
    primary_ = *std::move(primary);
  }

  // A replica from a snapshot of the primary taken now.
  void OpenReplica(StoreOptions options = {}) {
    const std::string dir = absl::StrCat(replica_root_.path(), "/replica");
    absl::StatusOr<uint64_t> sequence = CreateSnapshot(primary_->database(), dir);
    ASSERT_OK(sequence.status());
    options.data_dir = dir;
    options.replica = true;
    absl::StatusOr<std::unique_ptr<FilterStore>> replica = FilterStore::Open(options);
    ASSERT_OK(replica.status());
    replica_ = *std::move(replica);
    EXPECT_EQ(replica_->LatestSequence(), *sequence);
  }

  // Applies everything the primary wrote since the replica's latest sequence.
  void CatchUp() {
    while (replica_->LatestSequence() < primary_->LatestSequence()) {
      absl::StatusOr<LogRead> read =
          ReadLogSince(primary_->database(), replica_->LatestSequence() + 1, 64 << 10);
      ASSERT_OK(read.status());
      ASSERT_FALSE(read->batches.empty());
      ASSERT_OK(replica_->ApplyReplicated(read->batches, /*sync=*/true));
    }
    EXPECT_EQ(replica_->LatestSequence(), primary_->LatestSequence());
  }

  bloomtest::TempDir primary_dir_;
  bloomtest::TempDir replica_root_;
  std::unique_ptr<FilterStore> primary_;
  std::unique_ptr<FilterStore> replica_;
};

TEST_F(ReplicaStoreTest, FollowsAddsReservesCheckpointsAndDeletes) {
  ASSERT_OK(primary_->Reserve("before", {.capacity = 1000, .error_rate = 0.01}).status());
  const std::vector<std::string> early = bloomtest::Items("early", 0, 500);
  ASSERT_OK(primary_->Add("before", bloomtest::Views(early), nullptr).status());
  OpenReplica();

  // "before" is resident on the replica (loaded at its start): journal records are replayed
  // into it; "created" is new, and loads from RocksDB.
  const std::vector<std::string> late = bloomtest::Items("late", 0, 3000);  // grows the chain
  ASSERT_OK(primary_->Add("before", bloomtest::Views(late), nullptr).status());
  const bloom::FilterParams spec{.capacity = 100, .error_rate = 0.01};
  ASSERT_OK(primary_->Add("created", bloomtest::Views(early), &spec).status());
  ASSERT_OK(primary_->Reserve("doomed", {.capacity = 10, .error_rate = 0.1}).status());
  CatchUp();
  for (const char* name : {"before", "created"}) {
    // Compared before this test's checks of the replica: a dump carries its server's count of
    // checked items (checks, check_hits), which are each pod's own.
    EXPECT_EQ(ExportAll(*replica_, name), ExportAll(*primary_, name)) << name;
    const std::vector<std::string>& items = std::string(name) == "before" ? late : early;
    absl::StatusOr<std::vector<bool>> present =
        replica_->MightContain(name, bloomtest::Views(items));
    ASSERT_OK(present.status());
    for (size_t i = 0; i < items.size(); ++i) ASSERT_TRUE((*present)[i]) << name << " " << i;
  }

  // Checkpoints and deletes are the primary's decisions, and arrive as such.
  ASSERT_OK(primary_->CheckpointAll());
  ASSERT_OK(primary_->Delete("doomed"));
  CatchUp();
  EXPECT_TRUE(absl::IsNotFound(replica_->Stats("doomed").status()));
  // The checkpoint wrote the primary's counts of checks: the replica's filter loaded again.
  EXPECT_EQ(ExportAll(*replica_, "before"), ExportAll(*primary_, "before"));
  absl::StatusOr<FilterInfo> stats = replica_->Stats("before");
  ASSERT_OK(stats.status());
  EXPECT_EQ(stats->stats.items_added, primary_->Stats("before")->stats.items_added);
}

TEST_F(ReplicaStoreTest, ReadersMeetBatchesLoadsAndEvictionsWithoutMissingAnAdd) {
  // Readers on the replica race the applier (replays, reloads after checkpoints) and the
  // evictor (a memory limit of 6 of the 8 filters): an add whose sequence the replica shows as
  // visible must read present.
  constexpr int kFilters = 8;
  const bloom::FilterParams spec{.capacity = 2000, .error_rate = 0.01};
  for (int f = 0; f < kFilters; ++f) {
    ASSERT_OK(primary_->Reserve(absl::StrCat("f", f), spec).status());
  }
  StoreOptions options;
  options.memory_limit_bytes = 6 * (2400 + kResidentFilterOverheadBytes);
  OpenReplica(options);
  struct Added {
    std::string filter, item;
    uint64_t sequence;
  };
  std::mutex mu;
  std::vector<Added> added;
  std::atomic<bool> done{false};
  std::atomic<int> absent{0}, checked{0};
  std::thread applier([&] {
    while (!done.load() || replica_->LatestSequence() < primary_->LatestSequence()) {
      absl::StatusOr<LogRead> read =
          ReadLogSince(primary_->database(), replica_->LatestSequence() + 1, 16 << 10);
      ASSERT_OK(read.status());
      ASSERT_OK(replica_->ApplyReplicated(read->batches, /*sync=*/false));
    }
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937 random(r);
      while (!done.load()) {
        Added pick;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (added.empty()) continue;
          pick = added[random() % added.size()];
        }
        if (pick.sequence > replica_->VisibleSequence()) continue;
        const std::vector<absl::string_view> items = {pick.item};
        absl::StatusOr<std::vector<bool>> present = replica_->MightContain(pick.filter, items);
        ASSERT_OK(present.status());
        checked.fetch_add(1);
        if (!(*present)[0]) absent.fetch_add(1);
      }
    });
  }
  for (int round = 0; round < 2000; ++round) {
    const std::string filter = absl::StrCat("f", round % kFilters);
    const std::string item = absl::StrCat("item-", round);
    const std::vector<absl::string_view> items = {item};
    ASSERT_OK(primary_->Add(filter, items, nullptr).status());
    {
      std::lock_guard<std::mutex> lock(mu);
      added.push_back({filter, item, primary_->LatestSequence()});
    }
    if (round % 100 == 99) ASSERT_OK(primary_->CheckpointAll());  // reloads on the replica
  }
  // The readers go on a while after the last add, as the applier catches up.
  ASSERT_TRUE(bloomtest::WaitFor([&] { return checked.load() >= 1000; }));
  done.store(true);
  applier.join();
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(absent.load(), 0) << "of " << checked.load() << " checks";
  const StoreFigures figures = replica_->Figures();
  EXPECT_GT(figures.loads, 0u);  // checkpoints made filters load again, under the readers
  EXPECT_GT(figures.evictions, 0u);
  for (const Added& a : added) {
    const std::vector<absl::string_view> items = {a.item};
    absl::StatusOr<std::vector<bool>> present = replica_->MightContain(a.filter, items);
    ASSERT_OK(present.status());
    EXPECT_TRUE((*present)[0]) << a.filter << " " << a.item;
  }
}

TEST_F(ReplicaStoreTest, RefusesWritesAndBatchesThatDoNotFollowOn) {
  OpenReplica();
  EXPECT_TRUE(absl::IsFailedPrecondition(
      replica_->Reserve("x", {.capacity = 10, .error_rate = 0.1}).status()));
  std::vector<std::string> items = bloomtest::Items("x", 0, 3);
  const bloom::FilterParams spec{.capacity = 10, .error_rate = 0.1};
  EXPECT_TRUE(
      absl::IsFailedPrecondition(replica_->Add("x", bloomtest::Views(items), &spec).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(replica_->Delete("x")));
  const uint64_t before = replica_->LatestSequence();

  ASSERT_OK(primary_->Reserve("a", {.capacity = 10, .error_rate = 0.1}).status());
  ASSERT_OK(primary_->Reserve("b", {.capacity = 10, .error_rate = 0.1}).status());
  absl::StatusOr<LogRead> read = ReadLogSince(primary_->database(), before + 1, 1 << 20);
  ASSERT_OK(read.status());
  ASSERT_GE(read->batches.size(), 2u);
  // Skipping a batch is refused, and changes nothing.
  EXPECT_TRUE(
      absl::IsDataLoss(replica_->ApplyReplicated(absl::MakeSpan(read->batches).subspan(1), true)));
  EXPECT_EQ(replica_->LatestSequence(), before);
  ASSERT_OK(replica_->ApplyReplicated(read->batches, true));
  EXPECT_OK(replica_->Stats("b").status());
  // A primary refuses a replica's only write.
  EXPECT_TRUE(absl::IsFailedPrecondition(primary_->ApplyReplicated(read->batches, true)));
}

TEST_F(ReplicaStoreTest, ReadLogSinceAnswersOutOfRangeOutsideTheLog) {
  ASSERT_OK(primary_->Reserve("a", {.capacity = 10, .error_rate = 0.1}).status());
  const uint64_t latest = primary_->LatestSequence();
  absl::StatusOr<LogRead> none = ReadLogSince(primary_->database(), latest + 1, 1 << 20);
  ASSERT_OK(none.status());
  EXPECT_TRUE(none->batches.empty());
  EXPECT_EQ(none->next, latest + 1);
  EXPECT_TRUE(absl::IsOutOfRange(ReadLogSince(primary_->database(), latest + 5, 1 << 20).status()));
  absl::StatusOr<LogRead> all = ReadLogSince(primary_->database(), 1, 1 << 20);
  ASSERT_OK(all.status());
  EXPECT_EQ(all->next, latest + 1);
}

TEST(ReplicaIdleTouchesTest, ReadsOnTheReplicaKeepAnIdleFilterAliveOnThePrimary) {
  bloomtest::TempDir primary_dir, replica_root;
  bloomtime::ManualClock clock;  // the primary's: it decides expiry
  StoreOptions options;
  options.data_dir = primary_dir.path();
  options.background_checkpoints = false;
  options.clock = &clock;
  absl::StatusOr<std::unique_ptr<FilterStore>> primary = FilterStore::Open(options);
  ASSERT_OK(primary.status());
  bloom::FilterParams spec{.capacity = 100, .error_rate = 0.01};
  spec.idle_ttl = absl::Seconds(10);
  ASSERT_OK((*primary)->Reserve("feed:1", spec).status());
  ASSERT_OK((*primary)->Reserve("feed:2", spec).status());
  const std::string dir = absl::StrCat(replica_root.path(), "/replica");
  ASSERT_OK(CreateSnapshot((*primary)->database(), dir).status());
  StoreOptions replica_options;
  replica_options.data_dir = dir;
  replica_options.replica = true;
  absl::StatusOr<std::unique_ptr<FilterStore>> replica = FilterStore::Open(replica_options);
  ASSERT_OK(replica.status());

  clock.Advance(absl::Seconds(8));
  ASSERT_OK((*replica)->MightContain("feed:1", {"x"}).status());  // only feed:1 is read
  std::vector<std::string> touched = (*replica)->TakeIdleTouches();
  EXPECT_EQ(touched, std::vector<std::string>({"feed:1"}));
  EXPECT_TRUE((*replica)->TakeIdleTouches().empty());  // taken
  (*primary)->TouchIdle(touched);

  clock.Advance(absl::Seconds(4));  // 12 s after the reserve, 4 s after the replica's read
  EXPECT_OK((*primary)->Stats("feed:1").status());
  EXPECT_TRUE(absl::IsNotFound((*primary)->Stats("feed:2").status()));
}

TEST(ReplicaAcksTest, AnswersOnceEnoughFollowersAckInOrder) {
  ReplicaAcks acks(/*required=*/2, absl::Seconds(30));
  const int a = acks.Connect("a");
  const int b = acks.Connect("b");
  std::vector<int> order;
  std::mutex mu;
  for (int sequence : {5, 10, 10}) {
    acks.WhenAcked(sequence, [&, sequence](const absl::Status& s) {
      EXPECT_OK(s);
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(sequence);
    });
  }
  acks.Ack(a, 10);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(order.empty());  // one of two
  }
  acks.Ack(b, 7);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(order, std::vector<int>({5}));
  }
  acks.Ack(b, 12);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order, std::vector<int>({5, 10, 10}));
}

TEST(ReplicaAcksTest, FailsUnavailableWhenTooFewFollowersAnswerInTime) {
  ReplicaAcks acks(/*required=*/1, absl::Milliseconds(100));
  const int a = acks.Connect("a");
  const absl::Time start = absl::Now();
  absl::Status waited = acks.WaitAcked(3);
  EXPECT_TRUE(absl::IsUnavailable(waited)) << waited;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(acks.timeouts(), 1u);
  acks.Ack(a, 3);
  EXPECT_OK(acks.WaitAcked(3));
  acks.Disconnect(a);
  EXPECT_TRUE(absl::IsUnavailable(acks.WaitAcked(4)));
}

TEST(ReplicaAcksTest, WithASyncSetOnlyItsFollowersCount) {
  ReplicaAcks acks(/*required=*/1, absl::Seconds(30));
  const int a = acks.Connect("a");
  const int b = acks.Connect("b");
  acks.SetVerified(a, true);
  acks.SetVerified(b, true);
  acks.SetSyncSet({"a"});
  std::atomic<int> answered{0};
  acks.WhenAcked(10, [&](const absl::Status& s) {
    EXPECT_OK(s);
    ++answered;
  });
  acks.Ack(b, 10);
  EXPECT_EQ(answered.load(), 0);  // b is not in the set
  EXPECT_EQ(acks.acknowledged_sequence(), 0u);
  acks.Ack(a, 10);
  EXPECT_EQ(answered.load(), 1);
  EXPECT_EQ(acks.acknowledged_sequence(), 10u);

  // b joins the set: what it already holds answers the waiting writes at once.
  acks.WhenAcked(20, [&](const absl::Status& s) {
    EXPECT_OK(s);
    ++answered;
  });
  acks.Ack(b, 20);
  EXPECT_EQ(answered.load(), 1);
  acks.SetSyncSet({"a", "b"});
  EXPECT_EQ(answered.load(), 2);
  EXPECT_EQ(acks.acknowledged_sequence(), 20u);

  // What was acknowledged stays so when its followers go.
  acks.Disconnect(a);
  acks.Disconnect(b);
  EXPECT_EQ(acks.acknowledged_sequence(), 20u);
  // An empty set counts nobody: a new primary's, until its followers caught up.
  acks.SetSyncSet({});
  const int c = acks.Connect("c");
  acks.SetVerified(c, true);
  acks.Ack(c, 30);
  EXPECT_EQ(acks.acknowledged_sequence(), 20u);
}

// A stream that names itself after a member of the set counts only once it proved to be that
// member: an impostor's acknowledgements answer nothing, and the real member's still do.
TEST(ReplicaAcksTest, InASyncSetOnlyVerifiedStreamsCount) {
  ReplicaAcks acks(/*required=*/1, absl::Seconds(30));
  acks.SetSyncSet({"pod-2"});
  const int impostor = acks.Connect("pod-2", "not-the-proof");
  std::atomic<int> answered{0};
  acks.WhenAcked(7, [&](const absl::Status& s) {
    EXPECT_OK(s);
    ++answered;
  });
  acks.Ack(impostor, 7);
  EXPECT_EQ(answered.load(), 0);
  EXPECT_EQ(acks.acknowledged_sequence(), 0u);
  const std::vector<ReplicaAcks::Follower> followers = acks.Followers();
  ASSERT_EQ(followers.size(), 1u);
  EXPECT_EQ(followers[0].proof, "not-the-proof");
  EXPECT_FALSE(followers[0].verified);

  const int real = acks.Connect("pod-2", "proof");
  acks.Ack(real, 6);
  acks.SetVerified(real, true);  // what it acknowledged before counts once verified
  EXPECT_EQ(answered.load(), 0);
  EXPECT_EQ(acks.acknowledged_sequence(), 6u);
  acks.Ack(real, 7);
  EXPECT_EQ(answered.load(), 1);
}

// A stream that started at a claimed sequence covers no write before it, however far it later
// acknowledges: a waiting write is answered only by a stream that was sent it.
TEST(ReplicaAcksTest, AStreamCoversOnlyWhatItWasSent) {
  std::atomic<int> answered{0};  // outlives `acks`, which fails its waiters when destroyed
  ReplicaAcks acks(/*required=*/1, absl::Seconds(30));
  acks.WhenAcked(10, [&](const absl::Status& s) {
    EXPECT_OK(s);
    ++answered;
  });
  const int claimed = acks.Connect("liar", "", /*from=*/11);
  acks.Ack(claimed, 20);
  EXPECT_EQ(answered.load(), 0);
  acks.WhenAcked(15, [&](const absl::Status& s) {  // behind the waiting one
    EXPECT_OK(s);
    ++answered;
  });
  EXPECT_EQ(answered.load(), 0);
  const int sent = acks.Connect("real", "", /*from=*/5);
  acks.Ack(sent, 12);
  EXPECT_EQ(answered.load(), 2);  // 10 by the stream sent it, then 15 (both cover it)
  acks.WhenAcked(30, [&](const absl::Status&) { ++answered; });
  acks.WhenAcked(3, [&](const absl::Status&) { ++answered; });  // before both streams' starts
  acks.Ack(claimed, 30);
  EXPECT_EQ(answered.load(), 2);  // 3, the first in order, is covered by none
  acks.Disconnect(claimed);
  acks.Disconnect(sent);
}

TEST(ReplicaAcksTest, InASyncSetAFollowerCountsOnceHoweverManyStreamsItHas) {
  ReplicaAcks acks(/*required=*/2, absl::Seconds(30));
  acks.SetSyncSet({"a", "b"});
  const int first = acks.Connect("a");
  const int second = acks.Connect("a");  // reconnected before its old stream was gone
  acks.SetVerified(first, true);
  acks.SetVerified(second, true);
  std::atomic<int> answered{0};
  acks.WhenAcked(5, [&](const absl::Status& s) {
    EXPECT_OK(s);
    ++answered;
  });
  acks.Ack(first, 5);
  acks.Ack(second, 5);
  EXPECT_EQ(answered.load(), 0);  // one follower, not two
  const int b = acks.Connect("b");
  acks.SetVerified(b, true);
  acks.Ack(b, 5);
  EXPECT_EQ(answered.load(), 1);
}

TEST(ReplicaAcksTest, WithoutASyncSetEachStreamCounts) {
  // Followers started with --replicate_from on one host may share their default name.
  ReplicaAcks acks(/*required=*/2, absl::Seconds(30));
  const int first = acks.Connect("host:0");
  const int second = acks.Connect("host:0");
  acks.Ack(first, 5);
  acks.Ack(second, 5);
  EXPECT_OK(acks.WaitAcked(5));
}

}  // namespace
}  // namespace storage

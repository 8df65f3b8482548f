#include "storage/write/wal_sync.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/filter_store.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

// A sync that can be held open, and counts how often it started.
struct FakeLog {
  std::atomic<int> started{0};
  std::atomic<bool> hold{false};
  absl::Status result;

  absl::Status Sync() {
    started.fetch_add(1);
    while (hold.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    return result;
  }
};

TEST(WalSyncerTest, EveryRequestIsAnsweredAfterASyncThatStartedLater) {
  FakeLog log;
  WalSyncer syncer([&] { return log.Sync(); });
  constexpr int kThreads = 8, kPerThread = 200;
  std::atomic<int> answered{0}, too_early{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        const int started_before = log.started.load();
        std::promise<void> done;
        syncer.AfterSync([&, started_before](absl::Status status) {
          EXPECT_TRUE(status.ok());
          // The sync that served this request started after it was queued.
          if (log.started.load() <= started_before) too_early.fetch_add(1);
          answered.fetch_add(1);
          done.set_value();
        });
        done.get_future().wait();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(answered.load(), kThreads * kPerThread);
  EXPECT_EQ(too_early.load(), 0);
  EXPECT_EQ(syncer.requests(), static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_LE(syncer.syncs(), syncer.requests());
  EXPECT_EQ(syncer.syncs(), static_cast<uint64_t>(log.started.load()));
}

TEST(WalSyncerTest, RequestsQueuedDuringASyncShareTheNextOne) {
  FakeLog log;
  log.hold = true;
  WalSyncer syncer([&] { return log.Sync(); });
  std::atomic<int> answered{0};
  syncer.AfterSync([&](absl::Status) { answered.fetch_add(1); });
  while (log.started.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  // The first sync is running: these 50 wait for the next one, all of them together.
  for (int i = 0; i < 50; ++i) syncer.AfterSync([&](absl::Status) { answered.fetch_add(1); });
  EXPECT_EQ(answered.load(), 0);  // nothing is answered before its sync finished
  log.hold = false;
  syncer.Stop();
  EXPECT_EQ(answered.load(), 51);
  EXPECT_EQ(syncer.syncs(), 2u);
  EXPECT_EQ(syncer.requests(), 51u);
}

TEST(WalSyncerTest, AFailedSyncFailsTheRequestsItServed) {
  FakeLog log;
  log.result = absl::UnavailableError("disk gone");
  WalSyncer syncer([&] { return log.Sync(); });
  std::promise<absl::Status> answer;
  syncer.AfterSync([&](absl::Status status) { answer.set_value(status); });
  const absl::Status status = answer.get_future().get();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "disk gone");
}

TEST(WalSyncerTest, AfterStopARequestSyncsInTheCallersThread) {
  FakeLog log;
  WalSyncer syncer([&] { return log.Sync(); });
  syncer.Stop();
  const int before = log.started.load();
  bool answered = false;
  const std::thread::id caller = std::this_thread::get_id();
  syncer.AfterSync([&](absl::Status status) {
    EXPECT_TRUE(status.ok());
    EXPECT_EQ(std::this_thread::get_id(), caller);
    answered = true;
  });
  EXPECT_TRUE(answered);
  EXPECT_EQ(log.started.load(), before + 1);
  syncer.Stop();  // idempotent
}

TEST(WalSyncerTest, StopAnswersWhatIsQueued) {
  FakeLog log;
  log.hold = true;
  auto syncer = std::make_unique<WalSyncer>([&] { return log.Sync(); });
  std::atomic<int> answered{0};
  for (int i = 0; i < 10; ++i) syncer->AfterSync([&](absl::Status) { answered.fetch_add(1); });
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    log.hold = false;
  });
  syncer.reset();  // the destructor stops, after answering all ten
  release.join();
  EXPECT_EQ(answered.load(), 10);
}

// The store with --sync: adds that defer their fsync are written at once and answered by
// WhenDurable after a shared fsync; after a reopen every answered add is there.
TEST(WalSyncerTest, DeferredAddsOfAStoreShareFsyncsAndPersist) {
  bloomtest::TempDir dir;
  StoreOptions options;
  options.data_dir = dir.path();
  options.sync = true;
  constexpr int kThreads = 8, kPerThread = 100;
  {
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_OK(store.status());
    const bloom::FilterParams spec{10'000, 0.01};
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          const std::string item = absl::StrCat("item-", t, "-", i);
          const absl::string_view items[] = {item};
          absl::StatusOr<std::vector<bool>> added =
              (*store)->Add(absl::StrCat("f", t % 2), items, &spec, /*defer_sync=*/true);
          if (!added.ok()) {
            failures.fetch_add(1);
            continue;
          }
          std::promise<absl::Status> durable;
          (*store)->WhenDurable([&](absl::Status status) { durable.set_value(status); });
          if (!durable.get_future().get().ok()) failures.fetch_add(1);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ((*store)->wal_sync_requests(), static_cast<uint64_t>(kThreads * kPerThread));
    EXPECT_GE((*store)->wal_syncs(), 1u);
    EXPECT_LE((*store)->wal_syncs(), (*store)->wal_sync_requests());
    ASSERT_OK((*store)->Close());
  }
  absl::StatusOr<std::unique_ptr<FilterStore>> reopened = FilterStore::Open(options);
  ASSERT_OK(reopened.status());
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const std::string item = absl::StrCat("item-", t, "-", i);
      const absl::string_view items[] = {item};
      absl::StatusOr<std::vector<bool>> present =
          (*reopened)->MightContain(absl::StrCat("f", t % 2), items);
      ASSERT_OK(present.status());
      EXPECT_TRUE((*present)[0]) << item;
    }
  }
}

TEST(WalSyncerTest, WithoutSyncWhenDurableAnswersAtOnce) {
  bloomtest::TempDir dir;
  StoreOptions options;
  options.data_dir = dir.path();
  absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
  ASSERT_OK(store.status());
  bool answered = false;
  (*store)->WhenDurable([&](absl::Status status) {
    EXPECT_TRUE(status.ok());
    answered = true;
  });
  EXPECT_TRUE(answered);
  EXPECT_EQ((*store)->wal_syncs(), 0u);
}

}  // namespace
}  // namespace storage

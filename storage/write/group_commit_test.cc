#include "storage/write/group_commit.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "rocksdb/statistics.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloomtest::Views;

// Adds `items` to `filter` (created on first add) and records what happened to it.
class AddJob final : public GroupCommitter::Job {
 public:
  AddJob(std::string filter, std::vector<std::string> items)
      : filter_(std::move(filter)), items_(std::move(items)) {}

  void Queue(OperationBatch& batch) override {
    batch_seen = &batch;
    queued_on = std::this_thread::get_id();
    if (before_queue) before_queue();
    bloom::FilterParams spec;
    spec.capacity = 1000;
    spec.error_rate = 0.01;
    ticket_ = batch.Add(filter_, Views(items_), &spec);
  }
  void Answer(OperationBatch& batch) override {
    absl::StatusOr<std::vector<bool>> added = batch.TakeResult(ticket_);
    status = added.status();
    if (added.ok()) this->added = *std::move(added);
  }
  void Fail(const absl::Status& why) override { status = why; }
  void Done() override {
    if (on_done) on_done();
    ++done_calls;  // last: a waiting owner may destroy the job once it sees this
  }

  absl::AnyInvocable<void()> before_queue;  // runs in Queue(), before the add is queued
  absl::AnyInvocable<void()> on_done;
  const OperationBatch* batch_seen = nullptr;
  std::thread::id queued_on;
  absl::Status status = absl::UnknownError("not served");
  std::vector<bool> added;
  std::atomic<int> done_calls{0};

 private:
  const std::string filter_;
  const std::vector<std::string> items_;
  OperationBatch::Ticket ticket_ = 0;
};

class GroupCommitterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = false;
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
  }
  uint64_t Writes() {
    rocksdb::Statistics* stats = store_->database().statistics();
    return stats->getTickerCount(rocksdb::WRITE_DONE_BY_SELF) +
           stats->getTickerCount(rocksdb::WRITE_DONE_BY_OTHER);
  }
  void ExpectPresent(absl::string_view filter, const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<bool>> present = store_->MightContain(filter, Views(items));
    ASSERT_OK(present.status());
    for (size_t i = 0; i < items.size(); ++i) {
      EXPECT_TRUE((*present)[i]) << items[i] << " in " << filter;
    }
  }

  bloomtest::TempDir dir_;
  std::unique_ptr<FilterStore> store_;
};

TEST_F(GroupCommitterTest, AJobAloneIsServedAtOnceOnItsOwnThread) {
  AddJob job("f", {"a", "b"});
  store_->committer().Submit(&job);
  ASSERT_OK(job.status);
  EXPECT_EQ(job.added, (std::vector<bool>{true, true}));
  EXPECT_EQ(job.done_calls.load(), 1);
  EXPECT_EQ(job.queued_on, std::this_thread::get_id());
  EXPECT_EQ(store_->committer().batches(), 1u);
  ExpectPresent("f", {"a", "b"});
}

// Jobs submitted while a thread serves are queued for it (their submitters return at once),
// then served together: one batch and one RocksDB write for all of them.
TEST_F(GroupCommitterTest, JobsSubmittedWhileAnotherIsServedShareOneWrite) {
  constexpr int kWaiting = 8;
  std::vector<std::unique_ptr<AddJob>> waiting;
  for (int i = 0; i < kWaiting; ++i) {
    waiting.push_back(std::make_unique<AddJob>(absl::StrCat("user-", i),
                                               std::vector<std::string>{absl::StrCat("x", i)}));
  }
  AddJob first("first", {"y"});
  absl::Notification all_submitted;
  first.before_queue = [&] {
    // While this thread serves `first`, others submit: each returns without being served.
    std::vector<std::thread> submitters;
    for (std::unique_ptr<AddJob>& job : waiting) {
      submitters.emplace_back(
          [&committer = store_->committer(), job = job.get()] { committer.Submit(job); });
    }
    for (std::thread& submitter : submitters) submitter.join();
    for (std::unique_ptr<AddJob>& job : waiting) EXPECT_EQ(job->done_calls.load(), 0);
    all_submitted.Notify();
  };
  const uint64_t writes_before = Writes();
  store_->committer().Submit(&first);
  ASSERT_TRUE(all_submitted.HasBeenNotified());
  ASSERT_OK(first.status);
  for (std::unique_ptr<AddJob>& job : waiting) {
    ASSERT_OK(job->status);
    EXPECT_EQ(job->added, std::vector<bool>{true});
    EXPECT_EQ(job->done_calls.load(), 1);
    EXPECT_EQ(job->queued_on, std::this_thread::get_id()) << "served by the serving thread";
    EXPECT_EQ(job->batch_seen, waiting.front()->batch_seen) << "one batch for the waiting jobs";
  }
  EXPECT_EQ(store_->committer().batches(), 2u);
  EXPECT_EQ(store_->committer().jobs(), 1u + kWaiting);
  // One write for `first` (a creation), one for the eight creations that waited.
  EXPECT_EQ(Writes() - writes_before, 2u);
  for (int i = 0; i < kWaiting; ++i)
    ExpectPresent(absl::StrCat("user-", i), {absl::StrCat("x", i)});
}

// Done() runs once the batch is gone: it may call the store, and submit again.
TEST_F(GroupCommitterTest, DoneMayCallTheStoreAndSubmitAgain) {
  AddJob job("f", {"a"});
  int rounds = 0;
  job.on_done = [&] {
    ExpectPresent("f", {"a"});  // the store is free to call, and the add visible
    if (++rounds < 5) store_->committer().Submit(&job);  // served after this Done() returns
  };
  store_->committer().Submit(&job);
  EXPECT_EQ(rounds, 5);
  EXPECT_EQ(job.done_calls.load(), 5);
  EXPECT_EQ(store_->committer().batches(), 5u);
  EXPECT_EQ(job.added, std::vector<bool>{false}) << "the last round found it present";
}

TEST_F(GroupCommitterTest, ManyThreadsLoseNoAdd) {
  constexpr int kThreads = 8;
  constexpr int kJobsPerThread = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < kJobsPerThread; ++j) {
        AddJob job(absl::StrCat("user-", j % 50), {absl::StrCat(t, "-", j)});
        store_->committer().Submit(&job);
        // Done() may have run on another thread: wait for it before the job goes away.
        while (job.done_calls.load() == 0) std::this_thread::yield();
        if (!job.status.ok()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store_->committer().jobs(), static_cast<uint64_t>(kThreads * kJobsPerThread));
  for (int t = 0; t < kThreads; ++t) {
    for (int j = 0; j < kJobsPerThread; ++j) {
      ExpectPresent(absl::StrCat("user-", j % 50), {absl::StrCat(t, "-", j)});
    }
  }
}

TEST_F(GroupCommitterTest, AClosedStoreFailsTheJob) {
  ASSERT_OK(store_->Close());
  AddJob job("f", {"a"});
  store_->committer().Submit(&job);
  EXPECT_EQ(job.status.code(), absl::StatusCode::kFailedPrecondition) << job.status;
  EXPECT_EQ(job.done_calls.load(), 1);
}

}  // namespace
}  // namespace storage

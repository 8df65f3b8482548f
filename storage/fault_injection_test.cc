// Disk full and I/O errors: with a file system that fails writes on demand, Adds fail with a
// clear UNAVAILABLE, nothing acknowledged is lost, and the store works again once writes
// succeed (no restart).
#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloomtest::Items;
using bloomtest::Views;

// Fails Append/Flush/Sync of every writable file with "no space" while `full` is set.
class FullDiskFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit FullDiskFileSystem(std::shared_ptr<rocksdb::FileSystem> target)
      : FileSystemWrapper(std::move(target)) {}
  static const char* kClassName() { return "FullDiskFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* debug) override {
    if (full.load()) return rocksdb::IOStatus::NoSpace("injected: disk full");
    rocksdb::IOStatus status = target()->NewWritableFile(name, options, result, debug);
    if (status.ok()) *result = std::make_unique<File>(std::move(*result), &full);
    return status;
  }

  std::atomic<bool> full{false};

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> file, std::atomic<bool>* full)
        : FSWritableFileOwnerWrapper(std::move(file)), full_(full) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* debug) override {
      if (full_->load()) return rocksdb::IOStatus::NoSpace("injected: disk full");
      return target()->Append(data, options, debug);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo& info,
                             rocksdb::IODebugContext* debug) override {
      if (full_->load()) return rocksdb::IOStatus::NoSpace("injected: disk full");
      return target()->Append(data, options, info, debug);
    }
    rocksdb::IOStatus Flush(const rocksdb::IOOptions& options,
                            rocksdb::IODebugContext* debug) override {
      if (full_->load()) return rocksdb::IOStatus::NoSpace("injected: disk full");
      return target()->Flush(options, debug);
    }
    rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* debug) override {
      if (full_->load()) return rocksdb::IOStatus::NoSpace("injected: disk full");
      return target()->Sync(options, debug);
    }

   private:
    std::atomic<bool>* full_;
  };
};

class FaultInjectionTest : public ::testing::TestWithParam<bool> {
 protected:
  void Open() {
    store_.reset();
    StoreOptions options;
    options.data_dir = dir_.path();
    options.sync = GetParam();
    options.checkpoint_interval = absl::Hours(1);  // the background thread only reopens here
    options.env = env_.get();
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
  }
  void SetUp() override {
    file_system_ = std::make_shared<FullDiskFileSystem>(rocksdb::FileSystem::Default());
    env_ = rocksdb::NewCompositeEnv(file_system_);
    Open();
  }
  void TearDown() override {
    file_system_->full.store(false);
    store_.reset();
  }
  void ExpectAllPresent(const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<bool>> present = store_->MightContain("f", Views(items));
    ASSERT_OK(present.status());
    for (size_t i = 0; i < items.size(); ++i) ASSERT_TRUE((*present)[i]) << items[i];
  }

  bloomtest::TempDir dir_;
  std::shared_ptr<FullDiskFileSystem> file_system_;
  std::unique_ptr<rocksdb::Env> env_;
  std::unique_ptr<FilterStore> store_;
};

TEST_P(FaultInjectionTest, DiskFullFailsAddsCleanlyAndTheStoreRecovers) {
  ASSERT_OK(store_->Reserve("f", {100'000, 0.01}).status());
  const std::vector<std::string> before = Items("before-", 5000);
  ASSERT_OK(store_->Add("f", Views(before), nullptr).status());

  file_system_->full.store(true);
  const std::vector<std::string> refused = Items("refused-", 1000);
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::Status status = store_->Add("f", Views(refused), nullptr).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "disk full") ||
                absl::StrContains(status.message(), "No space"))
        << "attempt " << attempt << ": " << status;
  }
  // Refused adds changed nothing: neither bits nor counters.
  EXPECT_EQ(store_->Stats("f")->stats.items_added, 5000u);
  absl::StatusOr<std::vector<bool>> present = store_->MightContain("f", Views(refused));
  ASSERT_OK(present.status());
  int visible = 0;
  for (bool p : *present) visible += p;
  EXPECT_LE(visible, 30);    // only false positives at 1%
  ExpectAllPresent(before);  // reads keep working
  EXPECT_FALSE(store_->CheckpointAll().ok());
  EXPECT_FALSE(store_->Reserve("other", {10, 0.01}).ok());

  // Space comes back: writes work again without a restart, and nothing was lost.
  file_system_->full.store(false);
  const std::vector<std::string> after = Items("after-", 5000);
  // The store resumes RocksDB on the next write, or reopens it from its background thread
  // (within about a second) when RocksDB gave up: retry for a while, as a client would.
  absl::Status recovered;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!(recovered = store_->Add("f", Views(after), nullptr).status()).ok() &&
         absl::Now() < deadline) {
    EXPECT_EQ(recovered.code(), absl::StatusCode::kUnavailable) << recovered;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(recovered.ok()) << recovered;
  ASSERT_OK(store_->CheckpointAll());
  ExpectAllPresent(before);
  ExpectAllPresent(after);
  ASSERT_OK(store_->Close());
  Open();
  ExpectAllPresent(before);
  ExpectAllPresent(after);
  EXPECT_EQ(store_->Stats("f")->stats.items_added, 10'000u);
}

// Group commit (operation_batch.h): a failed write fails every add in it, adds nothing (bits,
// counters, created filters' records), and a later batch writes again.
TEST_P(FaultInjectionTest, DiskFullFailsEveryAddOfABatchAndNothingIsHalfAdded) {
  const bloom::FilterParams spec{1000, 0.01};
  ASSERT_OK(store_->Reserve("f", spec).status());
  ASSERT_OK(store_->Reserve("g", spec).status());
  const std::vector<std::string> refused = Items("refused-", 50);
  file_system_->full.store(true);
  {
    absl::StatusOr<std::unique_ptr<OperationBatch>> batch = store_->StartBatch();
    ASSERT_OK(batch.status());
    const OperationBatch::Ticket f = (*batch)->Add("f", Views(refused), nullptr);
    const OperationBatch::Ticket g = (*batch)->Add("g", Views(refused), nullptr);
    const OperationBatch::Ticket created = (*batch)->Add("new", Views(refused), &spec);
    (*batch)->Flush();
    for (OperationBatch::Ticket ticket : {f, g, created}) {
      EXPECT_EQ((*batch)->TakeResult(ticket).status().code(), absl::StatusCode::kUnavailable);
    }
  }
  for (const char* name : {"f", "g"}) {
    EXPECT_EQ(store_->Stats(name)->stats.items_added, 0u) << name;
    absl::StatusOr<std::vector<bool>> present = store_->MightContain(name, Views(refused));
    ASSERT_OK(present.status());
    EXPECT_LE(std::count(present->begin(), present->end(), true), 5) << name;
  }
  file_system_->full.store(false);
  const std::vector<std::string> later = Items("later-", 50);
  absl::Status written;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (;;) {
    absl::StatusOr<std::unique_ptr<OperationBatch>> batch = store_->StartBatch();
    ASSERT_OK(batch.status());
    const OperationBatch::Ticket f = (*batch)->Add("f", Views(later), nullptr);
    const OperationBatch::Ticket created = (*batch)->Add("new", Views(later), &spec);
    written = (*batch)->TakeResult(f).status();
    written.Update((*batch)->TakeResult(created).status());
    if (written.ok() || absl::Now() > deadline) break;
    batch->reset();
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_OK(written);
  ASSERT_OK(store_->Close());
  Open();
  ExpectAllPresent(later);
  EXPECT_EQ(store_->Stats("f")->stats.items_added, 50u);
  EXPECT_EQ(store_->Stats("new")->stats.items_added, 50u);
}

// Deferred adds (FilterStore::WhenDurable, how the server serves --sync): the write succeeded
// but the WAL's fsync fails, so the add is not acknowledged (the callback gets the error); once
// the disk is back, the next deferred add is written, synced and acknowledged.
TEST_P(FaultInjectionTest, AFailedWalSyncFailsTheDeferredAddItCovered) {
  ASSERT_OK(store_->Reserve("f", {100'000, 0.01}).status());
  auto durable = [&] {
    std::promise<absl::Status> synced;
    store_->WhenDurable([&](absl::Status status) { synced.set_value(status); });
    return synced.get_future().get();
  };
  const std::vector<std::string> first = Items("first-", 100);
  ASSERT_OK(store_->Add("f", Views(first), nullptr, /*defer_sync=*/true).status());
  file_system_->full.store(true);  // the write is in; its fsync fails
  const absl::Status failed = durable();
  if (GetParam()) {
    EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
    EXPECT_TRUE(absl::StrContains(failed.message(), "syncing the write-ahead log")) << failed;
  } else {
    EXPECT_OK(failed);  // without --sync, nothing waits for an fsync
  }
  file_system_->full.store(false);
  const std::vector<std::string> later = Items("later-", 100);
  absl::Status acknowledged;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (;;) {
    acknowledged = store_->Add("f", Views(later), nullptr, /*defer_sync=*/true).status();
    if (acknowledged.ok()) acknowledged = durable();
    if (acknowledged.ok() || absl::Now() > deadline) break;
    EXPECT_EQ(acknowledged.code(), absl::StatusCode::kUnavailable) << acknowledged;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_OK(acknowledged);
  ASSERT_OK(store_->Close());
  Open();
  ExpectAllPresent(later);
}

INSTANTIATE_TEST_SUITE_P(Modes, FaultInjectionTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Sync" : "NoSync";
                         });

}  // namespace
}  // namespace storage

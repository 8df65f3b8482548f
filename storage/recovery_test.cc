// Start-up (filter_store_recovery.cc): a clean restart and a kill -9 lose no acknowledged add, with
// the journal replayed eagerly, on first use of a cold filter or after a lazy start; unreadable
// records, filters that no longer fit the memory limit and orphaned pages are each handled
// without stopping the others.
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bloom/window.h"
#include "gtest/gtest.h"
#include "rocksdb/write_batch.h"
#include "storage/filter_store_fixture.h"
#include "storage/format/encoding.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloom::FilterParams;
using bloomtest::Items;
using bloomtest::Views;

using RecoveryTest = FilterStoreTest;

TEST_F(RecoveryTest, CleanReopenKeepsItemsCountersAndSpec) {
  ASSERT_OK(store_->Reserve("keep", {1000, 0.001, 4, false}).status());
  const std::vector<std::string> items = Items("k", 0, 5000);  // grows to several sub-filters
  ASSERT_OK(store_->Add("keep", Views(items), nullptr).status());
  absl::StatusOr<FilterInfo> before = store_->Stats("keep");
  ASSERT_OK(before.status());
  ASSERT_OK(store_->Close());
  Open();
  absl::StatusOr<FilterInfo> after = store_->Stats("keep");
  ASSERT_OK(after.status());
  EXPECT_EQ(after->spec, before->spec);
  EXPECT_EQ(after->created_at, before->created_at);
  EXPECT_EQ(after->stats.items_added, before->stats.items_added);
  EXPECT_EQ(after->stats.sub_filters.size(), before->stats.sub_filters.size());
  EXPECT_EQ(after->stats.fill_ratio, before->stats.fill_ratio);
  ExpectAllPresent("keep", items);
  EXPECT_EQ(store_->load_report().journal_records, 0u);  // Close checkpointed everything
}

TEST_F(RecoveryTest, KillNineAfterAcknowledgedAddsLosesNothing) {
  const int batches = 30, batch_size = 500;
  const int acked = RunCrashHelper("crashy", batches, batch_size, /*checkpoint_after=*/-1, false);
  ASSERT_EQ(acked, batches);
  Open();
  EXPECT_GT(store_->load_report().journal_records, 0u);
  for (int b = 0; b < acked; ++b) {
    ExpectAllPresent("crashy", Items(absl::StrCat("crashy-", b, "-"), 0, batch_size));
  }
  absl::StatusOr<FilterInfo> info = store_->Stats("crashy");
  ASSERT_OK(info.status());
  EXPECT_GE(info->stats.sub_filters.size(), 4u);  // it grew during the run
  // Every item is new except rare false positives among themselves.
  EXPECT_GE(info->stats.items_added, static_cast<uint64_t>(acked * batch_size * 0.99));
  EXPECT_LE(info->stats.items_added, static_cast<uint64_t>(acked * batch_size));
}

// A filter left cold at start-up (the memory limit was full) after a crash: its journal is
// replayed when it is first used (filter_store_residency.cc skips the journal scan for the others).
TEST_F(RecoveryTest, KillNineThenColdAtStartUpReplaysTheJournalOnFirstUse) {
  // 10 x (1,472 bytes of bits + ResidentCharge's bookkeeping), loaded first (name order)
  for (int f = 0; f < 10; ++f) {
    ASSERT_OK(store_->Reserve(absl::StrCat("a", f), {1000, 0.01}).status());
  }
  const int batches = 20, batch_size = 100;
  const int acked = RunCrashHelper("zcrash", batches, batch_size, /*checkpoint_after=*/5, false);
  ASSERT_EQ(acked, batches);
  StoreOptions limited;
  limited.background_checkpoints = false;
  limited.memory_limit_bytes = 24 << 10;
  Open(limited);
  ASSERT_EQ(store_->load_report().cold, 1u);
  ASSERT_EQ(store_->Figures().cold_filters, 1u);
  for (int b = 0; b < acked; ++b) {
    ExpectAllPresent("zcrash", Items(absl::StrCat("zcrash-", b, "-"), 0, batch_size));
  }
  EXPECT_EQ(store_->Figures().loads, 1u);
  absl::StatusOr<FilterInfo> info = store_->Stats("zcrash");
  ASSERT_OK(info.status());
  EXPECT_GE(info->stats.items_added, static_cast<uint64_t>(acked * batch_size * 0.97));
  // Evicted and loaded again: still whole (the eviction's checkpoint covered the replay).
  for (int f = 0; f < 10; ++f) ASSERT_OK(store_->Stats(absl::StrCat("a", f)).status());
  store_->EvictToBudget();
  for (int b = 0; b < acked; ++b) {
    ExpectAllPresent("zcrash", Items(absl::StrCat("zcrash-", b, "-"), 0, batch_size));
  }
}

// Lazy start-up after a crash: nothing is read but the journal, and the crashed filter's
// journal is replayed when it is first used.
TEST_F(RecoveryTest, KillNineThenLazyStartReplaysTheJournalOnFirstUse) {
  ASSERT_OK(store_->Reserve("other", {1000, 0.01}).status());  // writes the generation ceiling
  const int batches = 20, batch_size = 100;
  const int acked = RunCrashHelper("lazy", batches, batch_size, /*checkpoint_after=*/5, false);
  ASSERT_EQ(acked, batches);
  StoreOptions lazy;
  lazy.background_checkpoints = false;
  lazy.lazy_start = true;
  Open(lazy);
  EXPECT_EQ(store_->load_report().filters, 0u);
  EXPECT_EQ(store_->load_report().pages, 0u);
  EXPECT_EQ(store_->load_report().journal_records, 14u);  // batches 6..19
  for (int b = 0; b < acked; ++b) {
    ExpectAllPresent("lazy", Items(absl::StrCat("lazy-", b, "-"), 0, batch_size));
  }
  EXPECT_GE(store_->Stats("lazy")->stats.items_added,
            static_cast<uint64_t>(acked * batch_size * 0.97));
  ASSERT_OK(store_->Add("lazy", Views(Items("more", 0, 10)), nullptr).status());
  Open();  // eager again: everything is still there
  for (int b = 0; b < acked; ++b) {
    ExpectAllPresent("lazy", Items(absl::StrCat("lazy-", b, "-"), 0, batch_size));
  }
  ExpectAllPresent("lazy", Items("more", 0, 10));
}

TEST_F(RecoveryTest, KillNineAfterCheckpointReplaysOnlyTheRestOfTheJournal) {
  const int batches = 20, batch_size = 300;
  const int acked = RunCrashHelper("mixed", batches, batch_size, /*checkpoint_after=*/9, true);
  ASSERT_EQ(acked, batches);
  Open();
  EXPECT_EQ(store_->load_report().journal_records, 10u);  // batches 10..19 only
  EXPECT_GT(store_->load_report().pages, 0u);
  for (int b = 0; b < acked; ++b) {
    ExpectAllPresent("mixed", Items(absl::StrCat("mixed-", b, "-"), 0, batch_size));
  }
  // Items a filter already seemed to hold when added (false positives) are not counted: 0.6%
  // of them on average, with a random seed, and a clean-clone run under ASan saw 1.02%
  // (5,939 of 6,000; 150 runs here: 5,943-5,982). A replay that lost one batch would lose 5%.
  const uint64_t items_added = store_->Stats("mixed")->stats.items_added;
  EXPECT_GE(items_added, static_cast<uint64_t>(acked * batch_size * 0.97));
  // A second crash-free cycle keeps the exact counters: replay is not double counted.
  ASSERT_OK(store_->Close());
  Open();
  EXPECT_EQ(store_->Stats("mixed")->stats.items_added, items_added);
}

TEST_F(RecoveryTest, CorruptMetadataIsDataLossForThatFilterOnly) {
  ASSERT_OK(store_->Reserve("good", {100, 0.01}).status());
  ASSERT_OK(store_->Reserve("bad", {100, 0.01}).status());
  ASSERT_OK(store_->Add("good", Views(Items("x", 0, 10)), nullptr).status());
  ASSERT_OK(store_->Close());
  {
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(dir_.path());
    ASSERT_OK(db.status());
    rocksdb::WriteBatch batch;
    batch.Put((*db)->filters(), "bad", "garbage");
    ASSERT_OK((*db)->Write(batch, true, "test"));
  }
  Open();
  EXPECT_EQ(store_->load_report().unreadable, 1u);
  absl::Status bad = store_->Stats("bad").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(bad.message(), "bad")) << bad;
  EXPECT_EQ(store_->Add("bad", Views(Items("y", 0, 1)), nullptr).status().code(),
            absl::StatusCode::kDataLoss);
  ExpectAllPresent("good", Items("x", 0, 10));
  ASSERT_OK(store_->Delete("bad"));  // an unreadable filter can still be deleted
  ASSERT_OK(store_->Reserve("bad", {100, 0.01}).status());
}

// Issue 15, attack 3: a filter that does not fit the memory limit at start-up (the limit was
// lowered, or the container shrank) is left on disk and answers RESOURCE_EXHAUSTED; the others
// are served. Loading it anyway could get the server OOM-killed at every start.
TEST_F(RecoveryTest, FilterThatNoLongerFitsTheLimitIsLeftOnDiskAndTheOthersServe) {
  ASSERT_OK(store_->Reserve("big", {100'000, 0.01}).status());  // ~120 KB of bits
  ASSERT_OK(store_->Reserve("small", {100, 0.01}).status());
  const std::vector<std::string> big_items = Items("b", 0, 5000);
  ASSERT_OK(store_->Add("big", Views(big_items), nullptr).status());
  ASSERT_OK(store_->CheckpointAll());
  ASSERT_OK(store_->Add("big", Views(Items("j", 0, 100)), nullptr).status());  // journal only
  ASSERT_OK(store_->Add("small", Views(Items("s", 0, 50)), nullptr).status());

  StoreOptions limited;
  limited.background_checkpoints = false;
  limited.memory_limit_bytes = 64 << 10;
  Open(limited);
  EXPECT_EQ(store_->load_report().not_loaded, 1u);
  absl::Status big = store_->Stats("big").status();
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted) << big;
  EXPECT_TRUE(absl::StrContains(big.message(), "memory limit")) << big;
  EXPECT_EQ(store_->Add("big", Views(Items("x", 0, 1)), nullptr).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store_->Reserve("big", {100'000, 0.01}).status().code(),
            absl::StatusCode::kResourceExhausted);
  ExpectAllPresent("small", Items("s", 0, 50));
  EXPECT_EQ(store_->Figures().unloaded_filters, 1u);
  // A new filter must not take the unloaded one's generation (its pages are still on disk).
  ASSERT_OK(store_->Reserve("new", {100, 0.01}).status());
  ASSERT_OK(store_->Add("new", Views(Items("n", 0, 10)), nullptr).status());

  Open();  // no limit: everything comes back, nothing mixed up
  EXPECT_EQ(store_->load_report().not_loaded, 0u);
  ExpectAllPresent("big", big_items);
  ExpectAllPresent("big", Items("j", 0, 100));
  EXPECT_EQ(store_->Stats("new")->stats.items_added, 10u);
  EXPECT_LE(store_->Stats("big")->stats.items_added, 5100u);

  Open(limited);  // an unloaded filter can be deleted, pages and journal included
  ASSERT_OK(store_->Delete("big"));
  Open();
  EXPECT_EQ(store_->Stats("big").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->load_report().not_loaded, 0u);
}

// Issue 15, attack 7: pages and journal records of no filter (a crash after an Import wrote its
// pages but before its metadata) are deleted at start-up, once; a live filter's are not.
TEST_F(RecoveryTest, OrphanedPagesAndJournalRecordsAreDeletedAtStart) {
  ASSERT_OK(store_->Reserve("live", {1000, 0.01}).status());
  ASSERT_OK(store_->Add("live", Views(Items("l", 0, 100)), nullptr).status());
  ASSERT_OK(store_->CheckpointAll());
  ASSERT_OK(store_->Close());
  {
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(dir_.path());
    ASSERT_OK(db.status());
    rocksdb::WriteBatch batch;
    for (uint32_t page = 0; page < 5; ++page) {
      batch.Put((*db)->blocks(), BlockKey(1'000'000, 0, page), std::string(16384, '\x01'));
    }
    batch.Put((*db)->journal(), JournalKey(1'000'001, 1), "orphaned journal record");
    ASSERT_OK((*db)->Write(batch, true, "test"));
  }
  Open();
  EXPECT_EQ(store_->load_report().orphans_deleted, 6u);
  EXPECT_EQ(store_->Figures().orphans_deleted_at_start, 6u);
  ExpectAllPresent("live", Items("l", 0, 100));
  ASSERT_OK(store_->Close());
  Open();
  EXPECT_EQ(store_->load_report().orphans_deleted, 0u);
  EXPECT_GT(store_->load_report().pages, 0u);  // the live filter's pages stayed
  ExpectAllPresent("live", Items("l", 0, 100));
}

}  // namespace
}  // namespace storage

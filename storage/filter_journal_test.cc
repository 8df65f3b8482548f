// FilterStore's journal reads for slot moves (filter_store_journal.cc): a copy made after
// StartJournal and caught up with ReadJournal and AddHashes (a CUCKOO filter's with
// ApplyCuckooRecords) holds every item, across checkpoints while the hold lasts; what cannot be
// caught up so (a lapsed hold, a merge, a filter made again, a windowed filter that changed, a
// cuckoo record the copy cannot hold) is refused, so the mover copies it whole.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "storage/filter_store_fixture.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloom::FilterParams;
using bloomtest::Items;
using bloomtest::Views;

constexpr absl::Duration kHold = absl::Minutes(1);

class FilterJournalTest : public FilterStoreTest {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.background_checkpoints = false;
    options.clock = &clock_;
    Open(options);
    target_dir_ = std::make_unique<bloomtest::TempDir>();
    OpenTarget();
  }

  // The target store, in its own directory (again: what it holds survives a reopen).
  void OpenTarget() {
    target_.reset();
    StoreOptions options;
    options.background_checkpoints = false;
    options.data_dir = target_dir_->path();
    absl::StatusOr<std::unique_ptr<FilterStore>> target = FilterStore::Open(options);
    ASSERT_OK(target.status());
    target_ = *std::move(target);
  }

  // The stores go before the clock they read (the base's store_ would outlive it).
  void TearDown() override {
    store_.reset();
    target_.reset();
  }

  // The mover's first copy: the filter's dump into the target store.
  void CopyWhole(absl::string_view name) {
    std::string dump;
    ASSERT_OK(store_->Export(name, [&](absl::string_view chunk) {
      dump.append(chunk.data(), chunk.size());
      return absl::OkStatus();
    }));
    absl::StatusOr<std::unique_ptr<PendingImport>> import = target_->BeginImport(name);
    ASSERT_OK(import.status());
    ASSERT_OK((*import)->Append(dump));
    ASSERT_OK(target_->CommitImport(**import).status());
  }

  // Reads and applies the journal from `at` until caught up (a BLOOM filter's hashes as adds,
  // a CUCKOO filter's records as writes of their values); answers the hashes and records moved.
  size_t CatchUp(absl::string_view name, JournalPosition& at, size_t max_hashes) {
    size_t moved = 0;
    while (true) {
      absl::StatusOr<JournalDelta> delta = store_->ReadJournal(name, at, max_hashes, kHold);
      EXPECT_OK(delta.status());
      if (!delta.ok()) return moved;
      if (!delta->hashes.empty()) EXPECT_OK(target_->AddHashes(name, delta->hashes).status());
      if (!delta->cuckoo_records.empty()) {
        EXPECT_TRUE(delta->hashes.empty());
        const std::vector<absl::string_view> records(delta->cuckoo_records.begin(),
                                                     delta->cuckoo_records.end());
        EXPECT_OK(target_->ApplyCuckooRecords(name, records).status());
      }
      moved += delta->hashes.size() + delta->cuckoo_records.size();
      EXPECT_GE(delta->to.seq, at.seq);
      at = delta->to;
      if (!delta->more) return moved;
    }
  }

  bloomtime::ManualClock clock_;
  std::unique_ptr<bloomtest::TempDir> target_dir_;
  std::unique_ptr<FilterStore> target_;
};

TEST_F(FilterJournalTest, ACopyCaughtUpFromTheJournalHoldsEveryItemAcrossCheckpoints) {
  ASSERT_OK(store_->Reserve("f", FilterParams{8'000, 0.01}).status());
  const std::vector<std::string> before = Items("before", 0, 5'000);
  ASSERT_OK(store_->Add("f", Views(before), nullptr).status());
  absl::StatusOr<JournalPosition> at = store_->StartJournal("f", kHold);
  ASSERT_OK(at.status());
  CopyWhole("f");
  // Adds after the copy, with checkpoints between them: the hold keeps their records.
  std::vector<std::string> after;
  for (int round = 0; round < 4; ++round) {
    const std::vector<std::string> items = Items(absl::StrCat("after", round), 0, 3'000);
    ASSERT_OK(store_->Add("f", Views(items), nullptr).status());
    after.insert(after.end(), items.begin(), items.end());
    ASSERT_OK(store_->CheckpointAll());
  }
  absl::StatusOr<FilterInfo> grown = store_->Stats("f");
  ASSERT_OK(grown.status());
  EXPECT_GT(grown->stats.sub_filters.size(), 1U) << "the filter grew a sub-filter meanwhile";
  EXPECT_GE(CatchUp("f", *at, /*max_hashes=*/1'000), after.size() - 100)
      << "in pieces of about 1,000 hashes: the new items (a few collide)";
  absl::StatusOr<std::vector<bool>> present = target_->MightContain("f", Views(after));
  ASSERT_OK(present.status());
  for (size_t i = 0; i < after.size(); ++i) ASSERT_TRUE((*present)[i]) << after[i];
  absl::StatusOr<std::vector<bool>> old = target_->MightContain("f", Views(before));
  ASSERT_OK(old.status());
  for (size_t i = 0; i < before.size(); ++i) ASSERT_TRUE((*old)[i]) << before[i];
  absl::StatusOr<FilterInfo> source = store_->Stats("f");
  absl::StatusOr<FilterInfo> copy = target_->Stats("f");
  ASSERT_OK(source.status());
  ASSERT_OK(copy.status());
  EXPECT_EQ(copy->stats.items_added, source->stats.items_added);
  // Caught up: nothing more until the next add.
  absl::StatusOr<JournalDelta> idle = store_->ReadJournal("f", *at, 1'000, kHold);
  ASSERT_OK(idle.status());
  EXPECT_TRUE(idle->hashes.empty());
  EXPECT_FALSE(idle->more);
  // The source's figures: one filter held, and nothing left for the next catch-up to read.
  StoreFigures figures = store_->Figures();
  EXPECT_EQ(figures.journal_held_filters, 1u);
  EXPECT_EQ(figures.journal_hold_lag_records, 0u);
  for (int add = 0; add < 3; ++add) {
    ASSERT_OK(store_->Add("f", Views(Items(absl::StrCat("lag", add), 0, 10)), nullptr).status());
  }
  EXPECT_EQ(store_->Figures().journal_hold_lag_records, 3u);  // three adds' records
  CatchUp("f", *at, 1'000);
  EXPECT_EQ(store_->Figures().journal_hold_lag_records, 0u);
  clock_.Advance(kHold + absl::Seconds(1));  // a lapsed hold is no move's
  EXPECT_EQ(store_->Figures().journal_held_filters, 0u);
}

TEST_F(FilterJournalTest, ALapsedHoldAMergeOrAFilterMadeAgainMeansCopyItWhole) {
  ASSERT_OK(store_->Reserve("f", FilterParams{20'000, 0.01}).status());
  absl::StatusOr<JournalPosition> at = store_->StartJournal("f", kHold);
  ASSERT_OK(at.status());
  ASSERT_OK(store_->Add("f", Views(Items("x", 0, 100)), nullptr).status());
  clock_.Advance(kHold + absl::Seconds(1));  // the mover went away
  ASSERT_OK(store_->CheckpointAll());        // and the records were trimmed
  absl::StatusOr<JournalDelta> lapsed = store_->ReadJournal("f", *at, 1'000, kHold);
  EXPECT_TRUE(absl::IsFailedPrecondition(lapsed.status())) << lapsed.status();
  EXPECT_TRUE(absl::StrContains(lapsed.status().message(), "copy it whole"));

  // A merge writes pages, not journal records.
  at = store_->StartJournal("f", kHold);
  ASSERT_OK(at.status());
  ASSERT_OK(store_->ReserveLike("g", "f").status());
  ASSERT_OK(store_->Add("g", Views(Items("g", 0, 100)), nullptr).status());
  const std::string sources[] = {"g"};
  ASSERT_OK(store_->Merge("f", sources).status());
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->ReadJournal("f", *at, 1'000, kHold).status()));

  // Deleted: NOT_FOUND; made again: another generation.
  at = store_->StartJournal("f", kHold);
  ASSERT_OK(at.status());
  ASSERT_OK(store_->Delete("f"));
  EXPECT_TRUE(absl::IsNotFound(store_->ReadJournal("f", *at, 1'000, kHold).status()));
  ASSERT_OK(store_->Reserve("f", FilterParams{20'000, 0.01}).status());
  const absl::Status again = store_->ReadJournal("f", *at, 1'000, kHold).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(again)) << again;
  EXPECT_TRUE(absl::StrContains(again.message(), "generation")) << again;
}

// A windowed filter's journal does not replay elsewhere, but it says whether the filter
// changed since a copy: the mover copies again only the ones that did.
TEST_F(FilterJournalTest, WindowedFiltersAreCopiedAgainOnlyWhenTheyChanged) {
  FilterParams windowed{1'000, 0.01};
  windowed.window = absl::Hours(1);
  ASSERT_OK(store_->Reserve("w", windowed).status());
  ASSERT_OK(store_->Add("w", Views(Items("first", 0, 200)), nullptr).status());
  absl::StatusOr<JournalPosition> at = store_->StartJournal("w", kHold);
  ASSERT_OK(at.status());
  CopyWhole("w");
  // Unchanged, across a checkpoint: nothing to do, and the position stays.
  ASSERT_OK(store_->CheckpointAll());
  absl::StatusOr<JournalDelta> idle = store_->ReadJournal("w", *at, 1'000, kHold);
  ASSERT_OK(idle.status());
  EXPECT_TRUE(idle->hashes.empty());
  EXPECT_EQ(idle->to.seq, at->seq);
  // Changed: copy it whole again.
  ASSERT_OK(store_->Add("w", Views(Items("later", 0, 10)), nullptr).status());
  const absl::Status changed = store_->ReadJournal("w", *at, 1'000, kHold).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(changed)) << changed;
  EXPECT_TRUE(absl::StrContains(changed.message(), "copy it whole")) << changed;
  EXPECT_TRUE(absl::IsNotFound(store_->StartJournal("missing", kHold).status()));
}

class CuckooJournalTest : public FilterJournalTest {
 protected:
  static FilterParams Cuckoo(uint64_t capacity) {
    FilterParams spec{capacity, 0.01};
    spec.kind = bloom::FilterKind::kCuckoo;
    return spec;
  }

  // Source and copy count the same copies of every item of `items`.
  void ExpectSameCounts(absl::string_view name, const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<uint32_t>> source = store_->Count(name, Views(items));
    absl::StatusOr<std::vector<uint32_t>> copy = target_->Count(name, Views(items));
    ASSERT_OK(source.status());
    ASSERT_OK(copy.status());
    ASSERT_EQ(source->size(), copy->size());
    for (size_t i = 0; i < items.size(); ++i) {
      ASSERT_EQ((*copy)[i], (*source)[i]) << items[i];
    }
    absl::StatusOr<FilterInfo> source_info = store_->Stats(name);
    absl::StatusOr<FilterInfo> copy_info = target_->Stats(name);
    ASSERT_OK(source_info.status());
    ASSERT_OK(copy_info.status());
    EXPECT_EQ(copy_info->stats.items_added, source_info->stats.items_added);
  }
};

// A CUCKOO filter's records hold the table values its adds and removes wrote: the copy writes
// them in order and ends with the owner's bytes, even when it was exported while writes went
// on (so it already held some of the records it is then given).
TEST_F(CuckooJournalTest, ACopyWritesTheOwnersTableValuesAndEndsAsTheOwner) {
  ASSERT_OK(store_->Reserve("c", Cuckoo(20'000)).status());
  const std::vector<std::string> first = Items("first", 0, 2'000);
  ASSERT_OK(store_->Add("c", Views(first), nullptr).status());
  // Adds (an item twice in some rounds: a cuckoo filter counts copies) and removes race the
  // position and the export.
  std::atomic<bool> stop{false};
  std::vector<std::string> written = first;
  std::thread writer([&] {
    for (int round = 0; !stop.load() || round < 20; ++round) {
      std::vector<std::string> items = Items(absl::StrCat("w", round, "-"), 0, 50);
      if (round % 3 == 0) items.push_back(items.front());
      ASSERT_OK(store_->Add("c", Views(items), nullptr).status());
      ASSERT_OK(
          store_->RemoveItems("c", Views(Items(absl::StrCat("w", round, "-"), 0, 10))).status());
      written.insert(written.end(), items.begin(), items.end());
    }
  });
  absl::StatusOr<JournalPosition> at = store_->StartJournal("c", kHold);
  ASSERT_OK(at.status());
  CopyWhole("c");
  stop.store(true);
  writer.join();
  // More after the copy, with checkpoints between them (the hold keeps the records) and
  // removes of items the copy holds.
  for (int round = 0; round < 4; ++round) {
    std::vector<std::string> items = Items(absl::StrCat("after", round, "-"), 0, 500);
    ASSERT_OK(store_->Add("c", Views(items), nullptr).status());
    written.insert(written.end(), items.begin(), items.end());
    ASSERT_OK(
        store_->RemoveItems("c", Views(Items("first", round * 100, round * 100 + 100))).status());
    ASSERT_OK(store_->CheckpointAll());
  }
  EXPECT_GT(CatchUp("c", *at, /*max_hashes=*/64), 8u) << "in pieces of about 512 bytes of records";
  ExpectSameCounts("c", written);
  absl::StatusOr<std::vector<uint32_t>> removed =
      target_->Count("c", Views(Items("first", 0, 400)));
  ASSERT_OK(removed.status());
  for (const uint32_t count : *removed) EXPECT_LE(count, 1u);  // 0, or another's fingerprint
  // Caught up: nothing more until the next write, and the copy is durable as it stands.
  absl::StatusOr<JournalDelta> idle = store_->ReadJournal("c", *at, 1'000, kHold);
  ASSERT_OK(idle.status());
  EXPECT_TRUE(idle->cuckoo_records.empty());
  EXPECT_FALSE(idle->more);
  OpenTarget();
  ExpectSameCounts("c", written);
  // And after the target's own checkpoint, which writes the pages the records changed.
  ASSERT_OK(store_->RemoveItems("c", Views(Items("after0-", 0, 100))).status());
  CatchUp("c", *at, 1'000);
  ASSERT_OK(target_->CheckpointAll());
  OpenTarget();
  ExpectSameCounts("c", written);
}

TEST_F(CuckooJournalTest, RecordsTheCopyCannotHoldChangeNothing) {
  ASSERT_OK(store_->Reserve("c", Cuckoo(500)).status());
  ASSERT_OK(store_->Add("c", Views(Items("a", 0, 100)), nullptr).status());
  absl::StatusOr<JournalPosition> at = store_->StartJournal("c", kHold);
  ASSERT_OK(at.status());
  CopyWhole("c");
  // The owner's chain grows a table: a record names it, and the copy has only one.
  ASSERT_OK(store_->Add("c", Views(Items("b", 0, 2'000)), nullptr).status());
  absl::StatusOr<JournalDelta> grown = store_->ReadJournal("c", *at, 100'000, kHold);
  ASSERT_OK(grown.status());
  ASSERT_FALSE(grown->cuckoo_records.empty());
  const std::vector<absl::string_view> records(grown->cuckoo_records.begin(),
                                               grown->cuckoo_records.end());
  const absl::Status refused = target_->ApplyCuckooRecords("c", records).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  absl::StatusOr<std::vector<uint32_t>> untouched = target_->Count("c", Views(Items("b", 0, 100)));
  ASSERT_OK(untouched.status());
  EXPECT_LE(std::count(untouched->begin(), untouched->end(), 1u), 5)
      << "only false positives: nothing was written";
  // Into a BLOOM filter: refused; a damaged record: DATA_LOSS; a missing copy: NOT_FOUND.
  ASSERT_OK(target_->Reserve("bloom", FilterParams{1'000, 0.01}).status());
  EXPECT_TRUE(
      absl::IsFailedPrecondition(target_->ApplyCuckooRecords("bloom", {records.front()}).status()));
  std::string damaged(records.front());
  damaged[damaged.size() / 2] ^= 0x40;
  EXPECT_TRUE(absl::IsDataLoss(target_->ApplyCuckooRecords("c", {damaged}).status()));
  EXPECT_TRUE(absl::IsNotFound(target_->ApplyCuckooRecords("missing", {records.front()}).status()));
}

}  // namespace
}  // namespace storage

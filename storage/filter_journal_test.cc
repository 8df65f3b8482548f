// FilterStore's journal reads for slot moves (filter_store_journal.cc): a copy made after
// StartJournal and caught up with ReadJournal and AddHashes holds every item, across
// checkpoints while the hold lasts; what cannot be caught up so (a lapsed hold, a merge, a
// filter made again, a CUCKOO or windowed filter that changed) is refused, so the mover copies
// it whole.
#include <map>
#include <memory>
#include <string>
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
    StoreOptions target_options;
    target_options.background_checkpoints = false;
    target_options.data_dir = target_dir_->path();
    absl::StatusOr<std::unique_ptr<FilterStore>> target = FilterStore::Open(target_options);
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

  // Reads and applies the journal from `at` until caught up; answers the hashes moved.
  size_t CatchUp(absl::string_view name, JournalPosition& at, size_t max_hashes) {
    size_t moved = 0;
    while (true) {
      absl::StatusOr<JournalDelta> delta = store_->ReadJournal(name, at, max_hashes, kHold);
      EXPECT_OK(delta.status());
      if (!delta.ok()) return moved;
      EXPECT_OK(target_->AddHashes(name, delta->hashes).status());
      moved += delta->hashes.size();
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

// A CUCKOO or windowed filter's journal does not replay as adds elsewhere, but it says whether
// the filter changed since a copy: the mover copies again only the ones that did.
TEST_F(FilterJournalTest, CuckooAndWindowedFiltersAreCopiedAgainOnlyWhenTheyChanged) {
  FilterParams cuckoo{1'000, 0.01};
  cuckoo.kind = bloom::FilterKind::kCuckoo;
  ASSERT_OK(store_->Reserve("c", cuckoo).status());
  FilterParams windowed{1'000, 0.01};
  windowed.window = absl::Hours(1);
  ASSERT_OK(store_->Reserve("w", windowed).status());
  const std::vector<std::string> first = Items("first", 0, 200);
  for (const char* name : {"c", "w"}) {
    ASSERT_OK(store_->Add(name, Views(first), nullptr).status());
  }
  std::map<std::string, JournalPosition> at;
  for (const char* name : {"c", "w"}) {
    absl::StatusOr<JournalPosition> start = store_->StartJournal(name, kHold);
    ASSERT_OK(start.status());
    at[name] = *start;
    CopyWhole(name);
  }
  // Unchanged, across a checkpoint: nothing to do, and the position stays.
  ASSERT_OK(store_->CheckpointAll());
  for (const char* name : {"c", "w"}) {
    absl::StatusOr<JournalDelta> idle = store_->ReadJournal(name, at[name], 1'000, kHold);
    ASSERT_OK(idle.status());
    EXPECT_TRUE(idle->hashes.empty());
    EXPECT_EQ(idle->to.seq, at[name].seq);
  }
  // Changed (an add; for the cuckoo filter a remove alone): copy it whole again.
  ASSERT_OK(store_->Add("w", Views(Items("later", 0, 10)), nullptr).status());
  ASSERT_OK(store_->RemoveItems("c", Views(Items("first", 0, 1))).status());
  for (const char* name : {"c", "w"}) {
    const absl::Status changed = store_->ReadJournal(name, at[name], 1'000, kHold).status();
    EXPECT_TRUE(absl::IsFailedPrecondition(changed)) << name << ": " << changed;
    EXPECT_TRUE(absl::StrContains(changed.message(), "copy it whole")) << changed;
  }
  // The copy made again holds the change.
  ASSERT_OK(target_->Delete("c"));
  ASSERT_OK(store_->StartJournal("c", kHold).status());
  CopyWhole("c");
  absl::StatusOr<std::vector<uint32_t>> source = store_->Count("c", Views(first));
  absl::StatusOr<std::vector<uint32_t>> copy = target_->Count("c", Views(first));
  ASSERT_OK(source.status());
  ASSERT_OK(copy.status());
  EXPECT_EQ(*copy, *source);
  EXPECT_EQ((*copy)[0], 0u);  // removed
  EXPECT_TRUE(absl::IsNotFound(store_->StartJournal("missing", kHold).status()));
}

}  // namespace
}  // namespace storage

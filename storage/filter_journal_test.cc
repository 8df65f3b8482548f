// FilterStore's journal reads for slot moves (filter_store_journal.cc): a copy made after
// StartJournal and caught up with ReadJournal and AddHashes (a CUCKOO or windowed filter's with
// ApplyJournalRecords) holds every item, across checkpoints while the hold lasts; what cannot be
// caught up so (a lapsed hold, a merge, a filter made again, a record naming a table or slice
// the copy lacks) is refused, so the mover copies it whole.
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
#include "storage/format/cuckoo_journal.h"
#include "storage/format/encoding.h"
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
    options.clock = &clock_;  // a windowed copy's slices age as the owner's do
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
  // Every record the copy journals for it decodes, as its recovery after a crash reads them
  // (a Close checkpoints, which would hide one that does not).
  size_t CatchUp(absl::string_view name, JournalPosition& at, size_t max_hashes) {
    absl::StatusOr<JournalPosition> copy_at = target_->StartJournal(name, kHold);
    EXPECT_OK(copy_at.status());
    const size_t moved = ApplyJournal(name, at, max_hashes);
    if (copy_at.ok()) ExpectJournalDecodes(name, *copy_at);
    return moved;
  }
  void ExpectJournalDecodes(absl::string_view name, JournalPosition from) {
    absl::StatusOr<JournalDelta> journalled = target_->ReadJournal(name, from, 1'000'000, kHold);
    ASSERT_OK(journalled.status());
    std::vector<bloom::ScalableFilter::Run> runs;
    std::vector<uint64_t> hashes;
    std::vector<bloom::CuckooChange> changes;
    for (const std::string& record : journalled->records) {
      if (IsCuckooJournalRecord(record)) {
        EXPECT_OK(DecodeCuckooJournalRecord(record, changes));
      } else {
        EXPECT_OK(DecodeJournalRecord(record, runs, hashes));
      }
    }
  }
  // Applies to the copy, in one call, the records `name` journalled since `at` (there must be
  // some), which it keeps in `read`; answers the copy's status.
  absl::Status ApplyRecordsSince(absl::string_view name, JournalPosition at,
                                 std::vector<std::string>& read) {
    absl::StatusOr<JournalDelta> delta = store_->ReadJournal(name, at, 1'000'000, kHold);
    if (!delta.ok()) return delta.status();
    EXPECT_FALSE(delta->records.empty());
    read = std::move(delta->records);
    const std::vector<absl::string_view> records(read.begin(), read.end());
    return target_->ApplyJournalRecords(name, records).status();
  }
  size_t ApplyJournal(absl::string_view name, JournalPosition& at, size_t max_hashes) {
    size_t moved = 0;
    while (true) {
      absl::StatusOr<JournalDelta> delta = store_->ReadJournal(name, at, max_hashes, kHold);
      EXPECT_OK(delta.status());
      if (!delta.ok()) return moved;
      if (!delta->hashes.empty()) EXPECT_OK(target_->AddHashes(name, delta->hashes).status());
      if (!delta->records.empty()) {
        EXPECT_TRUE(delta->hashes.empty());
        const std::vector<absl::string_view> records(delta->records.begin(), delta->records.end());
        EXPECT_OK(target_->ApplyJournalRecords(name, records).status());
      }
      moved += delta->hashes.size() + delta->records.size();
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

TEST_F(FilterJournalTest, TheFiltersMadeWhileAMoverWatchesAreNamed) {
  ASSERT_OK(store_->Reserve("before", FilterParams{1'000, 0.01}).status());
  CreationLog::Position at = store_->WatchCreations(kHold);
  ASSERT_OK(store_->Reserve("reserved", FilterParams{1'000, 0.01}).status());
  const FilterParams spec{1'000, 0.01};
  ASSERT_OK(store_->Add("added", Views(Items("x", 0, 3)), &spec).status());
  ASSERT_OK(store_->Add("added", Views(Items("y", 0, 3)), &spec).status());  // exists now
  ASSERT_OK(store_->ReserveLike("like", "before").status());
  absl::optional<CreationLog::Made> made = store_->CreationsSince(at, kHold);
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(made->names, (std::vector<std::string>{"reserved", "added", "like"}));
  // The log lapses a minute after the last read: then the mover must list every filter.
  at = made->next;
  clock_.Advance(kHold + absl::Seconds(1));
  EXPECT_FALSE(store_->CreationsSince(at, kHold).has_value());
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
// The owner and the copy answer alike for every item of `items`, and count the same items.
void ExpectSameAnswers(FilterStore& owner, FilterStore& copy, absl::string_view name,
                       const std::vector<std::string>& items) {
  absl::StatusOr<std::vector<bool>> at_owner = owner.MightContain(name, Views(items));
  absl::StatusOr<std::vector<bool>> at_copy = copy.MightContain(name, Views(items));
  ASSERT_OK(at_owner.status());
  ASSERT_OK(at_copy.status());
  EXPECT_EQ(*at_copy, *at_owner);
  absl::StatusOr<FilterInfo> owner_info = owner.Stats(name);
  absl::StatusOr<FilterInfo> copy_info = copy.Stats(name);
  ASSERT_OK(owner_info.status());
  ASSERT_OK(copy_info.status());
  EXPECT_EQ(copy_info->stats.items_added, owner_info->stats.items_added);
}

// A windowed filter's records name the slices its items went to: the copy sets them there, so
// that they expire when they do at the owner, and counts only those it lacked (it was exported
// after the position, with some of them already).
TEST_F(FilterJournalTest, WindowedFiltersAreCaughtUpInTheSlicesTheirItemsWentTo) {
  FilterParams windowed{10'000, 0.01};
  windowed.window = absl::Hours(1);
  windowed.window_slices = 4;  // 15 minutes each
  ASSERT_OK(store_->Reserve("w", windowed).status());
  // Early in a slice, so that the adds below stay in it.
  clock_.Advance(absl::Minutes(15) - (clock_.Now() - absl::UnixEpoch()) % absl::Minutes(15));
  const std::vector<std::string> first = Items("first", 0, 200);
  ASSERT_OK(store_->Add("w", Views(first), nullptr).status());
  absl::StatusOr<JournalPosition> at = store_->StartJournal("w", kHold);
  ASSERT_OK(at.status());
  const std::vector<std::string> racing = Items("racing", 0, 50);  // in the copy and the journal
  ASSERT_OK(store_->Add("w", Views(racing), nullptr).status());
  CopyWhole("w");
  ASSERT_OK(store_->CheckpointAll());  // the hold keeps the records after the position
  ASSERT_OK(store_->Add("w", Views(racing), nullptr).status());  // nothing new: no record
  clock_.Advance(absl::Seconds(30));                             // within the hold, and the slice
  // In 100 adds: more records (and runs) than a chain has links, caught up in one change.
  const std::vector<std::string> later = Items("later", 0, 300);
  for (size_t i = 0; i < later.size(); i += 3) {
    const std::vector<std::string> three(later.begin() + i, later.begin() + i + 3);
    ASSERT_OK(store_->Add("w", Views(three), nullptr).status());
  }
  absl::StatusOr<JournalDelta> delta = store_->ReadJournal("w", *at, 1'000'000, kHold);
  ASSERT_OK(delta.status());
  EXPECT_TRUE(delta->hashes.empty()) << "a windowed filter's changes come as records";
  ASSERT_EQ(delta->records.size(), 101U);  // racing, then later's
  // Applied in the next slice: the items still go to the one they went to at the owner.
  clock_.Advance(absl::Minutes(15));
  const std::vector<absl::string_view> caught_up(delta->records.begin(), delta->records.end());
  absl::StatusOr<JournalPosition> copy_at = target_->StartJournal("w", kHold);
  ASSERT_OK(copy_at.status());
  absl::StatusOr<size_t> written = target_->ApplyJournalRecords("w", caught_up);
  ASSERT_OK(written.status());
  EXPECT_EQ(*written, 300U) << "the racing items were in the copy already";
  // The copy journalled the change as one record that its recovery reads back (a crash
  // replays it: Close's checkpoint below would hide a record that does not decode).
  absl::StatusOr<JournalDelta> journalled = target_->ReadJournal("w", *copy_at, 1'000'000, kHold);
  ASSERT_OK(journalled.status());
  ASSERT_EQ(journalled->records.size(), 1U);
  std::vector<bloom::ScalableFilter::Run> runs;
  std::vector<uint64_t> hashes;
  ASSERT_OK(DecodeJournalRecord(journalled->records.front(), runs, hashes));
  EXPECT_EQ(hashes.size(), 300U);
  std::vector<std::string> all = first;
  all.insert(all.end(), racing.begin(), racing.end());
  all.insert(all.end(), later.begin(), later.end());
  ExpectSameAnswers(*store_, *target_, "w", all);
  // The items' ages are the owner's, also after the copy's restart (which reads the change
  // back from its journal): all are remembered for the window, and forgotten alike once their
  // slice has expired.
  OpenTarget();
  absl::StatusOr<FilterInfo> reopened = target_->Stats("w");
  ASSERT_OK(reopened.status());
  clock_.Advance(absl::Minutes(40));  // 55.5 minutes after `later` was added
  ExpectSameAnswers(*store_, *target_, "w", all);
  absl::StatusOr<std::vector<bool>> remembered = target_->MightContain("w", Views(later));
  ASSERT_OK(remembered.status());
  EXPECT_EQ(std::count(remembered->begin(), remembered->end(), true), 300);
  clock_.Advance(absl::Minutes(25));  // its slice expired 75 minutes after it began
  ExpectSameAnswers(*store_, *target_, "w", all);
  absl::StatusOr<std::vector<bool>> forgotten = target_->MightContain("w", Views(later));
  ASSERT_OK(forgotten.status());
  EXPECT_LT(std::count(forgotten->begin(), forgotten->end(), true), 10);

  // The owner opens a slice the copy never had: its records do not apply there, and change
  // nothing (the mover copies the filter whole).
  at = store_->StartJournal("w", kHold);  // the hold lapsed meanwhile
  ASSERT_OK(at.status());
  const std::vector<std::string> newest = Items("newest", 0, 20);
  ASSERT_OK(store_->Add("w", Views(newest), nullptr).status());
  std::vector<std::string> records;
  const absl::Status refused = ApplyRecordsSince("w", *at, records);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "copy it whole")) << refused;
  absl::StatusOr<std::vector<bool>> untouched = target_->MightContain("w", Views(newest));
  ASSERT_OK(untouched.status());
  EXPECT_LT(std::count(untouched->begin(), untouched->end(), true), 3);
  // Nor do they apply to a filter without a window.
  ASSERT_OK(target_->Reserve("plain", FilterParams{1'000, 0.01}).status());
  EXPECT_TRUE(absl::IsFailedPrecondition(
      target_->ApplyJournalRecords("plain", {journalled->records.front()}).status()));
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
  EXPECT_TRUE(idle->records.empty());
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
  std::vector<std::string> records;
  const absl::Status refused = ApplyRecordsSince("c", *at, records);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  ASSERT_FALSE(records.empty());
  absl::StatusOr<std::vector<uint32_t>> untouched = target_->Count("c", Views(Items("b", 0, 100)));
  ASSERT_OK(untouched.status());
  EXPECT_LE(std::count(untouched->begin(), untouched->end(), 1u), 5)
      << "only false positives: nothing was written";
  // Into a BLOOM filter: refused; a damaged record: DATA_LOSS; a missing copy: NOT_FOUND.
  ASSERT_OK(target_->Reserve("bloom", FilterParams{1'000, 0.01}).status());
  EXPECT_TRUE(absl::IsFailedPrecondition(
      target_->ApplyJournalRecords("bloom", {records.front()}).status()));
  std::string damaged(records.front());
  damaged[damaged.size() / 2] ^= 0x40;
  EXPECT_TRUE(absl::IsDataLoss(target_->ApplyJournalRecords("c", {damaged}).status()));
  EXPECT_TRUE(
      absl::IsNotFound(target_->ApplyJournalRecords("missing", {records.front()}).status()));
}

}  // namespace
}  // namespace storage

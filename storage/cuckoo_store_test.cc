// CUCKOO filters in the store: adds, removes and counts that survive restarts (from the
// journal, from checkpoints, from both), growth, eviction and reload, refusals, checkpoints
// racing writes, and kill -9 under a mix of adds and removes.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/filter_store_fixture.h"
#include "storage/filter_transfer.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloomtest::Items;
using bloomtest::Views;

bloom::FilterParams Cuckoo(uint64_t capacity, double error_rate = 0.01) {
  bloom::FilterParams spec{capacity, error_rate};
  spec.kind = bloom::FilterKind::kCuckoo;
  return spec;
}

class CuckooStoreTest : public FilterStoreTest {
 protected:
  void Reopen() {
    StoreOptions options;
    options.background_checkpoints = false;
    Open(options);
  }
  // The copies held of each item.
  std::vector<uint32_t> Counts(absl::string_view filter, const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<uint32_t>> counts = store_->Count(filter, Views(items));
    EXPECT_OK(counts.status());
    return counts.ok() ? *counts : std::vector<uint32_t>(items.size(), 0);
  }
  // How many of `items` read present.
  int Present(absl::string_view filter, const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<bool>> present = store_->MightContain(filter, Views(items));
    EXPECT_OK(present.status());
    return present.ok() ? static_cast<int>(std::count(present->begin(), present->end(), true)) : 0;
  }
};

TEST_F(CuckooStoreTest, AddsRemovesAndCountsSurviveRestartsFromJournalAndCheckpoint) {
  ASSERT_OK(store_->Reserve("c", Cuckoo(10'000)).status());
  const std::vector<std::string> kept = Items("kept-", 0, 2000);
  const std::vector<std::string> gone = Items("gone-", 0, 2000);
  ASSERT_OK(store_->Add("c", Views(kept), nullptr).status());
  ASSERT_OK(store_->Add("c", Views(gone), nullptr).status());
  ASSERT_OK(store_->Add("c", {"twice", "twice"}, nullptr).status());
  absl::StatusOr<std::vector<bool>> removed = store_->RemoveItems("c", Views(gone));
  ASSERT_OK(removed.status());
  EXPECT_EQ(std::count(removed->begin(), removed->end(), true), 2000);

  // Three ways back: the journal alone; a checkpoint, then more journal; a checkpoint alone.
  for (int restart = 0; restart < 3; ++restart) {
    SCOPED_TRACE(absl::StrCat("restart ", restart));
    if (restart == 1) {
      ASSERT_OK(store_->CheckpointAll());
      ASSERT_OK(store_->RemoveItems("c", {"twice"}).status());
    }
    store_->Close().IgnoreError();  // restart 0 and 1 replay what Close checkpointed anyway
    Reopen();
    EXPECT_EQ(Present("c", kept), 2000);
    EXPECT_LE(Present("c", gone), 2000 * 0.01);
    EXPECT_EQ(Counts("c", {"twice"})[0], restart == 0 ? 2u : 1u);
    absl::StatusOr<FilterInfo> info = store_->Stats("c");
    ASSERT_OK(info.status());
    EXPECT_TRUE(info->spec.cuckoo());
    EXPECT_EQ(info->stats.items_added, restart == 0 ? 2002u : 2001u);
    ASSERT_EQ(info->stats.sub_filters.size(), 1u);
    // A scaling chain's first table is at half the error rate: 11 bits reach 0.5%.
    EXPECT_EQ(info->stats.sub_filters[0].fingerprint_bits, 11u);
    EXPECT_GT(info->stats.sub_filters[0].buckets, 10'000u / 4);
  }
}

TEST_F(CuckooStoreTest, CheckpointsRacingAddsAndRemovesKeepTheFilterExact) {
  // Checkpoints copy pages while adds and removes go on (stored_filter_cuckoo.cc); the filter
  // loaded afterwards holds exactly the copies it held (the crash case is the kill -9 test).
  ASSERT_OK(store_->Reserve("c", Cuckoo(500)).status());
  std::atomic<bool> stop{false};
  std::thread checkpointer([&] {
    while (!stop.load()) ASSERT_OK(store_->CheckpointAll());
  });
  for (int round = 0; round < 40; ++round) {
    ASSERT_OK(
        store_->Add("c", Views(Items(absl::StrCat("r", round, "-"), 0, 100)), nullptr).status());
    if (round > 0) {
      ASSERT_OK(store_->RemoveItems("c", Views(Items(absl::StrCat("r", round - 1, "-"), 0, 50)))
                    .status());
    }
  }
  stop.store(true);
  checkpointer.join();
  absl::StatusOr<FilterInfo> before = store_->Stats("c");
  ASSERT_OK(before.status());
  EXPECT_GT(before->stats.sub_filters.size(), 1u) << "the chain should have grown";
  store_->Close().IgnoreError();
  Reopen();
  absl::StatusOr<FilterInfo> after = store_->Stats("c");
  ASSERT_OK(after.status());
  EXPECT_EQ(after->stats.items_added, before->stats.items_added);
  EXPECT_EQ(after->stats.sub_filters.size(), before->stats.sub_filters.size());
  // Removing added items from a grown chain can take a colliding item's copy (about 2% of the
  // error rate per removal: CuckooRemoveTest); a lost write would lose a whole round.
  int kept = 0;
  for (int round = 0; round < 40; ++round) {
    kept += Present("c", Items(absl::StrCat("r", round, "-"), 50, 100));
  }
  EXPECT_GE(kept, 40 * 50 - 3);
}

TEST_F(CuckooStoreTest, GrowsAndAFullNonScalingFilterChangesNothing) {
  ASSERT_OK(store_->Reserve("grows", Cuckoo(100)).status());
  const std::vector<std::string> many = Items("g-", 0, 3000);
  ASSERT_OK(store_->Add("grows", Views(many), nullptr).status());
  bloom::FilterParams fixed = Cuckoo(100);
  fixed.non_scaling = true;
  ASSERT_OK(store_->Reserve("fixed", fixed).status());
  ASSERT_OK(store_->Add("fixed", Views(Items("f-", 0, 100)), nullptr).status());
  absl::StatusOr<std::vector<bool>> over = store_->Add("fixed", Views(Items("x-", 0, 50)), nullptr);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  store_->Close().IgnoreError();
  Reopen();
  EXPECT_EQ(Present("grows", many), 3000);
  absl::StatusOr<FilterInfo> grown = store_->Stats("grows");
  ASSERT_OK(grown.status());
  EXPECT_GE(grown->stats.sub_filters.size(), 4u);
  EXPECT_EQ(grown->stats.items_added, 3000u);
  absl::StatusOr<FilterInfo> full = store_->Stats("fixed");
  ASSERT_OK(full.status());
  EXPECT_EQ(full->stats.items_added, 100u);
  EXPECT_EQ(Present("fixed", Items("f-", 0, 100)), 100);
}

TEST_F(CuckooStoreTest, RefusesWhatItsKindDoesNotHave) {
  ASSERT_OK(store_->Reserve("bloom", {1000, 0.01}).status());
  ASSERT_OK(store_->Reserve("c", Cuckoo(1000)).status());
  EXPECT_EQ(store_->RemoveItems("bloom", {"a"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::Status count = store_->Count("bloom", {"a"}).status();
  EXPECT_EQ(count.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(count.message().find("BLOOM"), absl::string_view::npos) << count;
  EXPECT_EQ(store_->RemoveItems("missing", {"a"}).status().code(), absl::StatusCode::kNotFound);
  bloom::FilterParams windowed = Cuckoo(1000);
  windowed.window = absl::Hours(1);
  absl::Status window = store_->Reserve("w", windowed).status();
  EXPECT_EQ(window.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(window.message().find("window"), absl::string_view::npos) << window;
  // Another kind is another spec.
  EXPECT_EQ(store_->Reserve("c", {1000, 0.01}).status().code(), absl::StatusCode::kAlreadyExists);
  absl::StatusOr<FilterStore::ReserveResult> again = store_->Reserve("c", Cuckoo(1000));
  ASSERT_OK(again.status());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(store_->Merge("c", {"bloom"}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Merge("bloom", {"c"}).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CuckooStoreTest, CreatedByAnAddEvictedAndLoadedAgain) {
  StoreOptions options;
  options.background_checkpoints = false;
  options.memory_limit_bytes = 128 << 10;
  Open(options);
  const bloom::FilterParams spec = Cuckoo(1000);
  for (int user = 0; user < 200; ++user) {
    const std::string name = absl::StrCat("user-", user);
    ASSERT_OK(store_->Add(name, Views(Items("seen-", 0, 20)), &spec).status());
    ASSERT_OK(store_->RemoveItems(name, Views(Items("seen-", 0, 5))).status());
  }
  store_->EvictToBudget();
  EXPECT_LT(store_->num_filters(), 200u) << "some filters should have been evicted";
  for (int user = 0; user < 200; ++user) {
    const std::string name = absl::StrCat("user-", user);
    EXPECT_EQ(Present(name, Items("seen-", 5, 20)), 15) << name;
    const std::vector<uint32_t> counts = Counts(name, Items("seen-", 0, 5));
    EXPECT_LE(std::count(counts.begin(), counts.end(), 0u) + 1, 6) << name;
  }
  store_->Close().IgnoreError();
  Open(options);
  for (int user = 0; user < 200; user += 7) {
    EXPECT_EQ(Present(absl::StrCat("user-", user), Items("seen-", 5, 20)), 15) << user;
  }
}

// Export, then Import under another name and after a restart: the copy holds the same copies;
// a version 1 dump (a Bloom filter's) still imports; a cuckoo dump does not merge.
TEST_F(CuckooStoreTest, ExportImportKeepsEveryCopyWhileAddsGoOn) {
  ASSERT_OK(store_->Reserve("c", Cuckoo(300)).status());
  const std::vector<std::string> items = Items("i-", 0, 2000);  // grows to several tables
  ASSERT_OK(store_->Add("c", Views(items), nullptr).status());
  ASSERT_OK(store_->RemoveItems("c", Views(Items("i-", 0, 500))).status());
  ASSERT_OK(store_->Add("c", {"twice", "twice"}, nullptr).status());
  std::string dump;
  const std::vector<uint32_t> before = Counts("c", items);
  // Adds racing the export move fingerprints between pages: the dump is of a copy.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      ASSERT_OK(store_->Add("c", {absl::StrCat("racing-", i)}, nullptr).status());
    }
  });
  ASSERT_OK(store_->Export("c", [&](absl::string_view chunk) {
    dump.append(chunk.data(), chunk.size());
    return absl::OkStatus();
  }));
  stop.store(true);
  writer.join();
  ASSERT_EQ(dump.substr(4, 2), std::string("\x02\x00", 2)) << "a version 2 dump";
  absl::StatusOr<std::unique_ptr<PendingImport>> import = store_->BeginImport("copy");
  ASSERT_OK(import.status());
  ASSERT_OK((*import)->Append(dump));
  absl::StatusOr<FilterInfo> copied = store_->CommitImport(**import);
  ASSERT_OK(copied.status());
  EXPECT_TRUE(copied->spec.cuckoo());
  // The copy holds what the filter held at one moment of the export: no copy fewer than
  // before it began, none more than after it (racing adds only add, and may collide).
  const std::vector<uint32_t> after = Counts("c", items);
  for (int restart = 0; restart < 2; ++restart) {
    const std::vector<uint32_t> copied = Counts("copy", items);
    ASSERT_EQ(copied.size(), items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      ASSERT_GE(copied[i], before[i]) << items[i];
      ASSERT_LE(copied[i], after[i]) << items[i];
    }
    EXPECT_GE(Counts("copy", {"twice"})[0], 2u);
    store_->Close().IgnoreError();
    Reopen();
  }
  absl::StatusOr<std::unique_ptr<PendingImport>> merging = store_->BeginImport("c", true);
  ASSERT_OK(merging.status());
  ASSERT_OK((*merging)->Append(dump));
  EXPECT_EQ(store_->CommitImport(**merging).status().code(), absl::StatusCode::kFailedPrecondition);
  // A corrupt version byte: a version 1 dump cannot hold a cuckoo filter.
  std::string relabelled = dump;
  relabelled[4] = 1;
  absl::StatusOr<std::unique_ptr<PendingImport>> bad = store_->BeginImport("bad");
  ASSERT_OK(bad.status());
  EXPECT_EQ((*bad)->Append(relabelled).code(), absl::StatusCode::kInvalidArgument);
}

// A cuckoo table's bytes are not a multiple of the budget's 32-byte charge unit: what a filter
// is charged, created, grown, evicted, loaded and imported, is all given back when it goes.
TEST_F(CuckooStoreTest, EveryChargeIsGivenBack) {
  StoreOptions options;
  options.background_checkpoints = false;
  options.memory_limit_bytes = 64 << 20;
  Open(options);
  const uint64_t before = store_->memory_used();
  for (int f = 0; f < 10; ++f) {
    const std::string name = absl::StrCat("c", f);
    ASSERT_OK(store_->Reserve(name, Cuckoo(7 + f)).status());
    ASSERT_OK(store_->Add(name, Views(Items("i-", 0, 50 + f)), nullptr).status());  // grows
  }
  std::string dump;
  ASSERT_OK(store_->Export("c3", [&](absl::string_view chunk) {
    dump.append(chunk.data(), chunk.size());
    return absl::OkStatus();
  }));
  absl::StatusOr<std::unique_ptr<PendingImport>> import = store_->BeginImport("copy");
  ASSERT_OK(import.status());
  ASSERT_OK((*import)->Append(dump));
  ASSERT_OK(store_->CommitImport(**import).status());
  store_->Close().IgnoreError();
  Open(options);  // loaded at start-up
  for (int f = 0; f < 10; ++f) ASSERT_OK(store_->Delete(absl::StrCat("c", f)));
  ASSERT_OK(store_->Delete("copy"));
  EXPECT_EQ(store_->memory_used(), before);
}

TEST_F(CuckooStoreTest, ListsAndDeletesBothKinds) {
  ASSERT_OK(store_->Reserve("a-bloom", {1000, 0.01}).status());
  ASSERT_OK(store_->Reserve("a-cuckoo", Cuckoo(1000)).status());
  ASSERT_OK(store_->Add("a-cuckoo", {"x", "y"}, nullptr).status());
  absl::StatusOr<FilterStore::ListPage> page = store_->List("a-", 10, "");
  ASSERT_OK(page.status());
  ASSERT_EQ(page->filters.size(), 2u);
  EXPECT_FALSE(page->filters[0].spec.cuckoo());
  EXPECT_TRUE(page->filters[1].spec.cuckoo());
  EXPECT_EQ(page->filters[1].stats.items_added, 2u);
  ASSERT_OK(store_->Delete("a-cuckoo"));
  EXPECT_EQ(store_->Count("a-cuckoo", {"x"}).status().code(), absl::StatusCode::kNotFound);
  ASSERT_OK(store_->Reserve("a-cuckoo", {1000, 0.01}).status());  // the name is free again
  store_->Close().IgnoreError();
  Reopen();
  absl::StatusOr<FilterInfo> info = store_->Stats("a-cuckoo");
  ASSERT_OK(info.status());
  EXPECT_FALSE(info->spec.cuckoo());
}

TEST_F(CuckooStoreTest, KillNineUnderAddsAndRemovesLosesNothingAcknowledged) {
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE(absl::StrCat("run ", run));
    store_.reset();
    std::filesystem::create_directories(absl::StrCat(dir_.path(), "/run", run));
    const std::string command =
        absl::StrCat(CRASH_HELPER_PATH, " ", dir_.path(), "/run", run, " --cuckoo ", 30 + 10 * run);
    FILE* out = popen(command.c_str(), "r");
    ASSERT_NE(out, nullptr);
    int acked = -1;
    char line[128];
    while (std::fgets(line, sizeof(line), out) != nullptr) {
      int round = 0;
      if (std::sscanf(line, "acked %d", &round) == 1) acked = round;
    }
    pclose(out);
    ASSERT_GE(acked, 1);
    StoreOptions options;
    options.background_checkpoints = false;
    options.data_dir = absl::StrCat(dir_.path(), "/run", run);
    absl::StatusOr<std::unique_ptr<FilterStore>> reopened = FilterStore::Open(options);
    ASSERT_OK(reopened.status());
    store_ = *std::move(reopened);
    // The second half of every acknowledged round stays; the first half of each round before
    // the last acknowledged one was removed. The filter grows (capacity 1000), where removing
    // an added item can take a colliding item's copy (about 2% of the error rate per removal:
    // CuckooRemoveTest): a few may be missing, a lost write would lose a round's 50.
    int kept = 0, removed_present = 0;
    for (int round = 0; round <= acked; ++round) {
      kept += Present("c", Items(absl::StrCat("c-", round, "-"), 50, 100));
      if (round < acked) {
        removed_present += Present("c", Items(absl::StrCat("c-", round, "-"), 0, 50));
      }
    }
    EXPECT_GE(kept, 50 * (acked + 1) - 3);
    EXPECT_LE(removed_present, acked + 5);  // 1% false positives: about acked / 2
  }
}

}  // namespace
}  // namespace storage

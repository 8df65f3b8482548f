// FilterStore::ReserveLike and Merge (filter_store_merge.cc, stored_filter_merge.cc): the union
// answers for every item of every source, survives a restart, counts, grows the target's chain,
// refuses filters not made alike, and keeps every add made to the target while it merges.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "storage/filter_store.h"
#include "storage/filter_store_fixture.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloom::FilterParams;
using bloomtest::Items;
using bloomtest::Views;

const FilterParams kSpec{10'000, 0.01};

class FilterMergeTest : public FilterStoreTest {
 protected:
  void AddAll(const std::string& filter, const std::vector<std::string>& items) {
    ASSERT_OK(store_->Add(filter, Views(items), nullptr).status());
  }
  // The fraction of `absent` items `filter` answers "maybe" for.
  double FalsePositiveRate(const std::string& filter, const std::vector<std::string>& absent) {
    absl::StatusOr<std::vector<bool>> present = store_->MightContain(filter, Views(absent));
    EXPECT_OK(present.status());
    if (!present.ok()) return 1;
    return static_cast<double>(std::count(present->begin(), present->end(), true)) /
           static_cast<double>(absent.size());
  }
};

TEST_F(FilterMergeTest, ReserveLikeCopiesSpecAndSeedOnly) {
  ASSERT_OK(store_->Reserve("model", kSpec).status());
  AddAll("model", Items("m", 0, 100));
  absl::StatusOr<FilterStore::ReserveResult> like = store_->ReserveLike("copy", "model");
  ASSERT_OK(like.status());
  EXPECT_TRUE(like->created);
  EXPECT_EQ(like->info.spec, store_->Stats("model")->spec);
  EXPECT_EQ(like->info.stats.items_added, 0u);  // empty: only the shape is copied
  absl::StatusOr<std::vector<bool>> present =
      store_->MightContain("copy", Views(Items("m", 0, 100)));
  ASSERT_OK(present.status());
  EXPECT_EQ(std::count(present->begin(), present->end(), true), 0);

  absl::StatusOr<FilterStore::ReserveResult> again = store_->ReserveLike("copy", "model");
  ASSERT_OK(again.status());
  EXPECT_FALSE(again->created);
  // Same spec, another seed: not like the model.
  ASSERT_OK(store_->Reserve("stranger", kSpec).status());
  absl::Status taken = store_->ReserveLike("stranger", "model").status();
  EXPECT_TRUE(absl::IsAlreadyExists(taken)) << taken;
  EXPECT_TRUE(absl::StrContains(taken.message(), "not made like 'model'")) << taken;
  EXPECT_TRUE(absl::IsNotFound(store_->ReserveLike("x", "missing").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->ReserveLike("x", "").status()));
}

// Three filters alike, one grown to several sub-filters: the union holds every item, counts the
// sum, has the longest chain, and estimates its cardinality and false-positive rate from the
// bits. All of it after a restart too.
TEST_F(FilterMergeTest, TheUnionAnswersForEveryItemOfEverySourceAndSurvivesARestart) {
  ASSERT_OK(store_->Reserve("union", kSpec).status());
  ASSERT_OK(store_->ReserveLike("shard-a", "union").status());
  ASSERT_OK(store_->ReserveLike("shard-b", "union").status());
  const std::vector<std::string> in_union = Items("u", 0, 3'000);
  const std::vector<std::string> in_a = Items("a", 0, 5'000);
  const std::vector<std::string> in_b = Items("b", 0, 30'000);  // grows shard-b's chain
  AddAll("union", in_union);
  AddAll("shard-a", in_a);
  AddAll("shard-b", in_b);
  const uint32_t grown = store_->Stats("shard-b")->stats.sub_filters.size();
  ASSERT_GT(grown, 1u);

  absl::StatusOr<FilterInfo> merged = store_->Merge("union", {"shard-a", "shard-b"});
  ASSERT_OK(merged.status());
  EXPECT_EQ(merged->stats.sub_filters.size(), grown);
  EXPECT_EQ(merged->stats.items_added, 38'000u);
  EXPECT_NEAR(merged->stats.estimated_cardinality, 38'000, 38'000 * 0.05);
  for (const auto* items : {&in_union, &in_a, &in_b}) ExpectAllPresent("union", *items);
  // Each sub-filter now holds what it held in every source: the first one, full in shard-b,
  // took the union's and shard-a's items too, so the union's false positives exceed the
  // sources' 1%. Stats says so, from the bits: the measured rate is the estimated one.
  const std::vector<std::string> absent = Items("absent", 0, 100'000);
  const double estimated = merged->stats.estimated_error_rate;
  EXPECT_GT(estimated, 0.02);
  EXPECT_NEAR(FalsePositiveRate("union", absent), estimated, 0.15 * estimated);
  // The sources are unchanged.
  EXPECT_EQ(store_->Stats("shard-a")->stats.items_added, 5'000u);

  Open({.background_checkpoints = false});  // a restart: the union was written
  for (const auto* items : {&in_union, &in_a, &in_b}) ExpectAllPresent("union", *items);
  EXPECT_EQ(store_->Stats("union")->stats.items_added, 38'000u);
  EXPECT_EQ(store_->Stats("union")->stats.sub_filters.size(), grown);
}

TEST_F(FilterMergeTest, FiltersNotMadeAlikeAreRefusedWithTheReason) {
  ASSERT_OK(store_->Reserve("target", kSpec).status());
  ASSERT_OK(store_->Reserve("stranger", kSpec).status());  // same spec, its own seed
  AddAll("stranger", Items("s", 0, 10));
  absl::Status seed = store_->Merge("target", {"stranger"}).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(seed)) << seed;
  EXPECT_TRUE(absl::StrContains(seed.message(), "another seed")) << seed;

  FilterParams windowed = kSpec;
  windowed.window = absl::Hours(1);
  ASSERT_OK(store_->Reserve("windowed", windowed).status());
  ASSERT_OK(store_->ReserveLike("windowed-copy", "windowed").status());
  absl::Status window = store_->Merge("windowed-copy", {"windowed"}).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(window)) << window;
  EXPECT_TRUE(absl::StrContains(window.message(), "window")) << window;

  FilterParams fixed = kSpec;
  fixed.non_scaling = true;
  ASSERT_OK(store_->Reserve("fixed", fixed).status());
  EXPECT_TRUE(absl::IsNotFound(store_->Merge("fixed", {"missing"}).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->Merge("missing", {"fixed"}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Merge("fixed", {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Merge("fixed", {"fixed"}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Merge("fixed", {""}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Merge("target", {"fixed", "fixed"}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      store_->Merge("target", std::vector<std::string>(FilterStore::kMaxMergeSources + 1, "x"))
          .status()));
  // Nothing was merged by any of these.
  EXPECT_EQ(store_->Stats("target")->stats.items_added, 0u);
  EXPECT_EQ(FalsePositiveRate("target", Items("s", 0, 10)), 0);
}

// Import with merge_into_existing ORs a dump into the filter of its name: the union of a filter
// with a dump of one alike (as from another server), while a dump of a stranger is refused.
TEST_F(FilterMergeTest, ImportMergesADumpIntoTheExistingFilter) {
  auto dump_of = [&](const std::string& name) {
    std::string dump;
    EXPECT_OK(store_->Export(name, [&](absl::string_view chunk) {
      dump.append(chunk.data(), chunk.size());
      return absl::OkStatus();
    }));
    return dump;
  };
  auto import = [&](const std::string& name, const std::string& dump, bool merge) {
    absl::StatusOr<std::unique_ptr<PendingImport>> pending = store_->BeginImport(name, merge);
    if (!pending.ok()) return pending.status();
    RETURN_IF_ERROR((*pending)->Append(dump));
    return store_->CommitImport(**pending).status();
  };
  ASSERT_OK(store_->Reserve("seen", kSpec).status());
  ASSERT_OK(store_->ReserveLike("elsewhere", "seen").status());
  const std::vector<std::string> here = Items("here", 0, 3'000);
  const std::vector<std::string> there = Items("there", 0, 15'000);  // two sub-filters
  AddAll("seen", here);
  AddAll("elsewhere", there);
  const std::string dump = dump_of("elsewhere");
  EXPECT_TRUE(absl::IsAlreadyExists(import("seen", dump, /*merge=*/false)));
  ASSERT_OK(import("seen", dump, /*merge=*/true));
  ExpectAllPresent("seen", here);
  ExpectAllPresent("seen", there);
  EXPECT_EQ(store_->Stats("seen")->stats.items_added, 18'000u);
  ASSERT_OK(import("new", dump, /*merge=*/true));  // no filter of that name: created
  ExpectAllPresent("new", there);

  ASSERT_OK(store_->Reserve("stranger", kSpec).status());
  absl::Status refused = import("seen", dump_of("stranger"), /*merge=*/true);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_EQ(store_->Stats("seen")->stats.items_added, 18'000u);
}

// A merge that returned is on disk: a process that merges and then dies by SIGKILL (no Close,
// no checkpoint after the merge's own: storage_crash_helper --merge) leaves a target that
// answers for the source's items.
TEST_F(FilterMergeTest, AnAnsweredMergeSurvivesKillNine) {
  store_.reset();  // the helper takes the directory
  const bloomtest::CommandResult helper = bloomtest::RunCommand(
      absl::StrCat(CRASH_HELPER_PATH, " ", dir_.path(), " --merge 2000 25000"));
  // (The shell may add "Killed".)
  ASSERT_TRUE(absl::StartsWith(helper.out, "merged\n")) << helper.out << helper.exit_code;
  EXPECT_TRUE(helper.exit_code == -1 || helper.exit_code == 128 + SIGKILL) << helper.exit_code;
  Open({.background_checkpoints = false});
  ExpectAllPresent("target", Items("t-", 0, 2'000));
  ExpectAllPresent("target", Items("s-", 0, 25'000));  // two sub-filters of the source
  EXPECT_EQ(store_->Stats("target")->stats.items_added, 27'000u);
}

// Adds to the target run on while sources merge into it: every add acknowledged and every
// source item reads present, before and after a restart.
TEST_F(FilterMergeTest, AddsToTheTargetDuringMergesAreAllKept) {
  ASSERT_OK(store_->Reserve("target", {200'000, 0.01}).status());
  constexpr int kSources = 4;
  std::vector<std::vector<std::string>> source_items;
  for (int s = 0; s < kSources; ++s) {
    const std::string name = absl::StrCat("source-", s);
    ASSERT_OK(store_->ReserveLike(name, "target").status());
    source_items.push_back(Items(name, 0, 20'000));
    AddAll(name, source_items.back());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> acked_batches{0};
  std::thread adder([&] {
    for (int batch = 0; !stop.load(); ++batch) {
      const std::vector<std::string> items = Items("t", batch * 100, (batch + 1) * 100);
      if (!store_->Add("target", Views(items), nullptr).ok()) break;
      acked_batches.store(batch + 1);
    }
  });
  // The merges begin once adds are flowing (on a loaded machine they could all finish before
  // the adder's first batch).
  while (acked_batches.load() == 0) std::this_thread::yield();
  for (int s = 0; s < kSources; ++s) {
    ASSERT_OK(store_->Merge("target", {absl::StrCat("source-", s)}).status());
  }
  stop.store(true);
  adder.join();
  ASSERT_GT(acked_batches.load(), 0);
  const std::vector<std::string> added = Items("t", 0, acked_batches.load() * 100);
  ExpectAllPresent("target", added);
  for (const auto& items : source_items) ExpectAllPresent("target", items);

  Open({.background_checkpoints = false});
  ExpectAllPresent("target", added);
  for (const auto& items : source_items) ExpectAllPresent("target", items);
}

}  // namespace
}  // namespace storage

// Idle expiry (filter_store_idle_expiry.cc): a filter unused for its idle_ttl is gone for every
// operation at once (before any sweep), the sweeper deletes resident and cold (evicted) filters
// without loading them, and the last use survives a restart. Clocks are ManualClocks.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloomtest::Items;
using bloomtest::Views;

bloom::FilterParams IdleSpec(absl::Duration ttl) {
  bloom::FilterParams spec{1000, 0.01};
  spec.idle_ttl = ttl;
  return spec;
}

class IdleExpiryTest : public ::testing::Test {
 protected:
  void Open(bool background = false, uint64_t limit = 0) {
    store_.reset();
    StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = background;
    options.memory_limit_bytes = limit;
    options.clock = &clock_;
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
  }
  void SetUp() override { Open(); }

  std::vector<std::string> ListedNames() {
    absl::StatusOr<FilterStore::ListPage> page = store_->List("", 1000, "");
    EXPECT_OK(page.status());
    std::vector<std::string> names;
    if (page.ok()) {
      for (const FilterInfo& info : page->filters) names.push_back(info.name);
    }
    return names;
  }

  // Waits (bounded, in real time) for the background sweeper to have deleted `n` filters.
  bool WaitForExpired(uint64_t n) {
    return bloomtest::WaitFor([&] { return store_->Figures().filters_expired >= n; });
  }

  bloomtest::TempDir dir_;
  bloomtime::ManualClock clock_;
  std::unique_ptr<FilterStore> store_;
};

TEST_F(IdleExpiryTest, UseKeepsAFilterAliveAndIdlenessDeletesItForEveryOperation) {
  absl::StatusOr<FilterStore::ReserveResult> reserved =
      store_->Reserve("feed:1", IdleSpec(absl::Hours(1)));
  ASSERT_OK(reserved.status());
  ASSERT_TRUE(reserved->info.expires_at.has_value());
  EXPECT_EQ(*reserved->info.expires_at, clock_.Now() + absl::Hours(1));
  ASSERT_OK(store_->Reserve("plain", {1000, 0.01}).status());
  ASSERT_OK(store_->Add("feed:1", Views(Items("a", 0, 10)), nullptr).status());

  clock_.Advance(absl::Minutes(50));
  ASSERT_OK(store_->MightContain("feed:1", Views(Items("a", 0, 10))).status());  // a use
  clock_.Advance(absl::Minutes(50));  // 100 min after creation, 50 after the last use
  absl::StatusOr<FilterInfo> info = store_->Stats("feed:1");
  ASSERT_OK(info.status());
  EXPECT_EQ(*info->expires_at, clock_.Now() + absl::Minutes(10));
  EXPECT_FALSE(store_->Stats("plain")->expires_at.has_value());

  clock_.Advance(absl::Minutes(11));  // Stats is not a use: now idle for 61 minutes
  EXPECT_EQ(ListedNames(), std::vector<std::string>{"plain"});
  EXPECT_EQ(store_->Stats("feed:1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->MightContain("feed:1", Views(Items("a", 0, 1))).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Figures().filters_expired, 1u);
  // The name is free: a Reserve creates a fresh, empty filter.
  reserved = store_->Reserve("feed:1", IdleSpec(absl::Hours(1)));
  ASSERT_OK(reserved.status());
  EXPECT_TRUE(reserved->created);
  EXPECT_EQ(reserved->info.stats.items_added, 0u);
  // An Add with create_if_missing to an expired name makes a new filter too.
  clock_.Advance(absl::Hours(2));
  const bloom::FilterParams spec = IdleSpec(absl::Hours(1));
  absl::StatusOr<std::vector<bool>> added = store_->Add("feed:1", Views(Items("a", 0, 10)), &spec);
  ASSERT_OK(added.status());
  EXPECT_EQ(std::count(added->begin(), added->end(), true), 10);
}

TEST_F(IdleExpiryTest, LastUseSurvivesARestart) {
  ASSERT_OK(store_->Reserve("kept", IdleSpec(absl::Hours(1))).status());
  ASSERT_OK(store_->Reserve("dropped", IdleSpec(absl::Hours(1))).status());
  clock_.Advance(absl::Minutes(40));
  ASSERT_OK(store_->Add("kept", Views(Items("k", 0, 5)), nullptr).status());
  Open();                             // clean shutdown and start
  clock_.Advance(absl::Minutes(40));  // "kept" used 40 min ago, "dropped" 80
  EXPECT_EQ(ListedNames(), std::vector<std::string>{"kept"});
  EXPECT_OK(store_->Stats("kept").status());
  EXPECT_EQ(store_->Stats("dropped").status().code(), absl::StatusCode::kNotFound);
}

// The store keeps a filter's idle_ttl, not its bloom::ScalableFilter: Stats, Reserve's spec
// check and the metadata record (a restart, an eviction) all see it, windowed or not, and a
// filter without one has none.
TEST_F(IdleExpiryTest, AFilterKeepsItsIdleTtlThroughReserveRestartAndEviction) {
  bloom::FilterParams windowed = IdleSpec(absl::Minutes(90) + absl::Microseconds(7));
  windowed.window = absl::Hours(1);
  const std::vector<std::pair<std::string, bloom::FilterParams>> specs = {
      {"idle", IdleSpec(absl::Hours(3))}, {"idle-window", windowed}, {"plain", {1000, 0.01}}};
  auto expect_specs = [&](const std::string& when) {
    for (const auto& [name, spec] : specs) {
      ASSERT_OK(store_->MightContain(name, Views(Items("x", 0, 1))).status());  // loads it
      absl::StatusOr<FilterInfo> info = store_->Stats(name);
      ASSERT_OK(info.status());
      EXPECT_EQ(info->spec.idle_ttl, spec.idle_ttl) << name << " " << when;
      EXPECT_EQ(info->expires_at.has_value(), spec.idle_ttl != absl::ZeroDuration()) << name;
      // The same spec again is the same filter; another idle_ttl is another spec.
      absl::StatusOr<FilterStore::ReserveResult> again = store_->Reserve(name, spec);
      ASSERT_OK(again.status());
      EXPECT_FALSE(again->created);
      bloom::FilterParams other = spec;
      other.idle_ttl += absl::Seconds(1);
      EXPECT_EQ(store_->Reserve(name, other).status().code(), absl::StatusCode::kAlreadyExists)
          << name << " " << when;
    }
  };
  uint64_t largest = 0;
  for (const auto& [name, spec] : specs) {
    absl::StatusOr<FilterStore::ReserveResult> reserved = store_->Reserve(name, spec);
    ASSERT_OK(reserved.status());
    const bloom::ScalableFilterStats& stats = reserved->info.stats;
    largest = std::max(largest, ResidentCharge(stats.size_bytes, stats.sub_filters.size()));
  }
  expect_specs("created");
  Open();
  expect_specs("after a restart");
  // A budget that holds one of them at a time: each use loads its filter and evicts another.
  Open(/*background=*/false, /*limit=*/largest + 64);
  expect_specs("loaded under a budget");
  EXPECT_GE(store_->Figures().evictions, 2u);
}

TEST_F(IdleExpiryTest, TheSweeperDeletesResidentAndColdFiltersWithoutLoadingThem) {
  // A limit that holds about 30 small filters: most of the 200 below are cold.
  Open(/*background=*/true, /*limit=*/48 << 10);
  const bloom::FilterParams spec = IdleSpec(absl::Minutes(10));
  for (int f = 0; f < 200; ++f) {
    ASSERT_OK(store_->Add(absl::StrCat("user:", f), Views(Items("x", 0, 20)), &spec).status());
  }
  ASSERT_OK(store_->Reserve("forever", {1000, 0.01}).status());
  store_->EvictToBudget();
  ASSERT_OK(store_->CheckpointAll());  // persists every last use
  const StoreFigures before = store_->Figures();
  ASSERT_GT(before.cold_filters, 100u);
  clock_.Advance(absl::Minutes(11));
  ASSERT_TRUE(WaitForExpired(200)) << store_->Figures().filters_expired;
  const StoreFigures after = store_->Figures();
  EXPECT_EQ(after.loads, before.loads);  // cold ones were deleted from their records
  EXPECT_EQ(after.filters, 1u);
  EXPECT_EQ(after.cold_filters, 0u);
  EXPECT_EQ(ListedNames(), std::vector<std::string>{"forever"});
  Open();  // and they stay deleted
  EXPECT_EQ(ListedNames(), std::vector<std::string>{"forever"});
}

}  // namespace
}  // namespace storage

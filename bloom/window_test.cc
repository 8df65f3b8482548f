// Windowed filters (window.h over scalable_filter.h): the guarantees, checked against an exact
// model over many seeds and clock schedules with a manual clock.
#include "bloom/window.h"

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bloom/scalable_filter.h"
#include "gtest/gtest.h"

namespace bloom {
namespace {

FilterParams Windowed(uint64_t capacity, double p, absl::Duration window, uint32_t slices = 0,
                      bool non_scaling = false) {
  FilterParams spec{capacity, p, 0, non_scaling};
  spec.window = window;
  spec.window_slices = slices;
  absl::StatusOr<FilterParams> normalized = NormalizeSpec(spec);
  EXPECT_TRUE(normalized.ok()) << normalized.status();
  return *normalized;
}

bool Add1(ScalableFilter& filter, absl::string_view item) {
  const uint64_t hash = filter.Hash(item);
  bool added = false;
  EXPECT_TRUE(filter.Add({&hash, 1}, &added).ok());
  return added;
}

bool Has(const ScalableFilter& filter, absl::string_view item) {
  const uint64_t hash = filter.Hash(item);
  bool present = false;
  filter.MightContainMany({&hash, 1}, &present);
  return present;
}

TEST(WindowSpecTest, ValidatesEachFieldByName) {
  struct Case {
    absl::Duration window;
    uint32_t slices;
    absl::Duration idle_ttl;
    const char* field;
  };
  for (const Case& c : {
           Case{absl::Milliseconds(999), 0, absl::ZeroDuration(), "spec.window"},
           Case{-absl::Seconds(5), 0, absl::ZeroDuration(), "spec.window"},
           Case{absl::Hours(24 * 3660), 0, absl::ZeroDuration(), "spec.window"},
           Case{absl::Seconds(10), 65, absl::ZeroDuration(), "spec.window_slices"},
           Case{absl::ZeroDuration(), 4, absl::ZeroDuration(), "spec.window_slices"},
           Case{absl::ZeroDuration(), 0, absl::Milliseconds(10), "spec.idle_ttl"},
           Case{absl::ZeroDuration(), 0, -absl::Seconds(1), "spec.idle_ttl"},
           Case{absl::ZeroDuration(), 0, absl::InfiniteDuration(), "spec.idle_ttl"},
       }) {
    FilterParams spec{100, 0.01, 0, false};
    spec.window = c.window;
    spec.window_slices = c.slices;
    spec.idle_ttl = c.idle_ttl;
    absl::StatusOr<FilterParams> normalized = NormalizeSpec(spec);
    ASSERT_EQ(normalized.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(normalized.status().message().find(c.field), absl::string_view::npos)
        << normalized.status();
  }
  EXPECT_EQ(Windowed(100, 0.01, absl::Hours(1)).window_slices, kDefaultWindowSlices);
  EXPECT_EQ(Windowed(100, 0.01, absl::Hours(1), 64).window_slices, 64u);
}

TEST(WindowSpecTest, SlicesShareTheErrorBudget) {
  const FilterParams spec = Windowed(8000, 0.01, absl::Hours(8), 8);
  EXPECT_EQ(SliceMicros(spec), absl::ToInt64Microseconds(absl::Hours(1)));
  EXPECT_EQ(LiveSlices(spec), 9u);
  const FilterParams slice = SliceChainSpec(spec);
  EXPECT_EQ(slice.capacity, 1000u);
  EXPECT_DOUBLE_EQ(slice.error_rate, 0.01 / 9);
  // A window that d does not divide can have one more slice alive; the budget accounts for it.
  const FilterParams odd = Windowed(10, 0.01, absl::Seconds(10), 3);
  EXPECT_EQ(SliceMicros(odd), 3'333'333);
  EXPECT_EQ(LiveSlices(odd), 5u);
  // Slices are aligned to the epoch, also before it.
  EXPECT_EQ(SliceStartMicros(spec, absl::FromUnixSeconds(3600 * 5 + 7)), 3600LL * 5 * 1000000);
  EXPECT_EQ(SliceStartMicros(spec, absl::FromUnixSeconds(-1)), -3600LL * 1000000);
}

// How many seeds the model runs per slice count: 6, or $BLOOM_WINDOW_SEEDS (scripts/test.sh runs
// 2 under the sanitizers, where a seed takes 20 times as long; the ordinary build runs all 6).
namespace {
int ModelSeeds() {
  const char* seeds = std::getenv("BLOOM_WINDOW_SEEDS");
  int value = 0;
  return seeds != nullptr && absl::SimpleAtoi(seeds, &value) && value > 0 ? value : 6;
}
}  // namespace

// The model: an item added at t (last time) must read present at now <= t + window and, unless
// a false positive, absent at now >= t + window * (1 + 1/slices).
TEST(WindowedFilterTest, RemembersTheWindowAndForgetsAfterIt) {
  const int seeds = ModelSeeds();
  for (uint32_t slices : {1u, 3u, 8u, 64u}) {
    for (int seed = 0; seed < seeds; ++seed) {
      absl::BitGen gen;
      bloomtime::ManualClock clock(absl::FromUnixSeconds(1'700'000'000 + seed * 977));
      const absl::Duration window = absl::Seconds(absl::Uniform(gen, 1, 5000));
      const FilterParams spec = Windowed(200, 0.001, window, slices);
      auto filter = *ScalableFilter::Create(spec, 100 + seed, &clock);
      std::map<std::string, absl::Time> last_add;
      int false_negatives = 0, late = 0, late_present = 0;
      for (int step = 0; step < 3000; ++step) {
        // Irregular clock: mostly small steps, sometimes jumps past the whole window.
        const int kind = absl::Uniform(gen, 0, 100);
        absl::Duration step_by = window / 50 * absl::Uniform(gen, 0.0, 1.0);
        if (kind == 0) step_by = window * absl::Uniform(gen, 1.0, 3.0);
        clock.Advance(step_by);
        if (kind == 1) {  // retire now and then, as the store does at checkpoints
          filter->Retire(filter->ExpiredThrough(clock.Now()));
        }
        const std::string item = absl::StrCat("item", absl::Uniform(gen, 0, 400));
        if (absl::Bernoulli(gen, 0.5)) {
          Add1(*filter, item);
          last_add[item] = clock.Now();
        }
        const absl::Time now = clock.Now();
        if (step % 4 != 0) continue;
        for (const auto& [name, added_at] : last_add) {
          if (now <= added_at + window) {
            false_negatives += !Has(*filter, name);
          } else if (now >= added_at + window + window / slices + absl::Microseconds(1)) {
            ++late;
            late_present += Has(*filter, name);
          }
        }
      }
      EXPECT_EQ(false_negatives, 0) << "slices " << slices << " seed " << seed;
      ASSERT_GT(late, 0);
      // At 0.1% per query, a few false positives at most.
      EXPECT_LE(late_present, 5 + late / 100) << late;
    }
  }
}

TEST(WindowedFilterTest, ReAddingRefreshesTheItem) {
  bloomtime::ManualClock clock;
  const FilterParams spec = Windowed(100, 0.01, absl::Seconds(80), 8);
  auto filter = *ScalableFilter::Create(spec, 7, &clock);
  EXPECT_TRUE(Add1(*filter, "a"));
  clock.Advance(absl::Seconds(50));
  EXPECT_FALSE(Add1(*filter, "a"));  // present: not new, but its age restarts
  clock.Advance(absl::Seconds(75));  // 125 s after the first add, 75 after the second
  EXPECT_TRUE(Has(*filter, "a"));
  clock.Advance(absl::Seconds(16));
  EXPECT_FALSE(Has(*filter, "a"));
  EXPECT_TRUE(Add1(*filter, "a"));  // forgotten: new again
}

TEST(WindowedFilterTest, RetireFreesExpiredSlicesAndKeepsIndexesCounting) {
  bloomtime::ManualClock clock(absl::FromUnixSeconds(1'000'000));
  const FilterParams spec = Windowed(80, 0.01, absl::Seconds(80), 8);
  auto filter = *ScalableFilter::Create(spec, 7, &clock);
  for (int s = 0; s < 20; ++s) {
    Add1(*filter, absl::StrCat("x", s));
    clock.Advance(absl::Seconds(10));
  }
  // 20 slices were opened (one per 10 s); at most 9 are unexpired.
  EXPECT_EQ(filter->next_index(), 20);  // Create opened the first add's slice
  const int through = filter->ExpiredThrough(clock.Now());
  ASSERT_GE(through, 0);
  std::vector<std::unique_ptr<SubFilter>> retired = filter->Retire(through);
  EXPECT_EQ(static_cast<int>(retired.size()), through + 1);
  EXPECT_EQ(filter->first_index(), through + 1);
  EXPECT_LE(filter->num_sub_filters(), 9);
  EXPECT_EQ(filter->ExpiredThrough(clock.Now()), -1);
  EXPECT_TRUE(Has(*filter, "x19"));
  EXPECT_FALSE(Has(*filter, "x0"));
  // Everything expires: the chain empties, and the next add opens index next_index().
  clock.Advance(absl::Hours(1));
  const int next = filter->next_index();
  filter->Retire(filter->ExpiredThrough(clock.Now()));
  EXPECT_EQ(filter->num_sub_filters(), 0);
  EXPECT_FALSE(Has(*filter, "x19"));
  EXPECT_TRUE(Add1(*filter, "y"));
  EXPECT_EQ(filter->first()->index(), next);
  EXPECT_TRUE(Has(*filter, "y"));
}

TEST(WindowedFilterTest, SlicesGrowWhenTheRateJumpsAndTheRateStaysUnderTarget) {
  // 1,000 items per window expected; within one window the rate goes up 100x.
  bloomtime::ManualClock clock;
  const double p = 0.01;
  const FilterParams spec = Windowed(1000, p, absl::Seconds(800), 8);
  auto filter = *ScalableFilter::Create(spec, 99, &clock);
  int item = 0;
  for (int second = 0; second < 1600; ++second) {
    const int per_second = second < 800 ? 1 : 100;  // 100x
    std::vector<uint64_t> hashes;
    for (int i = 0; i < per_second; ++i) hashes.push_back(filter->Hash(absl::StrCat("in", item++)));
    std::vector<char> added(hashes.size());
    ASSERT_TRUE(filter->Add(hashes, reinterpret_cast<bool*>(added.data())).ok());
    clock.Advance(absl::Seconds(1));
    if (second % 50 == 0) filter->Retire(filter->ExpiredThrough(clock.Now()));
    if (second % 100 == 99) {
      // Measured false-positive rate over fresh items, and the model's estimate.
      std::vector<uint64_t> probes;
      for (int i = 0; i < 20000; ++i)
        probes.push_back(filter->Hash(absl::StrCat("out", second, ":", i)));
      std::vector<char> present(probes.size());
      filter->MightContainMany(probes, reinterpret_cast<bool*>(present.data()));
      const double observed = std::count(present.begin(), present.end(), 1) / 20000.0;
      EXPECT_LE(observed, p * 1.3) << "second " << second;
      EXPECT_LE(filter->ComputeStats().estimated_error_rate, p) << "second " << second;
    }
  }
  EXPECT_GT(filter->num_sub_filters(), 9);  // slices grew into chains
}

TEST(WindowSpecTest, OverflowSubFiltersAreSizedForTheRestOfTheSlice) {
  const FilterParams spec = Windowed(8000, 0.01, absl::Seconds(800), 8);  // 1,000 per 100 s slice
  const int64_t start = 1'700'000'000'000'000;
  const absl::Time begin = absl::FromUnixMicros(start);
  const uint64_t chain = 2000;  // what the plain chain's rule gives position 1
  // A steady rate overflowing at the slice's end: the least, 1/32 of the first sub-filter.
  EXPECT_EQ(SliceOverflowCapacity(spec, start, begin + absl::Seconds(99.9), 1001, 0, chain), 32u);
  // Twice the rate, full at half time: the other half at that rate, and half again.
  EXPECT_EQ(SliceOverflowCapacity(spec, start, begin + absl::Seconds(50), 1000, 0, chain), 1501u);
  // Ten times the rate: capped by the chain's rule, never above it.
  EXPECT_EQ(SliceOverflowCapacity(spec, start, begin + absl::Seconds(10), 1000, 0, chain), chain);
  // A surge that goes on: at least `expansion` times the previous overflow sub-filter.
  EXPECT_EQ(SliceOverflowCapacity(spec, start, begin + absl::Seconds(99), 1100, 100, 4000), 200u);
  // A clock before the slice (it went back) or after its end counts as its first or last
  // microsecond: no division by zero, no negative rest.
  EXPECT_EQ(SliceOverflowCapacity(spec, start, begin - absl::Seconds(5), 1000, 0, chain), chain);
  EXPECT_EQ(SliceOverflowCapacity(spec, start, begin + absl::Seconds(500), 1000, 0, chain), 32u);
}

TEST(WindowedFilterTest, ASliceOverflowingAtItsEndGetsASmallSubFilter) {
  bloomtime::ManualClock clock(absl::FromUnixSeconds(1'700'000'000));  // a slice starts here
  const FilterParams spec = Windowed(8000, 0.01, absl::Seconds(800), 8);
  auto filter = *ScalableFilter::Create(spec, 7, &clock);
  int item = 0;
  for (int step = 0; step < 1000; ++step) {  // the slice's share, over 99.9 s
    Add1(*filter, absl::StrCat("steady", item++));
    clock.Advance(absl::Microseconds(99'900));
  }
  ASSERT_EQ(filter->num_sub_filters(), 1);
  for (int i = 0; i < 10; ++i) Add1(*filter, absl::StrCat("steady", item++));
  ASSERT_EQ(filter->num_sub_filters(), 2);
  const SubFilter& overflow = *filter->newest();
  EXPECT_EQ(overflow.slice().position, 1);
  EXPECT_EQ(overflow.shape().capacity, 32u);  // the plain chain's rule: 2,000
  EXPECT_EQ(overflow.shape().error_rate, SubFilterShapeFor(spec, 1)->error_rate);
  EXPECT_LE(overflow.shape().layout.bytes() * 8, filter->first()->shape().layout.bytes());
  for (int i = 0; i < item; ++i) EXPECT_TRUE(Has(*filter, absl::StrCat("steady", i))) << i;
  // The next slice starts with a first sub-filter of the usual size again.
  clock.Advance(absl::Seconds(1));
  Add1(*filter, "next slice");
  EXPECT_EQ(filter->newest()->slice().position, 0);
  EXPECT_EQ(filter->newest()->shape().capacity, 1000u);
}

TEST(WindowedFilterTest, NonScalingSliceRefusesBeyondItsShare) {
  bloomtime::ManualClock clock;
  const FilterParams spec = Windowed(80, 0.01, absl::Seconds(80), 8, /*non_scaling=*/true);
  auto filter = *ScalableFilter::Create(spec, 5, &clock);
  std::vector<uint64_t> hashes;
  for (int i = 0; i < 11; ++i) hashes.push_back(filter->Hash(absl::StrCat("i", i)));
  std::vector<char> added(11);
  EXPECT_TRUE(
      filter->Add(absl::MakeSpan(hashes).first(10), reinterpret_cast<bool*>(added.data())).ok());
  const absl::Status full =
      filter->Add(absl::MakeSpan(hashes).subspan(10), reinterpret_cast<bool*>(added.data()));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("time slice is full"), absl::string_view::npos) << full;
  EXPECT_NE(full.message().find("takes 10 new items per slice"), absl::string_view::npos) << full;
  clock.Advance(absl::Seconds(10));  // the next slice has room again
  EXPECT_TRUE(
      filter->Add(absl::MakeSpan(hashes).subspan(10), reinterpret_cast<bool*>(added.data())).ok());
}

TEST(WindowedFilterTest, ReplaySkipsRetiredSubFilters) {
  bloomtime::ManualClock clock;
  const FilterParams spec = Windowed(100, 0.01, absl::Seconds(8), 8);
  auto filter = *ScalableFilter::Create(spec, 5, &clock);
  clock.Advance(absl::Seconds(30));
  filter->Retire(filter->ExpiredThrough(clock.Now()));
  Add1(*filter, "new");
  const int current = filter->newest()->index();
  const uint64_t h_old = filter->Hash("old"), h_new = filter->Hash("new2");
  std::vector<ScalableFilter::Run> runs = {{0, 1}, {current, 1}};
  std::vector<uint64_t> hashes = {h_old, h_new};
  ASSERT_TRUE(filter->Replay(runs, hashes).ok());
  EXPECT_TRUE(Has(*filter, "new2"));
  EXPECT_FALSE(filter->Replay({{current + 5, 1}}, {h_new}).ok());
}

// A window whose slices are large (>= SliceArena::kMinSliceBytes) keeps the slices' first
// sub-filters interleaved in one arena; slices beyond its slots (storage retiring late) get
// bits of their own, and retired slices' slots are reused. Answers are the same throughout.
TEST(WindowedFilterTest, LargeWindowsInterleaveTheirSlicesAndFallBackWhenSlotsRunOut) {
  bloomtime::ManualClock clock(absl::FromUnixSeconds(1'000'000));
  const FilterParams spec = Windowed(2'000'000, 0.01, absl::Seconds(80), 8);
  const absl::optional<ArenaShape> arena = ArenaShapeFor(spec);
  ASSERT_TRUE(arena.has_value());
  EXPECT_EQ(arena->slots, LiveSlices(spec) + 1);
  EXPECT_FALSE(ArenaShapeFor(Windowed(1000, 0.01, absl::Seconds(80), 8)).has_value());
  auto filter = *ScalableFilter::Create(spec, 9, &clock);
  constexpr int kPerSlice = 2000;
  auto item = [](int slice, int i) { return absl::StrCat("s", slice, "-", i); };
  auto add_slice = [&](int slice) {
    std::vector<uint64_t> hashes;
    for (int i = 0; i < kPerSlice; ++i) hashes.push_back(filter->Hash(item(slice, i)));
    std::unique_ptr<bool[]> added(new bool[hashes.size()]);
    ASSERT_TRUE(filter->Add(hashes, added.get()).ok());
  };
  // 14 slices without a Retire: the arena's slots run out after arena->slots of them.
  for (int slice = 0; slice < 14; ++slice) {
    add_slice(slice);
    EXPECT_EQ(filter->newest()->bits().in_arena(), slice < static_cast<int>(arena->slots)) << slice;
    clock.Advance(absl::Seconds(10));
  }
  // Held: the arena whole, and the slices outside it.
  EXPECT_EQ(filter->size_bytes(), arena->bytes() + (14 - arena->slots) * arena->layout.bytes());
  auto count_present = [&](int slice) {
    int present = 0;
    for (int i = 0; i < kPerSlice; ++i) present += Has(*filter, item(slice, i));
    return present;
  };
  // Now 140 s: slices started at 60 s and later (the last 8) are in the window.
  for (int slice = 6; slice < 14; ++slice) EXPECT_EQ(count_present(slice), kPerSlice) << slice;
  for (int slice = 0; slice < 5; ++slice) EXPECT_LE(count_present(slice), 20) << slice;

  // Retiring frees slots: the next slice is interleaved again, and nothing else changed.
  EXPECT_FALSE(filter->Retire(filter->ExpiredThrough(clock.Now())).empty());
  add_slice(14);
  EXPECT_TRUE(filter->newest()->bits().in_arena());
  for (int slice = 7; slice < 15; ++slice) EXPECT_EQ(count_present(slice), kPerSlice) << slice;
}

}  // namespace
}  // namespace bloom

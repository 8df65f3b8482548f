#include "bloom/scalable_filter.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "gtest/gtest.h"

namespace bloom {
namespace {

FilterParams Spec(uint64_t capacity, double p, uint32_t expansion = 0, bool non_scaling = false) {
  absl::StatusOr<FilterParams> spec = NormalizeSpec({capacity, p, expansion, non_scaling});
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::unique_ptr<ScalableFilter> MakeFilter(const FilterParams& spec) {
  absl::StatusOr<std::unique_ptr<ScalableFilter>> filter = ScalableFilter::Create(spec, 1234);
  EXPECT_TRUE(filter.ok()) << filter.status();
  return *std::move(filter);
}

std::vector<uint64_t> Hashes(const ScalableFilter& filter, const std::string& prefix, int begin,
                             int end) {
  std::vector<uint64_t> hashes;
  for (int i = begin; i < end; ++i) hashes.push_back(filter.Hash(prefix + std::to_string(i)));
  return hashes;
}

std::vector<char> AddAll(ScalableFilter& filter, const std::vector<uint64_t>& hashes,
                         absl::Status* status = nullptr) {
  std::vector<char> added(hashes.size());
  absl::Status s = filter.Add(hashes, reinterpret_cast<bool*>(added.data()));
  if (status != nullptr) {
    *status = s;
  } else {
    EXPECT_TRUE(s.ok()) << s;
  }
  return added;
}

TEST(NormalizeSpecTest, ValidatesEachFieldByName) {
  struct Case {
    FilterParams spec;
    const char* field;
  };
  const double nan = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  for (const Case& c :
       {Case{{0, 0.01, 0, false}, "capacity"}, Case{{10, 0, 0, false}, "error_rate"},
        Case{{10, 1, 0, false}, "error_rate"}, Case{{10, nan, 0, false}, "error_rate"},
        Case{{10, inf, 0, false}, "error_rate"}, Case{{10, 0.01, 32769, false}, "expansion"},
        Case{{10, 0.01, 2, true}, "expansion"}}) {
    absl::StatusOr<FilterParams> spec = NormalizeSpec(c.spec);
    ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(spec.status().message().find(c.field), absl::string_view::npos)
        << spec.status().message();
  }
  EXPECT_EQ(NormalizeSpec({10, 0.01, 0, false})->expansion, kDefaultExpansion);
  EXPECT_EQ(NormalizeSpec({10, 0.01, 0, true})->expansion, 1u);
  EXPECT_EQ(NormalizeSpec({10, 0.01, 32768, false})->expansion, 32768u);
}

TEST(SubFilterShapeTest, GrowsCapacityAndTightensErrorRate) {
  const FilterParams spec = Spec(1000, 0.01, 4);
  double total_error = 0;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<SubFilterShape> shape = SubFilterShapeFor(spec, i);
    ASSERT_TRUE(shape.ok()) << shape.status();
    EXPECT_EQ(shape->capacity, 1000 * static_cast<uint64_t>(std::pow(4, i)));
    EXPECT_DOUBLE_EQ(shape->error_rate, 0.01 * 0.5 * std::pow(0.5, i));
    total_error += shape->error_rate;
  }
  EXPECT_LT(total_error, 0.01);
  EXPECT_EQ(SubFilterShapeFor(spec, kMaxSubFilters).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Capacity saturates rather than overflowing, and then the layout is too large.
  EXPECT_EQ(SubFilterShapeFor(Spec(1'000'000, 0.01, 32768), 5).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// A windowed filter's sub-filters keep their slice tag in 8 bytes behind the object, the others
// none: each answers its own tag, and freeing either kind frees what was allocated (ASan checks
// that the free matches the allocation). A slice of kMaxSubFilters sub-filters or more can only
// come from a corrupt record.
TEST(SubFilterTest, KeepsItsSliceTagOnlyWhenWindowed) {
  const FilterParams spec = Spec(1000, 0.01);
  absl::StatusOr<SubFilterShape> shape = SubFilterShapeFor(spec, 0);
  ASSERT_TRUE(shape.ok()) << shape.status();
  auto bits = [&] { return *BlockedBloomFilter::Create(shape->layout); };

  absl::StatusOr<std::unique_ptr<SubFilter>> plain = SubFilter::Create(3, *shape, bits());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->index(), 3);
  EXPECT_EQ((*plain)->slice().start_micros, 0);
  EXPECT_EQ((*plain)->slice().position, 3);

  const int64_t start = int64_t{1'700'000'000} * 1'000'000 + 123;
  absl::StatusOr<std::unique_ptr<SubFilter>> sliced =
      SubFilter::Create(70'000, *shape, bits(), SliceTag{start, kMaxSubFilters - 1});
  ASSERT_TRUE(sliced.ok()) << sliced.status();
  EXPECT_EQ((*sliced)->index(), 70'000);
  EXPECT_EQ((*sliced)->slice().start_micros, start);
  EXPECT_EQ((*sliced)->slice().position, kMaxSubFilters - 1);
  EXPECT_EQ((*sliced)->shape().capacity, shape->capacity);
  EXPECT_EQ((*sliced)->shape().error_rate, shape->error_rate);
  sliced->reset();  // ASan: the free matches Create()'s allocation
  plain->reset();

  for (int position : {-1, kMaxSubFilters}) {
    absl::StatusOr<std::unique_ptr<SubFilter>> bad =
        SubFilter::Create(0, *shape, bits(), SliceTag{start, position});
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << position;
  }
}

// A small sub-filter lives in its bits' allocation (one slab slot for a per-user filter);
// bits made without room for it, or too large to carry any, leave it an allocation of its
// own. Either way it answers the same.
TEST(SubFilterTest, LivesInItsBitsAllocationWhenTheyHaveRoom) {
  const bloomtime::ManualClock clock;
  FilterParams windowed = Spec(1000, 0.01);
  windowed.window = absl::Hours(1);
  for (const FilterParams& raw : {Spec(1000, 0.01), windowed, Spec(20'000'000, 0.01)}) {
    absl::StatusOr<FilterParams> spec = NormalizeSpec(raw);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<std::unique_ptr<ScalableFilter>> filter =
        ScalableFilter::Create(*spec, 7, &clock);
    ASSERT_TRUE(filter.ok()) << filter.status();
    const SubFilter* first = (*filter)->first();
    ASSERT_NE(first, nullptr);
    const bool small = raw.capacity == 1000;
    EXPECT_EQ(first->bits().companion() == first, small) << raw.capacity;
    EXPECT_EQ(first->slice().start_micros != 0, raw.windowed());
    const std::vector<char> added = AddAll(**filter, {(*filter)->Hash("a"), (*filter)->Hash("b")});
    EXPECT_EQ(added, (std::vector<char>{1, 1}));
    bool present[2] = {false, false};
    const uint64_t probes[2] = {(*filter)->Hash("a"), (*filter)->Hash("b")};
    (*filter)->MightContainMany(probes, present);
    EXPECT_TRUE(present[0] && present[1]);
  }
  // Bits made elsewhere (no companion room): the sub-filter points to them.
  absl::StatusOr<SubFilterShape> shape = SubFilterShapeFor(*NormalizeSpec(Spec(1000, 0.01)), 0);
  ASSERT_TRUE(shape.ok()) << shape.status();
  absl::StatusOr<std::unique_ptr<SubFilter>> apart =
      SubFilter::Create(0, *shape, *BlockedBloomFilter::Create(shape->layout));
  ASSERT_TRUE(apart.ok()) << apart.status();
  EXPECT_EQ((*apart)->bits().companion(), nullptr);
  EXPECT_TRUE((*apart)->bits().Add(42));
  EXPECT_TRUE((*apart)->bits().MightContain(42));
}

// A chain without a window keeps no spec of its own: its first sub-filter tells the capacity
// and error rate. spec() must still answer exactly what the filter was made with, for any
// spec (Reserve compares it with the asked one), including error rates whose half loses
// precision, where the chain keeps them apart instead.
TEST(ScalableFilterTest, AnswersItsSpecExactlyFromItsFirstSubFilter) {
  absl::BitGen gen;
  std::vector<FilterParams> specs = {
      Spec(1000, 0.01),         Spec(1, 0.5),
      Spec(1, 1e-30),           Spec(7, 0.999999),
      Spec(100, 0.01, 1, true), Spec(12345, 0.0123456789, kMaxExpansion)};
  for (int i = 0; i < 40; ++i) {
    const bool non_scaling = absl::Bernoulli(gen, 0.3);
    specs.push_back(Spec(absl::LogUniform<uint64_t>(gen, 1, 1'000'000),
                         std::exp(-absl::Uniform(gen, 0.0, 20.0)) * 0.999,
                         non_scaling ? 1 : absl::Uniform<uint32_t>(gen, 1, kMaxExpansion + 1),
                         non_scaling));
  }
  for (const FilterParams& spec : specs) {
    SCOPED_TRACE(testing::Message() << spec.capacity << " at " << spec.error_rate << " x"
                                    << spec.expansion << (spec.non_scaling ? " fixed" : ""));
    absl::StatusOr<std::unique_ptr<ScalableFilter>> filter = ScalableFilter::Create(spec, 9);
    ASSERT_TRUE(filter.ok()) << filter.status();
    EXPECT_EQ((*filter)->spec(), spec);
    ASSERT_NE((*filter)->first(), nullptr);
    EXPECT_EQ((*filter)->first()->shape().capacity, SubFilterShapeFor(spec, 0)->capacity);
  }
}

// Loading a chain whose first sub-filter is not the one its spec makes (only a hand-made
// record has one): the spec stays the stored one, and the chain works.
TEST(ScalableFilterTest, KeepsItsSpecWhenTheFirstSubFilterDoesNotTellIt) {
  const FilterParams spec = Spec(1000, 0.01);
  for (const FilterParams& other : {Spec(999, 0.01), Spec(1000, 0.02), Spec(1000, 0.01, 0, true)}) {
    std::unique_ptr<ScalableFilter> filter = ScalableFilter::CreateEmpty(spec, 5);
    EXPECT_EQ(filter->spec(), spec);
    EXPECT_EQ(filter->first(), nullptr);
    absl::StatusOr<SubFilterShape> shape = SubFilterShapeFor(other, 0);
    ASSERT_TRUE(shape.ok()) << shape.status();
    absl::StatusOr<std::unique_ptr<BlockedBloomFilter>> bits = filter->MakeBits(shape->layout, 0);
    ASSERT_TRUE(bits.ok()) << bits.status();
    absl::StatusOr<std::unique_ptr<SubFilter>> sub = SubFilter::Create(0, *shape, *std::move(bits));
    ASSERT_TRUE(sub.ok()) << sub.status();
    filter->AppendSubFilter(*std::move(sub));
    EXPECT_EQ(filter->spec(), spec);
    EXPECT_EQ(filter->first()->shape().capacity, shape->capacity);
    const std::vector<uint64_t> hashes = Hashes(*filter, "k", 0, 3000);  // grows the chain
    AddAll(*filter, hashes);
    EXPECT_GT(filter->num_sub_filters(), 1);
    std::vector<char> present(hashes.size(), 0);
    filter->MightContainMany(hashes, reinterpret_cast<bool*>(present.data()));
    for (char p : present) ASSERT_TRUE(p);
    EXPECT_EQ(filter->spec(), spec);
  }
}

// Storage builds a chain before the object that holds it, and moves it in: the moved chain
// answers as before, for a chain with and without a window, and the one it left is empty.
TEST(ScalableFilterTest, AMovedChainAnswersAsBefore) {
  FilterParams windowed = Spec(1000, 0.01);
  windowed.window = absl::Hours(1);
  for (const FilterParams& spec : {Spec(100, 0.01), *NormalizeSpec(windowed)}) {
    std::unique_ptr<ScalableFilter> built = MakeFilter(spec);
    // Without a window, past the first sub-filter.
    const std::vector<uint64_t> hashes = Hashes(*built, "m", 0, 500);
    AddAll(*built, hashes);
    const int subs = built->num_sub_filters();
    ScalableFilter moved(std::move(*built));
    EXPECT_EQ(built->first(), nullptr);
    built.reset();  // the emptied chain frees nothing of the moved one's (ASan)
    EXPECT_EQ(moved.spec(), spec);
    EXPECT_EQ(moved.num_sub_filters(), subs);
    std::vector<char> present(hashes.size(), 0);
    moved.MightContainMany(hashes, reinterpret_cast<bool*>(present.data()));
    for (char p : present) ASSERT_TRUE(p);
    EXPECT_EQ(AddAll(moved, {moved.Hash("new")}), std::vector<char>{1});
  }
}

TEST(ScalableFilterTest, DuplicatesInOneBatchCountOnce) {
  auto filter = MakeFilter(Spec(100, 0.01));
  const uint64_t a = filter->Hash("a"), b = filter->Hash("b");
  const std::vector<char> added = AddAll(*filter, {a, b, a, a});
  EXPECT_EQ(added, (std::vector<char>{1, 1, 0, 0}));
  EXPECT_EQ(filter->items_added(), 2u);
  EXPECT_EQ(AddAll(*filter, {b}), std::vector<char>{0});
}

TEST(ScalableFilterTest, ScalesPastCapacityWithNoFalseNegativesAndBoundedFpr) {
  const double p = 0.01;
  auto filter = MakeFilter(Spec(10'000, p));
  const std::vector<uint64_t> members = Hashes(*filter, "m", 0, 100'000);  // 10x capacity
  for (size_t i = 0; i < members.size(); i += 1000) {
    AddAll(*filter, std::vector<uint64_t>(members.begin() + i, members.begin() + i + 1000));
  }
  EXPECT_GE(filter->num_sub_filters(), 4);
  EXPECT_GE(filter->items_added(), 99'000u);  // a few members are false positives of others
  EXPECT_LE(filter->items_added(), 100'000u);
  for (SubFilter* sub = filter->first(); sub != nullptr; sub = sub->next()) {
    EXPECT_LE(sub->items_added(), sub->shape().capacity);
  }
  std::vector<char> present(members.size());
  filter->MightContainMany(members, reinterpret_cast<bool*>(present.data()));
  for (size_t i = 0; i < members.size(); ++i) ASSERT_TRUE(present[i]) << i;

  const std::vector<uint64_t> absent = Hashes(*filter, "absent", 0, 1'000'000);
  std::vector<char> hits(absent.size());
  filter->MightContainMany(absent, reinterpret_cast<bool*>(hits.data()));
  int false_positives = 0;
  for (char hit : hits) false_positives += hit;
  const double measured = false_positives / 1e6;
  EXPECT_LE(measured, p + 3 * std::sqrt(p / 1e6)) << measured;
  const ScalableFilterStats stats = filter->ComputeStats();
  EXPECT_NEAR(stats.estimated_error_rate, measured, 0.2 * p);
  EXPECT_NEAR(stats.estimated_cardinality, 100'000, 5'000);
  EXPECT_EQ(stats.sub_filters.size(), static_cast<size_t>(filter->num_sub_filters()));

  // Stats expected from the counts alone (a filter not in memory) agree with the counted ones.
  std::vector<SubFilterStats> expected;
  for (const SubFilterStats& sub : stats.sub_filters) {
    expected.push_back(ExpectedSubFilterStats(
        {sub.capacity, sub.error_rate, {sub.bits / kBlockBits, sub.hash_count}}, sub.items_added));
  }
  const ScalableFilterStats from_counts = CombineSubFilterStats(expected);
  EXPECT_EQ(from_counts.capacity, stats.capacity);
  EXPECT_EQ(from_counts.size_bytes, stats.size_bytes);
  EXPECT_EQ(from_counts.items_added, stats.items_added);
  EXPECT_NEAR(from_counts.fill_ratio, stats.fill_ratio, 0.01);
  EXPECT_NEAR(from_counts.estimated_error_rate, measured, 0.2 * p);
  EXPECT_NEAR(from_counts.estimated_cardinality, stats.estimated_cardinality, 2'000);
}

TEST(ScalableFilterTest, NonScalingRefusesWholeBatchBeyondCapacity) {
  auto filter = MakeFilter(Spec(100, 0.01, 0, /*non_scaling=*/true));
  AddAll(*filter, Hashes(*filter, "x", 0, 90));
  EXPECT_EQ(filter->items_added(), 90u);
  absl::Status status;
  const std::vector<uint64_t> overflow = Hashes(*filter, "y", 0, 20);
  const std::vector<char> added = AddAll(*filter, overflow, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("full"), absl::string_view::npos);
  EXPECT_EQ(filter->items_added(), 90u);
  EXPECT_EQ(filter->num_sub_filters(), 1);
  for (char a : added) EXPECT_FALSE(a);
  // Nothing of the refused batch became visible (up to the false-positive rate).
  std::vector<char> present(overflow.size());
  filter->MightContainMany(overflow, reinterpret_cast<bool*>(present.data()));
  int visible = 0;
  for (char v : present) visible += v;
  EXPECT_LE(visible, 2);
  AddAll(*filter, Hashes(*filter, "z", 0, 10));  // exactly fills it
  EXPECT_EQ(filter->items_added(), 100u);
}

TEST(ScalableFilterTest, FailingJournalHookAddsNothing) {
  auto filter = MakeFilter(Spec(1000, 0.01));
  const std::vector<uint64_t> hashes = Hashes(*filter, "x", 0, 100);
  std::vector<char> added(hashes.size());
  absl::Status status = filter->Add(
      hashes, reinterpret_cast<bool*>(added.data()),
      [](const SubFilter&) { return absl::OkStatus(); },
      [](absl::Span<const ScalableFilter::Run>, absl::Span<const uint64_t>) {
        return absl::UnavailableError("disk on fire");
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(filter->items_added(), 0u);
  EXPECT_EQ(filter->ComputeStats().fill_ratio, 0);
}

TEST(ScalableFilterTest, FailingGrowthHookLeavesChainAndCountsUnchanged) {
  auto filter = MakeFilter(Spec(10, 0.01));
  AddAll(*filter, Hashes(*filter, "x", 0, 10));
  const std::vector<uint64_t> more = Hashes(*filter, "y", 0, 5);
  std::vector<char> added(more.size());
  absl::Status status = filter->Add(
      more, reinterpret_cast<bool*>(added.data()),
      [](const SubFilter&) { return absl::ResourceExhaustedError("memory limit"); },
      [](absl::Span<const ScalableFilter::Run>, absl::Span<const uint64_t>) {
        return absl::OkStatus();
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(filter->num_sub_filters(), 1);
  EXPECT_EQ(filter->items_added(), 10u);
}

TEST(ScalableFilterTest, ReplayRestoresBitsAndCountsAndRejectsBadRuns) {
  auto filter = MakeFilter(Spec(1000, 0.01));
  const std::vector<uint64_t> hashes = Hashes(*filter, "x", 0, 10);
  const ScalableFilter::Run run{0, 10};
  ASSERT_TRUE(filter->Replay({&run, 1}, hashes).ok());
  EXPECT_EQ(filter->items_added(), 10u);
  std::vector<char> present(hashes.size());
  filter->MightContainMany(hashes, reinterpret_cast<bool*>(present.data()));
  for (char v : present) EXPECT_TRUE(v);
  const ScalableFilter::Run bad_index{3, 10}, bad_count{0, 9};
  EXPECT_FALSE(filter->Replay({&bad_index, 1}, hashes).ok());
  EXPECT_FALSE(filter->Replay({&bad_count, 1}, hashes).ok());
}

TEST(ScalableFilterTest, ConcurrentAddsThatGrowTheChainLoseNothing) {
  auto filter = MakeFilter(Spec(1000, 0.01, 2));
  constexpr int kThreads = 4, kPerThread = 20'000, kBatch = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<uint64_t> mine =
          Hashes(*filter, "t" + std::to_string(t) + ":", 0, kPerThread);
      std::vector<char> readback(kBatch);
      for (int i = 0; i < kPerThread; i += kBatch) {
        std::vector<uint64_t> batch(mine.begin() + i, mine.begin() + i + kBatch);
        std::vector<char> added(kBatch);
        ASSERT_TRUE(filter->Add(batch, reinterpret_cast<bool*>(added.data())).ok());
        std::fill(readback.begin(), readback.end(), 0);
        filter->MightContainMany(batch, reinterpret_cast<bool*>(readback.data()));
        for (char v : readback) ASSERT_TRUE(v);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_GE(filter->num_sub_filters(), 6);
  for (SubFilter* sub = filter->first(); sub != nullptr; sub = sub->next()) {
    EXPECT_LE(sub->items_added(), sub->shape().capacity);
  }
  EXPECT_LE(filter->items_added(), static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_GE(filter->items_added(), static_cast<uint64_t>(kThreads * kPerThread * 0.98));
}

}  // namespace
}  // namespace bloom

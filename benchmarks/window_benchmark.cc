// Windowed filters (bloom/window.h) against a plain scalable filter of the same error rate
// holding the same items, in one run.
//
//   build/benchmarks/window_benchmark --benchmark_filter=WindowBitsPerItem
//   build/benchmarks/window_benchmark --benchmark_filter='Add|Contains'  (AddSteady too)
//   build/benchmarks/window_benchmark --benchmark_filter=SevenDay
//
// Bits per item: a window of `slices` slices fed at a steady rate for three windows (a manual
// clock, expired slices retired as the store's checkpoints do), measured at 32 instants of the
// last window: bits in memory / items added within the last window (what the window must
// remember), against the bits a plain filter sized for those items at the same rate takes.
//
// Add and Contains: 10 million items in the window (capacity 10M, 8 slices), keys hashed as the
// service does, batches of 1024; Contains queries half present, half absent keys. The plain
// filter holds the same 10 million items.
#include <benchmark/benchmark.h>

#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "bloom/hash.h"
#include "bloom/scalable_filter.h"
#include "bloom/window.h"

namespace {

constexpr size_t kBatch = 1024;
constexpr uint64_t kSeed = 0x5eed;

uint64_t HashKey(uint64_t key) {
  return bloom::HashItem({reinterpret_cast<const char*>(&key), sizeof(key)}, kSeed);
}

void HashBatch(uint64_t first, std::vector<uint64_t>& out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = HashKey(first + i);
}

bloom::FilterParams Spec(uint64_t capacity, double p, uint32_t slices) {
  bloom::FilterParams spec{capacity, p};
  if (slices > 0) {
    spec.window = absl::Seconds(100) * slices;  // 100 s slices
    spec.window_slices = slices;
  }
  return *bloom::NormalizeSpec(spec);
}

// Adds keys [first, first + count) in batches.
void AddKeys(bloom::ScalableFilter& filter, uint64_t first, uint64_t count) {
  std::vector<uint64_t> hashes;
  std::unique_ptr<bool[]> added(new bool[kBatch]);
  for (uint64_t k = first; k < first + count; k += kBatch) {
    hashes.resize(std::min<uint64_t>(kBatch, first + count - k));
    HashBatch(k, hashes);
    (void)filter.Add(hashes, added.get());
  }
}

uint64_t BitsInMemory(const bloom::ScalableFilter& filter) { return filter.size_bytes() * 8; }

// Arguments: -log10(p), slices, jitter (percent): each burst's size is drawn uniformly
// within +-jitter% of the steady share, so that the window holds `capacity` on average and its
// slices overflow about every other time, as real traffic at the expected rate does.
void BM_WindowBitsPerItem(benchmark::State& state) {
  const double p = std::pow(10.0, -static_cast<double>(state.range(0)));
  const auto slices = static_cast<uint32_t>(state.range(1));
  const double jitter = static_cast<double>(state.range(2)) / 100;
  constexpr uint64_t kPerWindow = 400'000;
  constexpr int kSteps = 256;  // adds arrive in 256 bursts per window
  const bloom::FilterParams spec = Spec(kPerWindow, p, slices);
  const absl::Duration window = spec.window;
  const absl::Duration step = window / kSteps;
  const uint64_t per_step = kPerWindow / kSteps;
  double window_bits = 0, plain_bits = 0;
  for (auto _ : state) {
    bloomtime::ManualClock clock(absl::FromUnixSeconds(1'700'000'000));
    auto filter = *bloom::ScalableFilter::Create(spec, kSeed, &clock);
    std::mt19937_64 random(1);
    std::uniform_real_distribution<double> spread(-jitter, jitter);
    std::deque<uint64_t> recent;  // the last window's burst sizes
    uint64_t key = 0, in_window = 0;
    window_bits = plain_bits = 0;
    int samples = 0;
    for (int s = 0; s < 3 * kSteps; ++s) {
      const auto count = static_cast<uint64_t>(per_step * (1 + spread(random)));
      AddKeys(*filter, key, count);
      key += count;
      recent.push_back(count);
      in_window += count;
      if (recent.size() > kSteps) {
        in_window -= recent.front();
        recent.pop_front();
      }
      clock.Advance(step);
      filter->Retire(filter->ExpiredThrough(clock.Now()));
      if (s >= 2 * kSteps && s % 8 == 0) {  // 32 instants of the last window
        window_bits += static_cast<double>(BitsInMemory(*filter)) / in_window;
        auto plain = *bloom::ScalableFilter::Create(Spec(in_window, p, 0), kSeed);
        plain_bits += static_cast<double>(BitsInMemory(*plain)) / in_window;
        ++samples;
      }
    }
    window_bits /= samples;
    plain_bits /= samples;
  }
  state.counters["window_bits_per_item"] = window_bits;
  state.counters["plain_bits_per_item"] = plain_bits;
  state.counters["ratio"] = window_bits / plain_bits;
}
BENCHMARK(BM_WindowBitsPerItem)
    ->ArgNames({"neg_log10_p", "slices", "jitter"})
    ->Args({2, 4, 0})
    ->Args({2, 8, 0})
    ->Args({2, 16, 0})
    ->Args({3, 4, 0})
    ->Args({3, 8, 0})
    ->Args({3, 16, 0})
    ->Args({2, 8, 10})
    ->Args({3, 8, 10})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// A crawler's "fetched in the last 7 days" filter: 200,000 URLs a day at a steady rate (in
// 15-minute bursts) for three weeks of a manual clock, expired slices retired hourly. Every
// hour it checks 2,000 URLs fetched within the last 7 days (any false negative is counted) and
// 20,000 never-fetched URLs (the observed false-positive rate); the counters are the totals.
void BM_SevenDayUrlWindow(benchmark::State& state) {
  constexpr double kTarget = 0.01;
  constexpr uint64_t kPerDay = 200'000, kPerBurst = kPerDay / 96;
  constexpr int kDays = 21;
  bloom::FilterParams spec{7 * kPerDay, kTarget};
  spec.window = absl::Hours(24 * 7);
  spec = *bloom::NormalizeSpec(spec);
  uint64_t false_negatives = 0, inside_checked = 0, false_positives = 0, absent_checked = 0;
  double worst_hourly_fpr = 0;
  for (auto _ : state) {
    bloomtime::ManualClock clock(absl::FromUnixSeconds(1'700'000'000));
    const absl::Time start = clock.Now();
    auto filter = *bloom::ScalableFilter::Create(spec, kSeed, &clock);
    std::vector<uint64_t> hashes(kPerBurst);
    std::unique_ptr<bool[]> answers(new bool[20'000]);
    uint64_t next_url = 0;
    for (int burst = 0; burst < kDays * 96; ++burst) {
      HashBatch(next_url, hashes);
      (void)filter->Add(hashes, answers.get());
      next_url += kPerBurst;
      clock.Advance(absl::Minutes(15));
      if (burst % 4 != 3) continue;
      filter->Retire(filter->ExpiredThrough(clock.Now()));
      // URLs fetched within the window: bursts whose time is >= now - 7 days.
      const int64_t window_bursts = 7 * 96;
      const uint64_t oldest =
          burst + 1 > window_bursts ? (burst + 1 - window_bursts) * kPerBurst : 0;
      std::vector<uint64_t> inside(2'000);
      for (size_t i = 0; i < inside.size(); ++i) {
        inside[i] = HashKey(oldest + (i * 7919) % (next_url - oldest));
      }
      std::fill(answers.get(), answers.get() + inside.size(), false);
      filter->MightContainMany(inside, answers.get());
      false_negatives += std::count(answers.get(), answers.get() + inside.size(), false);
      inside_checked += inside.size();
      std::vector<uint64_t> absent(20'000);
      HashBatch(uint64_t{1} << 40 | static_cast<uint64_t>(burst) << 20, absent);
      std::fill(answers.get(), answers.get() + absent.size(), false);
      filter->MightContainMany(absent, answers.get());
      const uint64_t hits = std::count(answers.get(), answers.get() + absent.size(), true);
      false_positives += hits;
      absent_checked += absent.size();
      if (clock.Now() - start > absl::Hours(24 * 8)) {  // once slices roll
        worst_hourly_fpr = std::max(worst_hourly_fpr, hits / 20'000.0);
      }
    }
  }
  state.counters["false_negatives"] = static_cast<double>(false_negatives);
  state.counters["inside_checked"] = static_cast<double>(inside_checked);
  state.counters["observed_fpr"] = static_cast<double>(false_positives) / absent_checked;
  state.counters["worst_hourly_fpr"] = worst_hourly_fpr;
  state.counters["target_fpr"] = kTarget;
}
BENCHMARK(BM_SevenDayUrlWindow)->Iterations(1)->Unit(benchmark::kMillisecond);

constexpr uint64_t kItems = 10'000'000;

// A filter holding kItems: windowed ones fed over one whole window (so every slice is full).
struct Filled {
  std::unique_ptr<bloomtime::ManualClock> clock;
  std::unique_ptr<bloom::ScalableFilter> filter;
};

Filled Fill(uint32_t slices, uint64_t items = kItems) {
  Filled f;
  f.clock = std::make_unique<bloomtime::ManualClock>(absl::FromUnixSeconds(1'700'000'000));
  const bloom::FilterParams spec = Spec(items, 0.01, slices);
  f.filter = *bloom::ScalableFilter::Create(spec, kSeed, f.clock.get());
  constexpr int kSteps = 1000;
  for (int s = 0; s < kSteps; ++s) {
    AddKeys(*f.filter, s * (items / kSteps), items / kSteps);
    if (slices > 0) f.clock->Advance(spec.window / kSteps);
  }
  return f;
}

// Argument: slices (0: the plain filter).
void BM_Contains(benchmark::State& state) {
  const uint64_t items = state.range(1);
  Filled f = Fill(static_cast<uint32_t>(state.range(0)), items);
  std::vector<uint64_t> hashes(kBatch);
  std::unique_ptr<bool[]> present(new bool[kBatch]);
  uint64_t key = 0, hits = 0;
  for (auto _ : state) {
    HashBatch(key, hashes);
    std::fill(present.get(), present.get() + kBatch, false);
    f.filter->MightContainMany(hashes, present.get());
    hits += present[0];
    key = (key + kBatch) % (2 * items);
  }
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

// New keys into a filter already holding kItems (the clock does not move: one slice takes
// them, growing as the rate demands).
void BM_Add(benchmark::State& state) {
  Filled f = Fill(static_cast<uint32_t>(state.range(0)));
  std::vector<uint64_t> hashes(kBatch);
  std::unique_ptr<bool[]> added(new bool[kBatch]);
  uint64_t key = kItems;
  for (auto _ : state) {
    HashBatch(key, hashes);
    (void)f.filter->Add(hashes, added.get());
    key += kBatch;
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
// Arguments: slices, items (10M: memory-bound; 100,000: in cache, what the CPU costs).
BENCHMARK(BM_Contains)
    ->ArgNames({"slices", "items"})
    ->ArgsProduct({{0, 4, 8}, {100'000, 10'000'000}})
    ->MinTime(1.0);
BENCHMARK(BM_Add)->ArgName("slices")->Arg(0)->Arg(4)->Arg(8)->MinTime(1.0);

// New keys at the rate the filter was sized for, the steady state of a window: kItems more
// over one more window (the clock moves with the adds, slices roll and the expired ones are
// retired as the store's checkpoints do), so the window keeps holding kItems (to 0.1%). BM_Add's
// frozen clock is instead a surge: the current slice grows a chain of sub-filters outside the
// slice arena. Slices 0: the plain filter sized for what it holds during the run (capacity
// 2 * kItems, 10M to 20M items), which takes the same keys without growing.
void BM_AddSteady(benchmark::State& state) {
  const auto slices = static_cast<uint32_t>(state.range(0));
  Filled f;
  if (slices > 0) {
    f = Fill(slices);
  } else {
    f.filter = *bloom::ScalableFilter::Create(Spec(2 * kItems, 0.01, 0), kSeed);
    AddKeys(*f.filter, 0, kItems);
  }
  // Whole batches per slice that fit its capacity (1,220 of 1,024 keys at 8 slices: 99.9% of
  // its 1.25M): a batch that straddled a slice's end would overflow it by a few hundred keys
  // and open a second sub-filter, which is a surge, not the steady state.
  absl::Duration per_batch;
  if (slices > 0) {
    const uint64_t batches_per_slice = kItems / slices / kBatch;
    per_batch = absl::Microseconds(bloom::SliceMicros(f.filter->spec())) / batches_per_slice;
    per_batch = absl::Ceil(per_batch, absl::Microseconds(1));
  }
  std::vector<uint64_t> hashes(kBatch);
  std::unique_ptr<bool[]> added(new bool[kBatch]);
  uint64_t key = kItems, batches = 0;
  for (auto _ : state) {
    HashBatch(key, hashes);
    (void)f.filter->Add(hashes, added.get());
    key += kBatch;
    if (slices > 0) {
      f.clock->Advance(per_batch);
      // About once per 1% of a slice, as a checkpointer would find them expired.
      if (++batches % 16 == 0) {
        if (const int through = f.filter->ExpiredThrough(f.clock->Now()); through >= 0) {
          f.filter->Retire(through);
        }
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["sub_filters"] = f.filter->num_sub_filters();
}
BENCHMARK(BM_AddSteady)->ArgName("slices")->Arg(0)->Arg(4)->Arg(8)->Iterations(kItems / kBatch);

}  // namespace

BENCHMARK_MAIN();

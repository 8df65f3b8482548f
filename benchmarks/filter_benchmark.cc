// Hot-path benchmarks of the filter maths, against a plain (unblocked) Bloom filter of the same
// FPR implemented here as the baseline, in one run.
//
//   build/benchmarks/filter_benchmark --benchmark_filter='Add|Contains'
//   build/benchmarks/filter_benchmark --benchmark_filter=BitsPerItem
//   build/benchmarks/filter_benchmark --benchmark_filter=Stats
//
// Every variant hashes 64-bit integer keys with seeded XXH3 and works in batches of 1024 keys,
// as the service does; "ns/op" is per key.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <vector>

#include "bloom/blocked_filter.h"
#include "bloom/hash.h"
#include "bloom/sizing.h"

namespace {

constexpr double kErrorRate = 0.01;
constexpr size_t kBatch = 1024;
constexpr uint64_t kSeed = 0x5eed;

uint64_t HashKey(uint64_t key) {
  return bloom::HashItem({reinterpret_cast<const char*>(&key), sizeof(key)}, kSeed);
}

// The baseline: a classic Bloom filter over one bit array, k = round(m/n ln 2) probes by
// Kirsch-Mitzenmacher double hashing of one 64-bit hash; every probe is its own cache miss.
// Add() is a plain, single-threaded OR; AddAtomic() the atomic OR a shared filter needs (the
// fair comparison for our adds, which are always safe under concurrency).
class PlainBloomFilter {
 public:
  PlainBloomFilter(uint64_t capacity, double p) {
    bits_ = static_cast<uint64_t>(std::ceil(capacity * bloom::StandardBitsPerItem(p)));
    k_ = std::max(
        1, static_cast<int>(std::lround(bits_ / static_cast<double>(capacity) * std::log(2))));
    words_.assign((bits_ + 63) / 64, 0);
  }
  void Add(uint64_t hash) {
    uint64_t h1 = hash, h2 = (hash >> 32) | (hash << 32) | 1;
    for (int i = 0; i < k_; ++i, h1 += h2) {
      const uint64_t bit = static_cast<uint64_t>((static_cast<__uint128_t>(h1) * bits_) >> 64);
      words_[bit / 64] |= uint64_t{1} << (bit % 64);
    }
  }
  void AddAtomic(uint64_t hash) {
    uint64_t h1 = hash, h2 = (hash >> 32) | (hash << 32) | 1;
    for (int i = 0; i < k_; ++i, h1 += h2) {
      const uint64_t bit = static_cast<uint64_t>((static_cast<__uint128_t>(h1) * bits_) >> 64);
      const uint64_t mask = uint64_t{1} << (bit % 64);
      std::atomic_ref<uint64_t> word(words_[bit / 64]);
      if ((word.load(std::memory_order_relaxed) & mask) == 0) {
        word.fetch_or(mask, std::memory_order_acq_rel);
      }
    }
  }
  bool MightContain(uint64_t hash) const {
    uint64_t h1 = hash, h2 = (hash >> 32) | (hash << 32) | 1;
    for (int i = 0; i < k_; ++i, h1 += h2) {
      const uint64_t bit = static_cast<uint64_t>((static_cast<__uint128_t>(h1) * bits_) >> 64);
      if ((words_[bit / 64] & (uint64_t{1} << (bit % 64))) == 0) return false;
    }
    return true;
  }
  uint64_t bytes() const { return words_.size() * 8; }

 private:
  uint64_t bits_;
  int k_;
  std::vector<uint64_t> words_;
};

std::unique_ptr<bloom::BlockedBloomFilter> MakeBlocked(uint64_t capacity) {
  return *bloom::BlockedBloomFilter::Create(*bloom::ChooseLayout(capacity, kErrorRate));
}

void HashBatch(uint64_t first_key, std::vector<uint64_t>& hashes) {
  for (size_t i = 0; i < hashes.size(); ++i) hashes[i] = HashKey(first_key + i);
}

// Adds `capacity` keys (0..capacity-1) so query benchmarks run on a full filter.
template <typename Filter>
void Fill(Filter& filter, uint64_t capacity) {
  for (uint64_t k = 0; k < capacity; ++k) filter.Add(HashKey(k));
}

// Add benchmarks come in two cases: keys never seen (every add sets bits; the filter is
// recreated when it reaches capacity, outside the timing) and keys already present (the common
// case of a deduplication filter: a read of the block, nothing written).
template <typename Filter, typename MakeFilter, typename AddBatch>
void RunAdd(benchmark::State& state, MakeFilter make, AddBatch add) {
  const uint64_t capacity = state.range(0);
  const bool duplicates = state.range(1) != 0;
  std::unique_ptr<Filter> filter = make(capacity);
  std::vector<uint64_t> hashes(kBatch);
  if (duplicates) {
    for (uint64_t k = 0; k < capacity; k += kBatch) {
      hashes.resize(std::min<uint64_t>(kBatch, capacity - k));
      HashBatch(k, hashes);
      add(*filter, hashes);
    }
    hashes.resize(kBatch);
  }
  uint64_t key = 0;
  for (auto _ : state) {
    if (key + kBatch > capacity) {
      key = 0;
      if (!duplicates) {
        state.PauseTiming();
        filter = make(capacity);
        state.ResumeTiming();
      }
    }
    HashBatch(key, hashes);
    add(*filter, hashes);
    key += kBatch;
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_BlockedAdd(benchmark::State& state) {
  RunAdd<bloom::BlockedBloomFilter>(
      state, [](uint64_t n) { return MakeBlocked(n); },
      [](bloom::BlockedBloomFilter& f, const std::vector<uint64_t>& h) { f.AddMany(h); });
}

void BM_PlainAdd(benchmark::State& state) {
  RunAdd<PlainBloomFilter>(
      state, [](uint64_t n) { return std::make_unique<PlainBloomFilter>(n, kErrorRate); },
      [](PlainBloomFilter& f, const std::vector<uint64_t>& h) {
        for (uint64_t x : h) f.Add(x);
      });
}

void BM_PlainAtomicAdd(benchmark::State& state) {
  RunAdd<PlainBloomFilter>(
      state, [](uint64_t n) { return std::make_unique<PlainBloomFilter>(n, kErrorRate); },
      [](PlainBloomFilter& f, const std::vector<uint64_t>& h) {
        for (uint64_t x : h) f.AddAtomic(x);
      });
}

// Queries alternate present keys and absent keys (half and half) on a full filter.
void BM_BlockedContains(benchmark::State& state) {  // NOLINT(readability-function-size)
  const uint64_t capacity = state.range(0);
  auto filter = MakeBlocked(capacity);
  std::vector<uint64_t> fill(kBatch);
  for (uint64_t k = 0; k < capacity; k += kBatch) {
    fill.resize(std::min<uint64_t>(kBatch, capacity - k));
    HashBatch(k, fill);
    filter->AddMany(fill);
  }
  std::vector<uint64_t> hashes(kBatch);
  std::unique_ptr<bool[]> present(new bool[kBatch]);
  uint64_t key = 0, hits = 0;
  for (auto _ : state) {
    HashBatch(key, hashes);
    std::fill(present.get(), present.get() + kBatch, false);
    filter->MightContainMany(hashes, present.get());
    hits += present[0];
    key = (key + kBatch) % (2 * capacity);
  }
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_PlainContains(benchmark::State& state) {
  const uint64_t capacity = state.range(0);
  PlainBloomFilter filter(capacity, kErrorRate);
  Fill(filter, capacity);
  std::vector<uint64_t> hashes(kBatch);
  uint64_t key = 0, hits = 0;
  for (auto _ : state) {
    HashBatch(key, hashes);
    for (uint64_t h : hashes) hits += filter.MightContain(h);
    key = (key + kBatch) % (2 * capacity);
  }
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1'000'000, 10'000'000, 100'000'000}) b->Arg(n);
  b->Unit(benchmark::kNanosecond)->MinTime(1.0);
}
// Arguments: capacity, then 0 for new keys or 1 for keys already present.
void AddSizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1'000'000, 10'000'000, 100'000'000}) {
    for (int64_t duplicates : {0, 1}) b->Args({n, duplicates});
  }
  b->ArgNames({"items", "dup"})->Unit(benchmark::kNanosecond)->MinTime(1.0);
}

BENCHMARK(BM_BlockedAdd)->Apply(AddSizes);
BENCHMARK(BM_PlainAdd)->Apply(AddSizes);
BENCHMARK(BM_PlainAtomicAdd)->Apply(AddSizes);
BENCHMARK(BM_BlockedContains)->Apply(Sizes);
BENCHMARK(BM_PlainContains)->Apply(Sizes);

// Not a timing: reports bits per item of our layout, the split-block reference and the
// classic optimum for one error rate (the table in docs/performance.md).
// What a Stats call pays per sub-filter: the kept set-bit count and the model-based FPR
// (O(1)), beside a scan of every bit, for comparison.
// Arg: filter capacity in millions of items at 1%.
void BM_StatsKeptCount(benchmark::State& state) {
  auto filter = *bloom::BlockedBloomFilter::Create(
      *bloom::ChooseLayout(static_cast<uint64_t>(state.range(0)) * 1'000'000, kErrorRate));
  for (uint64_t key = 0; key < 100'000; ++key) filter->Add(HashKey(key));
  for (auto _ : state) {
    benchmark::DoNotOptimize(filter->set_bits());
    benchmark::DoNotOptimize(filter->EstimatedFalsePositiveRate());
  }
}
void BM_StatsScan(benchmark::State& state) {
  auto filter = *bloom::BlockedBloomFilter::Create(
      *bloom::ChooseLayout(static_cast<uint64_t>(state.range(0)) * 1'000'000, kErrorRate));
  for (uint64_t key = 0; key < 100'000; ++key) filter->Add(HashKey(key));
  for (auto _ : state) benchmark::DoNotOptimize(filter->CountSetBits());
}
BENCHMARK(BM_StatsKeptCount)->Arg(1)->Arg(100);
BENCHMARK(BM_StatsScan)->Arg(1)->Arg(100)->Unit(benchmark::kMillisecond);

void BM_BitsPerItem(benchmark::State& state) {
  const double p = std::pow(10.0, -static_cast<double>(state.range(0)));
  double ours = 0;
  for (auto _ : state) ours = bloom::BlockedBitsPerItem(p);
  const double split_block = bloom::SplitBlockBitsPerItem(p);
  state.counters["ours"] = ours;
  state.counters["split_block"] = split_block;
  state.counters["ratio"] = ours / split_block;
  state.counters["unblocked"] = bloom::StandardBitsPerItem(p);
  state.counters["k"] = bloom::ChooseLayout(1'000'000, p)->hash_count;
}
BENCHMARK(BM_BitsPerItem)->Arg(2)->Arg(3)->Arg(4)->Arg(6)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();

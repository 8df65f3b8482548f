// The cuckoo table (bloom/cuckoo_table.h) beside the blocked Bloom filter it is an alternative
// to, at one error rate and capacity, in the same run:
//   build/benchmarks/cuckoo_benchmark                                   # all
//   build/benchmarks/cuckoo_benchmark --benchmark_filter=BitsPerItem    # memory only
//
// Keys are 64-bit integers hashed with seeded XXH3, in batches of 1024, as in filter_benchmark;
// "ns/op" is per key. The Add runs fill a fresh filter to its capacity and start again, so the
// cuckoo figure includes its relocation walks at every load up to kCuckooMaxLoad. The cuckoo
// Add and Contains go through CuckooFilter as the server does (one non-scaling table, each
// add's changes recorded for the journal, a batch's buckets prefetched).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "bloom/blocked_filter.h"
#include "bloom/cuckoo_filter.h"
#include "bloom/cuckoo_table.h"
#include "bloom/hash.h"
#include "bloom/sizing.h"

namespace {

constexpr size_t kBatch = 1024;
constexpr uint64_t kSeed = 0x5eed;

uint64_t HashKey(uint64_t key) {
  return bloom::HashItem({reinterpret_cast<const char*>(&key), sizeof(key)}, kSeed);
}

void HashBatch(uint64_t first, std::vector<uint64_t>& hashes) {
  for (size_t i = 0; i < hashes.size(); ++i) hashes[i] = HashKey(first + i);
}

double ErrorRate(const benchmark::State& state) {
  return std::pow(10.0, -static_cast<double>(state.range(1)));
}

std::unique_ptr<bloom::CuckooTable> MakeCuckoo(uint64_t capacity, double error_rate) {
  return *bloom::CuckooTable::Create(*bloom::ChooseCuckooLayout(capacity, error_rate), kSeed);
}

std::unique_ptr<bloom::CuckooFilter> MakeCuckooFilter(uint64_t capacity, double error_rate) {
  bloom::FilterParams spec{capacity, error_rate};
  spec.non_scaling = true;
  spec.kind = bloom::FilterKind::kCuckoo;
  return *bloom::CuckooFilter::Create(*bloom::NormalizeSpec(spec), kSeed);
}

absl::Status NothingToPersist(absl::Span<const bloom::CuckooChange>, int, int) {
  return absl::OkStatus();
}

// A non-scaling filter holding keys [0, capacity rounded down to whole batches).
std::unique_ptr<bloom::CuckooFilter> FullCuckooFilter(uint64_t capacity, double error_rate) {
  auto filter = MakeCuckooFilter(capacity, error_rate);
  std::vector<uint64_t> hashes(kBatch);
  for (uint64_t key = 0; key + kBatch <= capacity; key += kBatch) {
    HashBatch(key, hashes);
    if (!filter->AddHashes(hashes, NothingToPersist).ok()) std::abort();
  }
  return filter;
}

std::unique_ptr<bloom::BlockedBloomFilter> MakeBlocked(uint64_t capacity, double error_rate) {
  return *bloom::BlockedBloomFilter::Create(*bloom::ChooseLayout(capacity, error_rate));
}

// Arguments: capacity, -log10(error rate).
void Shapes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1'000'000, 10'000'000}) {
    for (int64_t rate : {2, 3}) b->Args({n, rate});
  }
  b->ArgNames({"items", "rate_exp"})->Unit(benchmark::kNanosecond)->MinTime(1.0);
}

void BM_CuckooAdd(benchmark::State& state) {
  const uint64_t capacity = state.range(0);
  auto filter = MakeCuckooFilter(capacity, ErrorRate(state));
  std::vector<uint64_t> hashes(kBatch);
  uint64_t key = 0, refused = 0;
  for (auto _ : state) {
    if (key + kBatch > capacity) {
      state.PauseTiming();
      filter = MakeCuckooFilter(capacity, ErrorRate(state));
      key = 0;
      state.ResumeTiming();
    }
    HashBatch(key, hashes);
    refused += !filter->AddHashes(hashes, NothingToPersist).ok();
    key += kBatch;
  }
  state.counters["refused"] = static_cast<double>(refused);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_BlockedAdd(benchmark::State& state) {
  const uint64_t capacity = state.range(0);
  auto filter = MakeBlocked(capacity, ErrorRate(state));
  std::vector<uint64_t> hashes(kBatch);
  uint64_t key = 0;
  for (auto _ : state) {
    if (key + kBatch > capacity) {
      state.PauseTiming();
      filter = MakeBlocked(capacity, ErrorRate(state));
      key = 0;
      state.ResumeTiming();
    }
    HashBatch(key, hashes);
    filter->AddMany(hashes);
    key += kBatch;
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

// Lookups in a full filter, half of them of added keys.
void BM_CuckooContains(benchmark::State& state) {
  const uint64_t capacity = state.range(0);
  auto filter = FullCuckooFilter(capacity, ErrorRate(state));
  std::vector<uint64_t> hashes(kBatch);
  std::unique_ptr<bool[]> present(new bool[kBatch]);
  uint64_t key = 0, hits = 0;
  for (auto _ : state) {
    HashBatch(key, hashes);
    filter->MightContainHashes(hashes, present.get());
    hits += present[0];
    key = (key + kBatch) % (2 * capacity);
  }
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_BlockedContains(benchmark::State& state) {
  const uint64_t capacity = state.range(0);
  auto filter = MakeBlocked(capacity, ErrorRate(state));
  std::vector<uint64_t> hashes(kBatch);
  for (uint64_t key = 0; key < capacity; key += kBatch) {
    hashes.resize(std::min<uint64_t>(kBatch, capacity - key));
    HashBatch(key, hashes);
    filter->AddMany(hashes);
  }
  hashes.resize(kBatch);
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

// Remove and add back: a full table's steady state under churn.
void BM_CuckooRemoveAndAdd(benchmark::State& state) {
  const uint64_t capacity = state.range(0);
  auto table = MakeCuckoo(capacity, ErrorRate(state));
  for (uint64_t key = 0; key < capacity; ++key) table->Insert(table->ProbeFor(HashKey(key)));
  uint64_t key = 0, failed = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBatch; ++i, key = (key + 1) % capacity) {
      const bloom::CuckooTable::Probe probe = table->ProbeFor(HashKey(key));
      failed += !table->Remove(probe);
      failed += !table->Insert(probe);
    }
  }
  state.counters["failed"] = static_cast<double>(failed);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

// Through the filter as the server calls it (journal recording included): a batch removed from
// a full filter, then added back.
void BM_CuckooFilterRemoveAndAdd(benchmark::State& state) {
  const uint64_t capacity = state.range(0);
  auto filter = FullCuckooFilter(capacity, ErrorRate(state));
  std::vector<uint64_t> hashes(kBatch);
  uint64_t key = 0, failed = 0;
  for (auto _ : state) {
    HashBatch(key, hashes);
    absl::StatusOr<std::vector<bool>> removed = filter->RemoveHashes(hashes, NothingToPersist);
    failed += !removed.ok() || std::count(removed->begin(), removed->end(), false) > 0;
    failed += !filter->AddHashes(hashes, NothingToPersist).ok();
    key = (key + kBatch) % (capacity - capacity % kBatch);
  }
  state.counters["failed"] = static_cast<double>(failed);
  state.SetItemsProcessed(state.iterations() * kBatch);
}

BENCHMARK(BM_CuckooAdd)->Apply(Shapes);
BENCHMARK(BM_BlockedAdd)->Apply(Shapes);
BENCHMARK(BM_CuckooContains)->Apply(Shapes);
BENCHMARK(BM_BlockedContains)->Apply(Shapes);
BENCHMARK(BM_CuckooRemoveAndAdd)->Apply(Shapes);
BENCHMARK(BM_CuckooFilterRemoveAndAdd)->Apply(Shapes);

// Not a timing: bits per item at capacity of a cuckoo table and of our blocked Bloom filter.
// Arg: -log10(error rate) times 10 (15 is 3%: 10^-1.5).
void BM_BitsPerItem(benchmark::State& state) {
  const double p = std::pow(10.0, -static_cast<double>(state.range(0)) / 10);
  constexpr uint64_t kCapacity = 10'000'000;
  double cuckoo = 0;
  for (auto _ : state) {
    cuckoo = 8.0 * bloom::ChooseCuckooLayout(kCapacity, p)->bytes() / kCapacity;
  }
  state.counters["error_rate"] = p;
  state.counters["cuckoo"] = cuckoo;
  state.counters["bloom"] = bloom::BlockedBitsPerItem(p);
  state.counters["ratio"] = cuckoo / bloom::BlockedBitsPerItem(p);
  state.counters["fingerprint_bits"] = bloom::ChooseCuckooLayout(kCapacity, p)->fingerprint_bits;
}
BENCHMARK(BM_BitsPerItem)->Arg(15)->Arg(20)->Arg(30)->Arg(40)->Arg(60)->Iterations(1);

}  // namespace
BENCHMARK_MAIN();

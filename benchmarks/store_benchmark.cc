// Benchmarks through the storage layer (real RocksDB in a temp dir):
//
//   build/benchmarks/store_benchmark --benchmark_filter=StoreAdd
//   build/benchmarks/store_benchmark --benchmark_filter=Restart
//
// StoreAdd: keys/s of FilterStore::Add with batches of 1000 new keys, with and without `sync`,
// from 1 or 2 threads, and the RocksDB bytes written per key (WAL; WAL + flush + compaction).
// Restart: FilterStore::Open time for a filter of N items at 1%, journal already checkpointed.
// RocksDBWrite: RocksDB alone, a write's CPU time by the size of its one value.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/heap.h"
#include "common/slab.h"
#include "rocksdb/db.h"
#include "rocksdb/statistics.h"
#include "rocksdb/write_batch.h"
#include "storage/filter_store.h"
#include "storage/write/operation_batch.h"

namespace {

std::string MakeTempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "bloom-bench-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

std::unique_ptr<storage::FilterStore> OpenStore(
    const std::string& dir, bool sync,
    absl::Duration checkpoint_interval = storage::StoreOptions().checkpoint_interval) {
  storage::StoreOptions options;
  options.data_dir = dir;
  options.sync = sync;
  options.checkpoint_interval = checkpoint_interval;
  auto store = storage::FilterStore::Open(options);
  if (!store.ok()) std::abort();
  return *std::move(store);
}

// Numbers as decimal strings, like the client libraries send them.
void MakeKeys(uint64_t first, size_t n, std::vector<std::string>& keys,
              std::vector<absl::string_view>& views) {
  keys.resize(n);
  views.resize(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = absl::StrCat(first + i);
    views[i] = keys[i];
  }
}

std::string dir;  // shared by the threads of one StoreAdd run
std::unique_ptr<storage::FilterStore> store;

void BM_StoreAdd(benchmark::State& state) {
  const bool sync = state.range(0) != 0;
  constexpr size_t kBatch = 1000;
  if (state.thread_index() == 0) {
    dir = MakeTempDir();
    store = OpenStore(dir, sync);
    if (!store->Reserve("bench", {50'000'000, 0.01}).ok()) std::abort();
  }
  std::vector<std::string> keys;
  std::vector<absl::string_view> views;
  uint64_t next = static_cast<uint64_t>(state.thread_index()) << 40;
  rocksdb::Statistics* stats = nullptr;
  uint64_t wal0 = 0, flush0 = 0, compact0 = 0;
  if (state.thread_index() == 0) {
    stats = store->database().statistics();
    wal0 = stats->getTickerCount(rocksdb::WAL_FILE_BYTES);
    flush0 = stats->getTickerCount(rocksdb::FLUSH_WRITE_BYTES);
    compact0 = stats->getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
  }
  for (auto _ : state) {
    state.PauseTiming();
    MakeKeys(next, kBatch, keys, views);
    next += kBatch;
    state.ResumeTiming();
    if (!store->Add("bench", views, nullptr).ok()) state.SkipWithError("add failed");
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  if (state.thread_index() == 0) {
    // Include the checkpoint the keys will eventually cost (bits written once at least).
    if (!store->CheckpointAll().ok()) state.SkipWithError("checkpoint failed");
    const double keys_total = static_cast<double>(state.iterations() * kBatch * state.threads());
    const uint64_t wal = stats->getTickerCount(rocksdb::WAL_FILE_BYTES) - wal0;
    const uint64_t all = wal + stats->getTickerCount(rocksdb::FLUSH_WRITE_BYTES) - flush0 +
                         stats->getTickerCount(rocksdb::COMPACT_WRITE_BYTES) - compact0;
    state.counters["wal_B_per_key"] = wal / keys_total;
    state.counters["all_B_per_key"] = all / keys_total;
    store.reset();
    std::filesystem::remove_all(dir);
  }
}
BENCHMARK(BM_StoreAdd)->Arg(0)->Arg(1)->Threads(1)->Threads(2)->UseRealTime()->MinTime(3.0);

// StoreAddCuckoo: FilterStore::Add of batches of 1000 new keys to a CUCKOO filter reserved for
// 1M items at 1.6%, filled to 90% and then replaced (compare.sh's scenario 7 without gRPC), as
// the CPU time of the whole process (RocksDB's flushes and the checkpointer included).
void BM_StoreAddCuckoo(benchmark::State& state) {
  constexpr size_t kBatch = 1000;
  constexpr uint64_t kCapacity = 1'000'000;
  bloom::FilterParams spec{kCapacity, 0.016};
  spec.kind = bloom::FilterKind::kCuckoo;
  const std::string cuckoo_dir = MakeTempDir();
  auto cuckoo_store = OpenStore(cuckoo_dir, /*sync=*/false);
  std::vector<std::string> keys;
  std::vector<absl::string_view> views;
  uint64_t next = 0;
  int filter = 0;
  std::string name;
  for (auto _ : state) {
    if (next % (kCapacity * 9 / 10) == 0) {
      state.PauseTiming();
      if (!name.empty() && !cuckoo_store->Delete(name).ok()) std::abort();
      name = absl::StrCat("cuckoo-", filter++);
      if (!cuckoo_store->Reserve(name, spec).ok()) std::abort();
      state.ResumeTiming();
    }
    state.PauseTiming();
    MakeKeys(next, kBatch, keys, views);
    next += kBatch;
    state.ResumeTiming();
    if (!cuckoo_store->Add(name, views, nullptr).ok()) state.SkipWithError("add failed");
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  cuckoo_store.reset();
  std::filesystem::remove_all(cuckoo_dir);
}
BENCHMARK(BM_StoreAddCuckoo)->MeasureProcessCPUTime()->MinTime(3.0);

// RocksDBWrite: one write of one Put of `value_bytes` random bytes, WAL on, as the journal of a
// cuckoo add writes (4,200 bytes: a batch of 1,000 keys into a 1M filter at 1.6%), against a
// near-empty value: what the journal's bytes cost in RocksDB itself (the WAL's CRC, computed in
// software by Debian's build, and page-cache appends; the memtable's copy).
void BM_RocksDBWrite(benchmark::State& state) {
  const std::string rocks_dir = MakeTempDir();
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::Open(options, rocks_dir, &raw).ok()) std::abort();
  const std::unique_ptr<rocksdb::DB> db(raw);
  std::string value(static_cast<size_t>(state.range(0)), '\0');
  uint64_t mix = 0x9e3779b97f4a7c15ULL;
  for (char& byte : value) {
    mix ^= mix << 13;
    mix ^= mix >> 7;
    mix ^= mix << 17;
    byte = static_cast<char>(mix);
  }
  uint64_t key = 0;
  for (auto _ : state) {
    rocksdb::WriteBatch batch;
    batch.Put(absl::StrCat(key++), value);
    if (!db->Write(rocksdb::WriteOptions(), &batch).ok()) state.SkipWithError("write failed");
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  std::filesystem::remove_all(rocks_dir);
}
BENCHMARK(BM_RocksDBWrite)
    ->ArgName("value_bytes")
    ->Arg(16)
    ->Arg(4200)
    ->Arg(16800)
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMicrosecond);

void BM_Restart(benchmark::State& state) {
  const uint64_t items = state.range(0);
  const std::string restart_dir = MakeTempDir();
  {
    auto s = OpenStore(restart_dir, false);
    if (!s->Reserve("big", {items, 0.01}).ok()) std::abort();
    std::vector<std::string> keys;
    std::vector<absl::string_view> views;
    constexpr size_t kBatch = 100'000;
    for (uint64_t k = 0; k < items; k += kBatch) {
      MakeKeys(k, std::min<uint64_t>(kBatch, items - k), keys, views);
      if (!s->Add("big", views, nullptr).ok()) std::abort();
    }
    if (!s->Close().ok()) std::abort();  // checkpoints: the restart loads pages
  }
  for (auto _ : state) {
    auto s = OpenStore(restart_dir, false);
    state.PauseTiming();
    state.counters["pages"] = static_cast<double>(s->load_report().pages);
    state.counters["MB"] = static_cast<double>(s->memory_used()) / 1e6;
    if (!s->Close().ok()) std::abort();
    state.ResumeTiming();
  }
  std::filesystem::remove_all(restart_dir);
}
BENCHMARK(BM_Restart)
    ->Arg(10'000'000)
    ->Arg(100'000'000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// Not a timing: the heap a filter costs beyond its bits, for many small per-user filters.
// heap in use (bloomheap::HeapBytesInUse, plus slab slots: common/slab.h) after reserving N filters
// of capacity 1000, minus the bits, RocksDB's memtables (which hold the new metadata records until
// they are flushed) and its block cache (bounded, shared by all filters).
// The heap is glibc's malloc here; run with
// LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 to count the server's allocator,
// whose size classes round differently (the label names the one counted).
// Second argument 1: each filter is created by an Add with create_if_missing and one item, as a
// per-user filter is (its journal record is in the memtables, taken off too).
void BM_PerFilterOverhead(benchmark::State& state) {
  const int filters = static_cast<int>(state.range(0));
  const bool by_add = state.range(1) != 0;
  for (auto _ : state) {
    const std::string overhead_dir = MakeTempDir();
    auto s = OpenStore(overhead_dir, false);
    const storage::RocksDbFigures rocksdb_before = s->database().Figures();
    const uint64_t bits_before = s->memory_used();
    const size_t heap_before = bloomheap::HeapBytesInUse() + slab::Totals().in_use_bytes;
    const bloom::FilterParams spec{1000, 0.01};
    std::vector<std::string> keys;
    std::vector<absl::string_view> views;
    for (int i = 0; i < filters; ++i) {
      if (by_add) {  // the per-user path: created by its first add (create_if_missing)
        MakeKeys(i, 1, keys, views);
        if (!s->Add(absl::StrCat("user:", i), views, &spec).ok()) std::abort();
      } else if (!s->Reserve(absl::StrCat("user:", i), spec).ok()) {
        std::abort();
      }
    }
    // Flush the memtables (their arenas hold the new records until then), so the heap counted
    // is the filters' own and what RocksDB keeps per filter is what remains once flushed.
    rocksdb::FlushOptions flush;
    flush.wait = true;
    const storage::Database& database = s->database();
    if (!database.db()
             ->Flush(flush, {database.filters(), database.blocks(), database.journal()})
             .ok()) {
      std::abort();
    }
    const size_t heap_after = bloomheap::HeapBytesInUse() + slab::Totals().in_use_bytes;
    const storage::RocksDbFigures rocksdb_after = s->database().Figures();
    // The budget charges each filter its bits plus a fixed bookkeeping estimate: take that off.
    const double bits = static_cast<double>(s->memory_used() - bits_before) -
                        static_cast<double>(storage::ResidentCharge(0, 1)) * filters;
    const double heap = static_cast<double>(heap_after - heap_before);
    const double memtables =
        static_cast<double>(rocksdb_after.memtable_bytes - rocksdb_before.memtable_bytes);
    const double block_cache =
        static_cast<double>(rocksdb_after.block_cache_bytes - rocksdb_before.block_cache_bytes);
    state.counters["bits_B_per_filter"] = bits / filters;
    state.counters["overhead_B_per_filter"] = (heap - bits - memtables - block_cache) / filters;
    state.counters["memtable_B_per_filter"] = memtables / filters;
    state.counters["block_cache_B_per_filter"] = block_cache / filters;
    state.SetLabel(bloomheap::AllocatorName());
    if (!s->Close().ok()) std::abort();
    s.reset();
    std::filesystem::remove_all(overhead_dir);
  }
}
BENCHMARK(BM_PerFilterOverhead)
    ->Args({100'000, 0})
    ->Args({100'000, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// What an idle server with many resident per-user filters spends on its background
// checkpointer, which visits the filters its schedule holds (changed ones when their
// checkpoint is due, windowed ones, ones due to idle out;
// storage/checkpoint/checkpoint_schedule.h): CPU time of the whole process over 5 idle seconds, as
// a share of one core, once the creations are checkpointed. With the second argument 1, every
// filter then gets a second add, so each is changed with its checkpoint due later (an interval of
// an hour here, so that none is written while measuring), as on a server writing to all of them.
void BM_IdleCheckpointerCpu(benchmark::State& state) {
  const int filters = static_cast<int>(state.range(0));
  const bool changed = state.range(1) != 0;
  for (auto _ : state) {
    const std::string idle_dir = MakeTempDir();
    // Background checkpoints on, as in the server.
    auto s = OpenStore(idle_dir, false, absl::Hours(1));
    const bloom::FilterParams spec{1000, 0.01};
    std::vector<std::string> keys;
    std::vector<absl::string_view> views;
    for (int i = 0; i < filters; ++i) {
      MakeKeys(i, 1, keys, views);
      if (!s->Add(absl::StrCat("user:", i), views, &spec).ok()) std::abort();
    }
    absl::SleepFor(absl::Seconds(2));  // past the creations' own writes
    if (changed) {
      for (int i = 0; i < filters; ++i) {
        MakeKeys(filters + i, 1, keys, views);
        if (!s->Add(absl::StrCat("user:", i), views, &spec).ok()) std::abort();
      }
      absl::SleepFor(absl::Seconds(2));  // a pass has taken them all into the schedule
    }
    auto cpu_seconds = [] {
      rusage usage{};
      getrusage(RUSAGE_SELF, &usage);
      return absl::ToDoubleSeconds(absl::DurationFromTimeval(usage.ru_utime) +
                                   absl::DurationFromTimeval(usage.ru_stime));
    };
    constexpr double kIdleSeconds = 5;
    const double before = cpu_seconds();
    absl::SleepFor(absl::Seconds(kIdleSeconds));
    state.counters["idle_cpu_percent_of_a_core"] = (cpu_seconds() - before) / kIdleSeconds * 100;
    if (!s->Close().ok()) std::abort();
    s.reset();
    std::filesystem::remove_all(idle_dir);
  }
}
BENCHMARK(BM_IdleCheckpointerCpu)
    ->Args({300'000, 0})
    ->Args({300'000, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Memory as a cache (storage/filter_store_residency.cc): the cost of evicting a small filter with
// unpersisted adds (a checkpoint: its dirty page, record and journal trim in one write) and of
// loading it again on its next use. 20,000 filters of capacity 1000 with a budget for 2,000.
void BM_EvictAndLoad(benchmark::State& state) {
  constexpr int kFilters = 20'000;
  const std::string cache_dir = MakeTempDir();
  storage::StoreOptions options;
  options.data_dir = cache_dir;
  options.background_checkpoints = false;
  options.memory_limit_bytes = 2'000 * 1'472;
  auto opened = storage::FilterStore::Open(options);
  if (!opened.ok()) std::abort();
  auto& s = *opened;
  const bloom::FilterParams spec{1000, 0.01};
  std::vector<std::string> keys;
  std::vector<absl::string_view> views;
  MakeKeys(0, 1, keys, views);
  for (int i = 0; i < kFilters; ++i) {
    if (!s->Add(absl::StrCat("user:", i), views, &spec).ok()) std::abort();
  }
  const storage::StoreFigures before = s->Figures();
  uint64_t next = 1;
  for (auto _ : state) {
    // A filter evicted long ago: a load, and (past the budget) an eviction.
    const std::string name = absl::StrCat("user:", (next * 7919) % kFilters);
    MakeKeys(next++, 1, keys, views);
    if (!s->Add(name, views, nullptr).ok()) std::abort();
    s->EvictToBudget();  // here rather than on the evictor thread, so the time counts it
  }
  const storage::StoreFigures after = s->Figures();
  state.counters["loads_per_op"] =
      static_cast<double>(after.loads - before.loads) / static_cast<double>(state.iterations());
  state.counters["evictions_per_op"] = static_cast<double>(after.evictions - before.evictions) /
                                       static_cast<double>(state.iterations());
  state.counters["load_us"] =
      absl::ToDoubleMicroseconds(after.load_time - before.load_time) /
      static_cast<double>(std::max<uint64_t>(1, after.loads - before.loads));
  if (!s->Close().ok()) std::abort();
  opened->reset();
  std::filesystem::remove_all(cache_dir);
}
BENCHMARK(BM_EvictAndLoad)->Iterations(20'000)->Unit(benchmark::kMicrosecond);

// Creating per-user filters on their first add, as a Pipeline read or a group of concurrent
// calls does it: each iteration is one OperationBatch of `group` adds, each creating a new
// filter of capacity 1000 under a random name (names arrive in no order), then flushed. CPU
// time is the whole process's, so RocksDB's flushes and compactions of the records count.
void BM_CreateOnFirstAdd(benchmark::State& state) {
  const auto group = static_cast<size_t>(state.range(0));
  const std::string create_dir = MakeTempDir();
  auto s = OpenStore(create_dir, false);
  const bloom::FilterParams spec{1000, 0.01};
  std::vector<std::string> keys;
  std::vector<absl::string_view> views;
  MakeKeys(0, 1, keys, views);
  uint64_t next = 0;
  for (auto _ : state) {
    auto batch = s->StartBatch(/*defer_sync=*/false);
    if (!batch.ok()) std::abort();
    std::vector<storage::OperationBatch::Ticket> tickets;
    for (size_t i = 0; i < group; ++i) {
      // A bijective scramble of a counter: distinct names in random order.
      const uint64_t id = (++next * 0x9E3779B97F4A7C15ULL) ^ 0x5bd1e995;
      tickets.push_back((*batch)->Add(absl::StrCat("user:", id), views, &spec));
    }
    (*batch)->Flush();
    for (storage::OperationBatch::Ticket ticket : tickets) {
      if (!(*batch)->TakeResult(ticket).ok()) state.SkipWithError("add failed");
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * group));
  if (!s->Close().ok()) std::abort();
  s.reset();
  std::filesystem::remove_all(create_dir);
}
// 200,000 filters each.
BENCHMARK(BM_CreateOnFirstAdd)
    ->Arg(1)
    ->Iterations(200'000)
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CreateOnFirstAdd)
    ->Arg(16)
    ->Iterations(12'500)
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMicrosecond);

// Start-up with many filters: eager (every record and page read) against --lazy_start (only
// the journal), after a clean shutdown of 100,000 filters of capacity 1000 with one add each.
void BM_StartUp(benchmark::State& state) {
  struct RemovedAtExit {
    std::string path;
    ~RemovedAtExit() { std::filesystem::remove_all(path); }
  };
  static const RemovedAtExit startup{[] {
    std::string made = MakeTempDir();
    auto s = OpenStore(made, false);
    const bloom::FilterParams spec{1000, 0.01};
    std::vector<std::string> keys;
    std::vector<absl::string_view> views;
    MakeKeys(0, 1, keys, views);
    for (int i = 0; i < 100'000; ++i) {
      if (!s->Add(absl::StrCat("user:", i), views, &spec).ok()) std::abort();
    }
    if (!s->Close().ok()) std::abort();
    return made;
  }()};
  storage::StoreOptions options;
  options.data_dir = startup.path;
  options.background_checkpoints = false;
  options.lazy_start = state.range(0) == 1;
  for (auto _ : state) {
    auto opened = storage::FilterStore::Open(options);
    if (!opened.ok()) std::abort();
    state.counters["resident_filters"] = static_cast<double>((*opened)->Figures().resident_filters);
    state.PauseTiming();
    if (!(*opened)->Close().ok()) std::abort();
    opened->reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_StartUp)
    ->ArgName("lazy")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

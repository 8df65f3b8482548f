// Memory as a cache (filter_store_residency.cc): filters evicted past the memory limit and loaded
// again on use answer exactly as before, lose nothing (also across kill -9 style reopen), and every
// operation (Reserve, Delete, Import, List, batches) sees a cold filter as it would a resident
// one.
#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/filter/stored_filter.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloom::FilterParams;

using bloomtest::Items;
using bloomtest::Views;

// A 1000-item filter at 1% takes 1,472 bytes of bits, and is charged its bookkeeping too
// (ResidentCharge): 20 of them fit this limit with 4,352 bytes to spare, less than a filter of
// 4000 items takes.
constexpr uint64_t kLimit = 20 * ResidentCharge(1472, 1) + 4352;
const FilterParams kSmall{1000, 0.01};

class ResidencyTest : public ::testing::Test {
 protected:
  void Open(uint64_t limit = kLimit, bool lazy = false) {
    store_.reset();
    StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = false;
    options.background_eviction = background_eviction_;
    options.memory_limit_bytes = limit;
    options.lazy_start = lazy;
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
  }
  void SetUp() override { Open(); }

  std::vector<bool> Check(absl::string_view name, const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<bool>> present = store_->MightContain(name, Views(items));
    EXPECT_TRUE(present.ok()) << name << ": " << present.status();
    return present.ok() ? *present : std::vector<bool>();
  }

  // Tests of which filters a round evicts call EvictToBudget alone: a background round that
  // starts while a Reserve holds its name's lock stripe passes over a candidate sharing it.
  void OpenWithoutBackgroundEviction() {
    background_eviction_ = false;
    Open();
  }

  // Uses filter `f<f>`, then waits for the recency clock to tick, so that filters used one
  // after the other never share a recency (a tick is about a millisecond, a check less: tied
  // filters were evicted in any order).
  void UseInOrder(int f) {
    Check(absl::StrCat("f", f), Items("x", 0, 1));
    const uint32_t used = StoredFilter::NowTicks();
    while (StoredFilter::NowTicks() == used) {
    }
  }

  bloomtest::TempDir dir_;
  bool background_eviction_ = true;
  std::unique_ptr<FilterStore> store_;
};

// Recency ticks are 32 bits of about a millisecond and wrap every 52 days: the evictor
// compares ages from one now, which stay right across the wrap.
TEST(RecencyTicksTest, AgesStayRightAcrossTheWrap) {
  EXPECT_EQ(StoredFilter::TicksSince(0xfffffff0u, 0x10u), 0x20u);
  EXPECT_EQ(StoredFilter::TicksSince(5, 5), 0u);
  EXPECT_GT(StoredFilter::TicksSince(0xffffff00u, 0x10u), StoredFilter::TicksSince(0x5u, 0x10u));
}

TEST_F(ResidencyTest, EvictedFiltersAnswerExactlyAsBeforeAndMemoryStaysUnderTheLimit) {
  constexpr int kFilters = 200;  // five times what fits
  const std::vector<std::string> probes = Items("probe", 0, 2000);
  std::vector<std::vector<bool>> before(kFilters);
  std::vector<double> fill_ratio(kFilters);
  for (int f = 0; f < kFilters; ++f) {
    const std::string name = absl::StrCat("user:", f);
    ASSERT_OK(store_->Add(name, Views(Items(absl::StrCat(f, "-"), 0, 300)), &kSmall).status());
    before[f] = Check(name, probes);
    absl::StatusOr<FilterInfo> info = store_->Stats(name);
    ASSERT_OK(info.status());
    fill_ratio[f] = info->stats.fill_ratio;
  }
  store_->EvictToBudget();
  StoreFigures figures = store_->Figures();
  EXPECT_GT(figures.evictions, 100u);
  EXPECT_LE(figures.memory_used_bytes, kLimit);
  EXPECT_EQ(figures.resident_filters + figures.cold_filters, static_cast<size_t>(kFilters));

  for (int f = 0; f < kFilters; ++f) {
    const std::string name = absl::StrCat("user:", f);
    for (const bool present : Check(name, Items(absl::StrCat(f, "-"), 0, 300))) {
      ASSERT_TRUE(present) << "false negative in " << name;
    }
    EXPECT_EQ(Check(name, probes), before[f]) << name << ": false positives changed";
    absl::StatusOr<FilterInfo> info = store_->Stats(name);
    ASSERT_OK(info.status());
    EXPECT_EQ(info->stats.fill_ratio, fill_ratio[f]) << name;
    EXPECT_EQ(info->stats.items_added, 300u) << name;
    store_->EvictToBudget();
    EXPECT_LE(store_->memory_used(), kLimit);
  }
  EXPECT_GT(store_->Figures().loads, 100u);

  // List answers for cold filters from their records, loading none: the counts are exact, the
  // fill (expected from the count) close to the counted one.
  store_->EvictToBudget();
  const uint64_t loads = store_->Figures().loads;
  size_t listed = 0;
  std::string token;
  do {
    absl::StatusOr<FilterStore::ListPage> page = store_->List("user:", 64, token);
    ASSERT_OK(page.status());
    for (const FilterInfo& info : page->filters) {
      int f = 0;
      ASSERT_TRUE(absl::SimpleAtoi(absl::string_view(info.name).substr(5), &f)) << info.name;
      EXPECT_EQ(info.stats.items_added, 300u) << info.name;
      EXPECT_EQ(info.spec.capacity, 1000u) << info.name;
      EXPECT_NEAR(info.stats.fill_ratio, fill_ratio[f], 0.1 * fill_ratio[f]) << info.name;
      EXPECT_GT(info.stats.estimated_error_rate, 0) << info.name;
      EXPECT_LT(info.stats.estimated_error_rate, 0.01) << info.name;
      ++listed;
    }
    token = page->next_page_token;
  } while (!token.empty());
  EXPECT_EQ(listed, static_cast<size_t>(kFilters));
  EXPECT_EQ(store_->Figures().loads, loads);

  Open();  // everything comes back after a restart, resident or not
  EXPECT_GT(store_->load_report().cold, 0u);
  for (int f = 0; f < kFilters; f += 7) {
    const std::string name = absl::StrCat("user:", f);
    EXPECT_EQ(Check(name, probes), before[f]) << name;
  }
}

// A round picks its victims oldest first (it selects a few candidates and sorts only those):
// the filters used most recently stay resident.
TEST_F(ResidencyTest, ARoundEvictsTheLeastRecentlyUsedFilters) {
  OpenWithoutBackgroundEviction();
  // 20 small filters take all but 4,352 bytes of the budget with their bookkeeping.
  for (int f = 0; f < 20; ++f) ASSERT_OK(store_->Reserve(absl::StrCat("f", f), kSmall).status());
  ASSERT_EQ(store_->Figures().cold_filters, 0u);
  // Used in this order: f10..f19 are now the least recently used.
  for (int f = 10; f < 20; ++f) UseInOrder(f);
  for (int f = 0; f < 10; ++f) UseInOrder(f);
  // A larger filter takes memory over the limit; the round evicts down to 15/16 of it.
  ASSERT_OK(store_->Reserve("big", {4000, 0.01}).status());
  store_->EvictToBudget();
  const uint64_t evicted = store_->Figures().cold_filters;
  ASSERT_GE(evicted, 2u);
  ASSERT_LT(evicted, 10u);
  EXPECT_LE(store_->memory_used(), kLimit);
  // Exactly the oldest: f10, f11, ... are cold, the next one and every newer filter resident.
  // Looked up without being used (a check would load a cold one, and evict another).
  for (int f = 0; f < 20; ++f) {
    const bool oldest = f >= 10 && f < 10 + static_cast<int>(evicted);
    EXPECT_EQ(store_->IsResident(absl::StrCat("f", f)), !oldest) << "f" << f;
  }
  EXPECT_TRUE(store_->IsResident("big"));
}

// A scan queues the oldest filters for several rounds (QueueEvictionCandidates); a later
// round served from that queue still evicts least recently used first: a queued filter used
// since the scan stays.
TEST_F(ResidencyTest, LaterRoundsSkipQueuedFiltersUsedSinceTheScan) {
  OpenWithoutBackgroundEviction();
  for (int f = 0; f < 20; ++f) ASSERT_OK(store_->Reserve(absl::StrCat("f", f), kSmall).status());
  for (int f = 0; f < 20; ++f) UseInOrder(f);  // f0 oldest
  ASSERT_OK(store_->Reserve("big1", {4000, 0.01}).status());
  store_->EvictToBudget();
  const uint64_t evicted_first = store_->Figures().evictions;
  ASSERT_GE(evicted_first, 2u);
  ASSERT_LT(evicted_first, 10u);
  // The oldest filter still resident, used now: no longer a victim.
  const std::string used_since = absl::StrCat("f", evicted_first);
  UseInOrder(static_cast<int>(evicted_first));
  ASSERT_OK(store_->Reserve("big2", {4000, 0.01}).status());
  store_->EvictToBudget();
  EXPECT_GT(store_->Figures().evictions, evicted_first);
  EXPECT_LE(store_->memory_used(), kLimit);
  const uint64_t loads = store_->Figures().loads;
  Check(used_since, Items("x", 0, 1));
  EXPECT_EQ(store_->Figures().loads, loads) << used_since << " was evicted though used since";
  // The next oldest went instead.
  Check(absl::StrCat("f", evicted_first + 1), Items("x", 0, 1));
  EXPECT_EQ(store_->Figures().loads, loads + 1);
}

// A filter only checked since its last checkpoint (nothing dirty, no journal) still writes its
// check counters when it is evicted: Stats counts every check whether it answers from the cold
// filter's record, from the filter loaded again, or after a restart.
TEST_F(ResidencyTest, EvictionKeepsTheCheckCounters) {
  OpenWithoutBackgroundEviction();
  ASSERT_OK(store_->Add("counted", Views(Items("in", 0, 5)), &kSmall).status());
  ASSERT_OK(store_->CheckpointAll());
  const std::vector<bool> in = Check("counted", Items("in", 0, 5));
  ASSERT_EQ(std::count(in.begin(), in.end(), true), 5);
  const std::vector<bool> out = Check("counted", Items("out", 0, 2));  // false positives count
  uint64_t checks = 7;
  uint64_t check_hits = 5 + std::count(out.begin(), out.end(), true);
  // Recency counts in ~1 ms ticks: let one pass, so that "counted" is strictly older than f0
  // (a tie let the evictor take f0 and leave "counted" resident).
  for (const uint32_t used = StoredFilter::NowTicks(); StoredFilter::NowTicks() == used;) {
  }
  // 30 newer filters, more than the budget holds: the round evicts "counted", the oldest.
  for (int f = 0; f < 30; ++f) {
    ASSERT_OK(store_->Reserve(absl::StrCat("f", f), kSmall).status());
    UseInOrder(f);
  }
  store_->EvictToBudget();
  ASSERT_FALSE(store_->IsResident("counted"));
  const uint64_t loads = store_->Figures().loads;
  absl::StatusOr<FilterInfo> reloaded = store_->Stats("counted");  // loads it again
  ASSERT_OK(reloaded.status());
  EXPECT_EQ(store_->Figures().loads, loads + 1);
  EXPECT_EQ(reloaded->checks, checks);
  EXPECT_EQ(reloaded->check_hits, check_hits);
  Check("counted", Items("in", 0, 1));
  ++checks;
  ++check_hits;
  absl::StatusOr<FilterInfo> loaded = store_->Stats("counted");
  ASSERT_OK(loaded.status());
  EXPECT_EQ(loaded->checks, checks);
  EXPECT_EQ(loaded->check_hits, check_hits);

  Open();
  absl::StatusOr<FilterInfo> restarted = store_->Stats("counted");
  ASSERT_OK(restarted.status());
  EXPECT_EQ(restarted->checks, checks);
  EXPECT_EQ(restarted->check_hits, check_hits);
}

TEST_F(ResidencyTest, ColdFiltersKeepTheirIdentityForReserveImportDeleteAndList) {
  const FilterParams other{5000, 0.001};
  ASSERT_OK(store_->Reserve("f0", kSmall).status());
  ASSERT_OK(store_->Add("f0", Views(Items("x", 0, 10)), nullptr).status());
  for (int f = 1; f < 100; ++f) {
    ASSERT_OK(store_->Reserve(absl::StrCat("f", f), kSmall).status());
  }
  store_->EvictToBudget();
  // The least recently used filters are cold now: f0, f1, ...
  ASSERT_GT(store_->Figures().cold_filters, 50u);
  // A Reserve of a cold name with another spec must not replace it.
  absl::Status conflict = store_->Reserve("f0", other).status();
  EXPECT_EQ(conflict.code(), absl::StatusCode::kAlreadyExists) << conflict;
  for (const bool present : Check("f0", Items("x", 0, 10))) EXPECT_TRUE(present);

  store_->EvictToBudget();
  absl::StatusOr<FilterStore::ReserveResult> again = store_->Reserve("f1", kSmall);
  ASSERT_OK(again.status());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(store_->BeginImport("f2").status().code(), absl::StatusCode::kAlreadyExists);

  // Delete of a cold filter: gone, pages and journal included, and the name is free.
  ASSERT_OK(store_->Add("f3", Views(Items("y", 0, 50)), nullptr).status());
  for (int f = 50; f < 100; ++f) ASSERT_OK(store_->Stats(absl::StrCat("f", f)).status());
  store_->EvictToBudget();
  ASSERT_OK(store_->Delete("f3"));
  EXPECT_EQ(store_->Stats("f3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Delete("f3").code(), absl::StatusCode::kNotFound);
  ASSERT_OK(store_->Reserve("f3", kSmall).status());
  for (const bool present : Check("f3", Items("y", 0, 50))) EXPECT_FALSE(present);

  // List shows every filter, resident or cold, in name order.
  size_t listed = 0;
  std::string token;
  do {
    absl::StatusOr<FilterStore::ListPage> page = store_->List("f", 7, token);
    ASSERT_OK(page.status());
    listed += page->filters.size();
    token = page->next_page_token;
  } while (!token.empty());
  EXPECT_EQ(listed, 100u);

  Open();
  EXPECT_EQ(store_->load_report().orphans_deleted, 0u);
  EXPECT_EQ(store_->Stats("f3")->stats.items_added, 0u);
}

// Eviction races adds, checks, batches and creations on the same filters: no acknowledged add
// may ever read as absent.
TEST_F(ResidencyTest, EvictionUnderConcurrentAddsAndChecksLosesNothing) {
  constexpr int kFilters = 120;
  constexpr int kThreads = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(t);
      for (int round = 0; round < 300 && failures.load() == 0; ++round) {
        const std::string name = absl::StrCat("u", random() % kFilters);
        const std::vector<std::string> items = Items(absl::StrCat("t", t, "r", round, "-"), 0, 5);
        absl::Status added;
        if (round % 2 == 0) {
          added = store_->Add(name, Views(items), &kSmall).status();
        } else {
          absl::StatusOr<std::unique_ptr<OperationBatch>> batch = store_->StartBatch();
          if (!batch.ok()) {
            added = batch.status();
          } else {
            const OperationBatch::Ticket ticket = (*batch)->Add(name, Views(items), &kSmall);
            added = (*batch)->TakeResult(ticket).status();
          }
        }
        if (!added.ok()) {
          ADD_FAILURE() << name << ": " << added;
          failures.fetch_add(1);
          continue;
        }
        absl::StatusOr<std::vector<bool>> present = store_->MightContain(name, Views(items));
        if (!present.ok() || std::find(present->begin(), present->end(), false) != present->end()) {
          ADD_FAILURE() << "false negative or error in " << name << ": " << present.status();
          failures.fetch_add(1);
        }
      }
    });
  }
  std::thread evictor([&] {
    while (!stop.load()) {
      store_->EvictToBudget();
      std::this_thread::yield();
    }
  });
  for (std::thread& thread : threads) thread.join();
  stop.store(true);
  evictor.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(store_->Figures().evictions, 0u);

  // And after a restart everything added is there.
  Open();
  for (int t = 0; t < kThreads; ++t) {
    std::mt19937 random(t);
    for (int round = 0; round < 300; ++round) {
      const std::string name = absl::StrCat("u", random() % kFilters);
      for (const bool present : Check(name, Items(absl::StrCat("t", t, "r", round, "-"), 0, 5))) {
        ASSERT_TRUE(present) << name;
      }
    }
  }
}

TEST_F(ResidencyTest, AFilterLargerThanTheWholeLimitIsRefusedAndGrowthEvictsOthers) {
  absl::Status too_big = store_->Reserve("big", {1'000'000, 0.01}).status();
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted) << too_big;
  for (int f = 0; f < 30; ++f) ASSERT_OK(store_->Reserve(absl::StrCat("f", f), kSmall).status());
  // A scaling filter grows past what the others leave free: they make room.
  ASSERT_OK(store_->Reserve("grows", {1000, 0.01}).status());
  for (int b = 0; b < 8; ++b) {
    ASSERT_OK(store_->Add("grows", Views(Items(absl::StrCat(b, "-"), 0, 1000)), nullptr).status());
    store_->EvictToBudget();
  }
  EXPECT_GT(store_->Stats("grows")->stats.sub_filters.size(), 2u);
  EXPECT_LE(store_->memory_used(), kLimit);
  EXPECT_GT(store_->Figures().evictions, 0u);
}

// Lazy start-up reads no filter, yet serves every one, and new filters never take the
// generation (the pages) of one it has not read: a filter with no pages and no journal (only a
// record) is the one a scan of pages and journal would miss.
TEST_F(ResidencyTest, LazyStartReadsNoFilterAndNewFiltersNeverReuseAGeneration) {
  ASSERT_OK(store_->Reserve("empty", kSmall).status());  // a record, nothing else
  for (int f = 0; f < 20; ++f) {
    ASSERT_OK(store_->Add(absl::StrCat("f", f), Views(Items(absl::StrCat(f, "-"), 0, 100)), &kSmall)
                  .status());
  }
  Open(kLimit, /*lazy=*/true);
  EXPECT_EQ(store_->load_report().filters, 0u);
  EXPECT_EQ(store_->memory_used(), 0u);
  EXPECT_EQ(store_->Figures().resident_filters, 0u);
  for (int f = 0; f < 20; f += 3) {
    for (const bool present : Check(absl::StrCat("f", f), Items(absl::StrCat(f, "-"), 0, 100))) {
      ASSERT_TRUE(present);
    }
  }
  for (int f = 0; f < 30; ++f) {
    ASSERT_OK(
        store_
            ->Add(absl::StrCat("new", f), Views(Items(absl::StrCat("n", f, "-"), 0, 200)), &kSmall)
            .status());
  }
  ASSERT_OK(store_->Delete("f1"));
  ASSERT_OK(store_->CheckpointAll());

  Open(0);  // eager, no limit: every filter read back, each with its own pages
  EXPECT_EQ(store_->load_report().orphans_deleted, 0u);
  EXPECT_EQ(store_->Stats("empty")->stats.items_added, 0u);
  for (int f = 0; f < 30; ++f) {
    const std::vector<std::string> items = Items(absl::StrCat("n", f, "-"), 0, 200);
    for (const bool present : Check(absl::StrCat("new", f), items)) ASSERT_TRUE(present);
    size_t in_empty = 0;
    for (const bool present : Check("empty", items)) in_empty += present;
    EXPECT_LE(in_empty, 20u) << "new" << f << " shares pages with 'empty'";
  }
  EXPECT_EQ(store_->Stats("f1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Stats("f2")->stats.items_added, 100u);
  for (int f = 0; f < 20; ++f) {
    if (f == 1) continue;
    for (const bool present : Check(absl::StrCat("f", f), Items(absl::StrCat(f, "-"), 0, 100))) {
      ASSERT_TRUE(present) << "f" << f;
    }
  }
  Open(kLimit, /*lazy=*/true);  // loaded one by one, by generation
  for (int f = 0; f < 30; ++f) {
    size_t in_empty = 0;
    for (const bool present : Check("empty", Items(absl::StrCat("n", f, "-"), 0, 200))) {
      in_empty += present;
    }
    EXPECT_LE(in_empty, 20u) << "new" << f << " shares pages with 'empty'";
  }
}

}  // namespace
}  // namespace storage

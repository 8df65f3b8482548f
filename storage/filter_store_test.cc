// The store's operations: reserve, add, check, delete, list, limits, and their error codes.
// Start-up is tested in recovery_test.cc, Export and Import in filter_transfer_test.cc.
#include "storage/filter_store.h"

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bloom/window.h"
#include "gtest/gtest.h"
#include "rocksdb/statistics.h"
#include "storage/filter_store_fixture.h"
#include "storage/format/encoding.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloom::FilterParams;

using bloomtest::Items;
using bloomtest::Views;

TEST_F(FilterStoreTest, ReserveAddContainAndStats) {
  absl::StatusOr<FilterStore::ReserveResult> reserved = store_->Reserve("users", {1000, 0.01});
  ASSERT_OK(reserved.status());
  EXPECT_TRUE(reserved->created);
  EXPECT_EQ(reserved->info.spec.expansion, 2u);
  EXPECT_EQ(reserved->info.stats.sub_filters.size(), 1u);

  const std::vector<std::string> items = {"alice", "bob", "alice"};
  absl::StatusOr<std::vector<bool>> added = store_->Add("users", Views(items), nullptr);
  ASSERT_OK(added.status());
  EXPECT_EQ(*added, (std::vector<bool>{true, true, false}));
  const std::vector<std::string> probe = {"alice", "carol"};
  absl::StatusOr<std::vector<bool>> present = store_->MightContain("users", Views(probe));
  ASSERT_OK(present.status());
  EXPECT_EQ(*present, (std::vector<bool>{true, false}));

  absl::StatusOr<FilterInfo> info = store_->Stats("users");
  ASSERT_OK(info.status());
  EXPECT_EQ(info->stats.items_added, 2u);
  EXPECT_EQ(info->checks, 2u);
  EXPECT_EQ(info->check_hits, 1u);
  EXPECT_GT(info->stats.fill_ratio, 0);
  EXPECT_NEAR(info->stats.estimated_cardinality, 2, 1);
}

// A filter keeps its memory charge in 32 bits of 32-byte units: one that would take 128 GiB or
// more (here about 150 GiB of bits, which a sub-filter may have) is refused before any memory
// is had, and nothing is created.
TEST_F(FilterStoreTest, AFilterOfMoreThan128GiBIsRefusedBeforeItsMemory) {
  absl::StatusOr<FilterStore::ReserveResult> huge =
      store_->Reserve("huge", {125'000'000'000, 0.01, 0, true});
  ASSERT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_NE(huge.status().message().find("128 GiB"), absl::string_view::npos) << huge.status();
  EXPECT_EQ(store_->Stats("huge").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->memory_used(), 0u);
  EXPECT_LT(kMaxResidentChargeBytes, uint64_t{128} << 30);
  EXPECT_GT(kMaxResidentChargeBytes, (uint64_t{128} << 30) - 64);
}

TEST_F(FilterStoreTest, ReserveIsIdempotentForTheSameSpecOnly) {
  ASSERT_OK(store_->Reserve("f", {1000, 0.01, 0, false}).status());
  absl::StatusOr<FilterStore::ReserveResult> again = store_->Reserve("f", {1000, 0.01, 2, false});
  ASSERT_OK(again.status());  // expansion 0 means 2: the same spec
  EXPECT_FALSE(again->created);
  absl::StatusOr<FilterStore::ReserveResult> other = store_->Reserve("f", {1000, 0.02});
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(other.status().message(), "error_rate=0.02"));
}

TEST_F(FilterStoreTest, ErrorsCarryTheirCodes) {
  const std::vector<std::string> items = {"x"};
  EXPECT_EQ(store_->Add("missing", Views(items), nullptr).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->MightContain("missing", Views(items)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Stats("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Delete("missing").code(), absl::StatusCode::kNotFound);
  for (const std::string& bad : {std::string(""), std::string(256, 'a'), std::string("a b"),
                                 std::string("caf\xc3\xa9"), std::string("x\0y", 3)}) {
    absl::Status s = store_->Reserve(bad, {10, 0.01}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "name")) << s;
  }
  EXPECT_OK(store_->Reserve(std::string(255, 'a'), {10, 0.01}).status());
  EXPECT_OK(store_->Reserve("A-z_0.9:/x", {10, 0.01}).status());
  absl::Status bad_spec = store_->Reserve("ok", {10, 1.5}).status();
  EXPECT_EQ(bad_spec.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad_spec.message(), "error_rate"));
}

TEST_F(FilterStoreTest, CreateIfMissingCreatesOnceEvenWhenRacing) {
  const FilterParams spec{500, 0.01};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<std::string> items = Items(absl::StrCat("t", t, "-"), 0, 100);
      ASSERT_OK(store_->Add("raced", Views(items), &spec).status());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(store_->num_filters(), 1u);
  for (int t = 0; t < 8; ++t) ExpectAllPresent("raced", Items(absl::StrCat("t", t, "-"), 0, 100));
  // An existing filter keeps its spec; create_if_missing does not change it.
  const FilterParams other{7, 0.5};
  const std::vector<std::string> more = {"z"};
  ASSERT_OK(store_->Add("raced", Views(more), &other).status());
  EXPECT_EQ(store_->Stats("raced")->spec.capacity, 500u);
}

TEST_F(FilterStoreTest, DeleteIsImmediateAndTheNameCanBeReservedAgain) {
  ASSERT_OK(store_->Reserve("gone", {1000, 0.01}).status());
  const std::vector<std::string> items = Items("g", 0, 1000);
  ASSERT_OK(store_->Add("gone", Views(items), nullptr).status());
  ASSERT_OK(store_->CheckpointAll());
  ASSERT_OK(store_->Add("gone", Views(Items("h", 0, 10)), nullptr).status());  // journal too
  const uint64_t memory_before = store_->memory_used();
  ASSERT_OK(store_->Delete("gone"));
  EXPECT_LT(store_->memory_used(), memory_before);
  EXPECT_EQ(store_->Stats("gone").status().code(), absl::StatusCode::kNotFound);
  ASSERT_OK(store_->Reserve("gone", {50, 0.1}).status());
  absl::StatusOr<std::vector<bool>> present = store_->MightContain("gone", Views(items));
  ASSERT_OK(present.status());
  int hits = 0;
  for (bool p : *present) hits += p;
  EXPECT_LT(hits, 150);  // the new filter is empty: only false positives at 10%
  ASSERT_OK(store_->Close());
  Open();
  EXPECT_EQ(store_->Stats("gone")->spec.capacity, 50u);
  EXPECT_EQ(store_->Stats("gone")->stats.items_added, 0u);
}

TEST_F(FilterStoreTest, MemoryLimitRefusesNewFiltersAndGrowth) {
  StoreOptions options;
  options.background_checkpoints = false;
  options.memory_limit_bytes = 64 << 10;
  Open(options);
  absl::Status too_big = store_->Reserve("big", {1'000'000, 0.01}).status();
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(too_big.message(), "memory limit")) << too_big;
  ASSERT_OK(store_->Reserve("grows", {10'000, 0.01}).status());  // ~12 KB
  absl::Status growth;
  for (int b = 0; b < 100 && growth.ok(); ++b) {
    growth = store_->Add("grows", Views(Items(absl::StrCat(b, "-"), 0, 1000)), nullptr).status();
  }
  EXPECT_EQ(growth.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_LE(store_->memory_used(), options.memory_limit_bytes);
}

// A checkpoint stores a page with few set words sparse (storage/format/page_encoding.h): a per-user
// filter with a few items takes tens of bytes in RocksDB, not its 1.3 KB of bits; a page that
// fills up is stored dense again; both load exactly, eagerly and lazily.
TEST_F(FilterStoreTest, PagesWithFewItemsAreStoredSparseAndLoadExactly) {
  ASSERT_OK(store_->Reserve("sparse", {1000, 0.01}).status());
  ASSERT_OK(store_->Add("sparse", Views(Items("s", 0, 3)), nullptr).status());
  ASSERT_OK(store_->Reserve("dense", {1000, 0.01}).status());
  ASSERT_OK(store_->Add("dense", Views(Items("d", 0, 1000)), nullptr).status());
  ASSERT_OK(store_->CheckpointAll());
  const uint64_t dense_bytes = store_->Stats("dense")->stats.size_bytes;
  auto stored_page_sizes = [&] {
    EXPECT_OK(store_->Close());
    std::vector<size_t> sizes;
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(dir_.path());
    EXPECT_OK(db.status());
    std::unique_ptr<rocksdb::Iterator> it = (*db)->Scan((*db)->blocks());
    for (it->SeekToFirst(); it->Valid(); it->Next()) sizes.push_back(it->value().size());
    std::sort(sizes.begin(), sizes.end());
    return sizes;
  };
  std::vector<size_t> sizes = stored_page_sizes();
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_LE(sizes[0], 1u + 3 * 7 * 10) << "3 items set at most 3k words";
  EXPECT_GT(sizes[1], 1000u) << "a full filter's page is dense";
  EXPECT_LE(sizes[1], dense_bytes);
  for (bool lazy : {false, true}) {
    StoreOptions options;
    options.lazy_start = lazy;
    options.background_checkpoints = false;
    Open(options);
    ExpectAllPresent("sparse", Items("s", 0, 3));
    ExpectAllPresent("dense", Items("d", 0, 1000));
    EXPECT_EQ(store_->Stats("sparse")->stats.items_added, 3u);
  }
  ASSERT_OK(store_->Add("sparse", Views(Items("s", 3, 900)), nullptr).status());
  ASSERT_OK(store_->CheckpointAll());
  sizes = stored_page_sizes();
  EXPECT_GT(sizes[0], 1000u) << "the sparse page filled up and is stored dense";
  Open();
  ExpectAllPresent("sparse", Items("s", 0, 900));
}

TEST_F(FilterStoreTest, NonScalingFullFilterRefusesTheWholeBatch) {
  ASSERT_OK(store_->Reserve("fixed", {100, 0.01, 0, true}).status());
  ASSERT_OK(store_->Add("fixed", Views(Items("a", 0, 95)), nullptr).status());
  absl::Status full = store_->Add("fixed", Views(Items("b", 0, 10)), nullptr).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store_->Stats("fixed")->stats.items_added, 95u);
  ASSERT_OK(store_->Close());
  Open();
  EXPECT_EQ(store_->Stats("fixed")->stats.items_added, 95u);
}

TEST_F(FilterStoreTest, SecondOpenOfTheSameDirectoryFailsFast) {
  StoreOptions options;
  options.data_dir = dir_.path();
  absl::StatusOr<std::unique_ptr<FilterStore>> second = FilterStore::Open(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(second.status().message(), "in use")) << second.status();
}

TEST_F(FilterStoreTest, ListPagesInNameOrderWithPrefix) {
  for (const char* name : {"user:3", "user:1", "team:1", "user:2", "user:10"}) {
    ASSERT_OK(store_->Reserve(name, {10, 0.01}).status());
  }
  absl::StatusOr<FilterStore::ListPage> page = store_->List("user:", 2, "");
  ASSERT_OK(page.status());
  ASSERT_EQ(page->filters.size(), 2u);
  EXPECT_EQ(page->filters[0].name, "user:1");
  EXPECT_EQ(page->filters[1].name, "user:10");
  page = store_->List("user:", 2, page->next_page_token);
  ASSERT_OK(page.status());
  ASSERT_EQ(page->filters.size(), 2u);
  EXPECT_EQ(page->filters[0].name, "user:2");
  EXPECT_EQ(page->filters[1].name, "user:3");
  EXPECT_TRUE(page->next_page_token.empty());
  EXPECT_EQ(store_->List("", 0, "")->filters.size(), 5u);
  EXPECT_EQ(store_->List("", 10, "bad token!").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FilterStoreTest, ListQueriesKeepTheNamesAcceptedAndCanListNamesAlone) {
  for (const char* name : {"a:1", "b:1", "a:2", "b:2", "a:3"}) {
    ASSERT_OK(store_->Reserve(name, {10, 0.01}).status());
    ASSERT_OK(store_->Add(name, {"x"}, nullptr).status());
  }
  ASSERT_OK(store_->Delete("a:2"));
  std::vector<std::string> asked;
  FilterStore::ListQuery query{.page_size = 1, .accept = [&](absl::string_view name) {
                                 asked.emplace_back(name);
                                 return absl::StartsWith(name, "a:");
                               }};
  // A page holds page_size accepted filters; the deleted one is not listed.
  absl::StatusOr<FilterStore::ListPage> page = store_->List(query);
  ASSERT_OK(page.status());
  ASSERT_EQ(page->filters.size(), 1u);
  EXPECT_EQ(page->filters[0].name, "a:1");
  EXPECT_EQ(page->filters[0].stats.items_added, 1u);
  query.page_token = page->next_page_token;
  query.page_size = 10;
  query.names_only = true;
  page = store_->List(query);
  ASSERT_OK(page.status());
  ASSERT_EQ(page->filters.size(), 1u);
  EXPECT_EQ(page->filters[0].name, "a:3");
  EXPECT_EQ(page->filters[0].stats.items_added, 0u) << "names only: no statistics";
  EXPECT_TRUE(page->next_page_token.empty());
  EXPECT_NE(std::find(asked.begin(), asked.end(), "b:2"), asked.end()) << "every name is asked";
}

TEST_F(FilterStoreTest, JournalCostsAboutEightBytesPerNewItem) {
  ASSERT_OK(store_->Reserve("cost", {200'000, 0.01}).status());
  rocksdb::Statistics* stats = store_->database().statistics();
  const uint64_t wal_before = stats->getTickerCount(rocksdb::WAL_FILE_BYTES);
  const int items = 100'000;
  for (int b = 0; b < items; b += 1000) {
    ASSERT_OK(
        store_->Add("cost", Views(Items(absl::StrCat("c", b, "-"), 0, 1000)), nullptr).status());
  }
  const double per_item =
      static_cast<double>(stats->getTickerCount(rocksdb::WAL_FILE_BYTES) - wal_before) / items;
  EXPECT_LE(per_item, 16.0);
  EXPECT_GE(per_item, 8.0);  // the hashes themselves: a sanity check of the measurement
}

// Issue 11, item 5: a filter created by its first Add (create_if_missing: the per-user case) is
// written with that add's journal record, in one RocksDB write, and survives a crash as one.
TEST_F(FilterStoreTest, CreatingAFilterOnItsFirstAddIsOneWrite) {
  rocksdb::Statistics* stats = store_->database().statistics();
  const bloom::FilterParams spec{1000, 0.01};
  auto writes = [&] {
    return stats->getTickerCount(rocksdb::WRITE_DONE_BY_SELF) +
           stats->getTickerCount(rocksdb::WRITE_DONE_BY_OTHER);
  };
  const uint64_t before = writes();
  for (int user = 0; user < 100; ++user) {
    ASSERT_OK(store_->Add(absl::StrCat("user:", user), Views(Items("seen", 0, 3)), &spec).status());
  }
  EXPECT_EQ(writes() - before, 100u);
  // A Reserve of an existing filter writes nothing; of a new one, its record.
  ASSERT_OK(store_->Reserve("user:0", spec).status());
  EXPECT_EQ(writes() - before, 100u);
  ASSERT_OK(store_->Reserve("reserved", spec).status());
  EXPECT_EQ(writes() - before, 101u);
  // An add of only items already present writes no journal record, and creates nothing new.
  ASSERT_OK(store_->Add("user:0", Views(Items("seen", 0, 3)), &spec).status());
  EXPECT_EQ(writes() - before, 101u);

  // A helper process creates "crash-created" by its first add, adds more, and is killed -9
  // before any checkpoint: the filter exists through its creating add's write (record and
  // pages, counting that add) and the journal records of the adds after it.
  uint64_t new_items = 0;
  const int acked =
      RunCrashHelper("crash-created", 3, 100, /*checkpoint_after=*/-1, false, &new_items);
  ASSERT_EQ(acked, 3);
  Open();
  for (int b = 0; b < acked; ++b) {
    ExpectAllPresent("crash-created", Items(absl::StrCat("crash-created-", b, "-"), 0, 100));
  }
  EXPECT_EQ(store_->Stats("crash-created")->stats.items_added, new_items);
  for (int user = 0; user < 100; ++user) {
    ExpectAllPresent(absl::StrCat("user:", user), Items("seen", 0, 3));
    EXPECT_EQ(store_->Stats(absl::StrCat("user:", user))->spec.capacity, 1000u);
  }
  EXPECT_EQ(store_->Stats("reserved")->stats.items_added, 0u);
  // New filters never reuse a generation: a fresh one is empty.
  ASSERT_OK(store_->Add("user:new", Views(Items("other", 0, 1)), &spec).status());
  absl::StatusOr<std::vector<bool>> fresh =
      store_->MightContain("user:new", Views(Items("seen", 0, 3)));
  ASSERT_OK(fresh.status());
  int hits = 0;
  for (bool present : *fresh) hits += present;
  EXPECT_EQ(hits, 0);
}

TEST_F(FilterStoreTest, ConcurrentAddsReadsAndCheckpointsLoseNothing) {
  StoreOptions options;
  options.checkpoint_interval = absl::Milliseconds(1);  // checkpoint all the time
  Open(options);
  ASSERT_OK(store_->Reserve("busy", {2000, 0.01}).status());
  std::atomic<bool> stop{false};
  std::thread checkpointer([&] {
    while (!stop.load()) ASSERT_OK(store_->CheckpointAll());
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      for (int b = 0; b < 40; ++b) {
        const std::vector<std::string> items = Items(absl::StrCat("w", t, "-", b, "-"), 0, 100);
        ASSERT_OK(store_->Add("busy", Views(items), nullptr).status());
        ExpectAllPresent("busy", items);
      }
    });
  }
  for (auto& writer : writers) writer.join();
  stop.store(true);
  checkpointer.join();
  const uint64_t items_added = store_->Stats("busy")->stats.items_added;
  ASSERT_OK(store_->Close());
  Open();
  for (int t = 0; t < 3; ++t) {
    for (int b = 0; b < 40; ++b)
      ExpectAllPresent("busy", Items(absl::StrCat("w", t, "-", b, "-"), 0, 100));
  }
  EXPECT_EQ(store_->Stats("busy")->stats.items_added, items_added);
}
TEST_F(FilterStoreTest, ClosedStoreAnswersFailedPrecondition) {
  ASSERT_OK(store_->Close());
  ASSERT_OK(store_->Close());  // idempotent
  EXPECT_EQ(store_->Stats("x").status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace storage

#include "storage/write/operation_batch.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rocksdb/statistics.h"
#include "storage/db/rocksdb_status.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloom::FilterParams;

using bloomtest::Items;
using bloomtest::Views;

class OperationBatchTest : public ::testing::Test {
 protected:
  void Open(bool background_checkpoints = false) {
    store_.reset();
    StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = background_checkpoints;
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
  }
  void SetUp() override { Open(); }

  std::unique_ptr<OperationBatch> Batch() {
    absl::StatusOr<std::unique_ptr<OperationBatch>> batch = store_->StartBatch();
    EXPECT_OK(batch.status());
    return batch.ok() ? *std::move(batch) : nullptr;
  }
  uint64_t Writes() {
    rocksdb::Statistics* stats = store_->database().statistics();
    return stats->getTickerCount(rocksdb::WRITE_DONE_BY_SELF) +
           stats->getTickerCount(rocksdb::WRITE_DONE_BY_OTHER);
  }
  void ExpectAllPresent(absl::string_view filter, const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<bool>> present = store_->MightContain(filter, Views(items));
    ASSERT_OK(present.status());
    for (size_t i = 0; i < items.size(); ++i) {
      ASSERT_TRUE((*present)[i]) << "false negative for " << items[i] << " in " << filter;
    }
  }

  bloomtest::TempDir dir_;
  std::unique_ptr<FilterStore> store_;
};

TEST_F(OperationBatchTest, AddsToManyFiltersAreOneWriteAndSurviveARestart) {
  const FilterParams spec{1000, 0.01};
  ASSERT_OK(store_->Reserve("existing", spec).status());
  const uint64_t before = Writes();
  {
    std::unique_ptr<OperationBatch> batch = Batch();
    std::vector<OperationBatch::Ticket> tickets;
    for (int user = 0; user < 100; ++user) {
      tickets.push_back(batch->Add(absl::StrCat("user:", user), Views(Items("seen", 0, 3)), &spec));
    }
    const OperationBatch::Ticket existing =
        batch->Add("existing", Views(Items("e", 0, 50)), nullptr);
    EXPECT_EQ(batch->pending_adds(), 101u % OperationBatch::kMaxFiltersPerWrite);
    // Not yet written: no reader sees the items (asked from another thread: this one must
    // not call the store while its batch lives).
    std::thread reader([&] {
      absl::StatusOr<std::vector<bool>> early =
          store_->MightContain("existing", Views(Items("e", 0, 50)));
      ASSERT_OK(early.status());
      EXPECT_LE(std::count(early->begin(), early->end(), true), 5);
    });
    reader.join();
    batch->Flush();
    // 101 filters, at most kMaxFiltersPerWrite per write.
    const size_t expected_writes =
        (101 + OperationBatch::kMaxFiltersPerWrite - 1) / OperationBatch::kMaxFiltersPerWrite;
    EXPECT_EQ(batch->writes(), expected_writes);
    for (OperationBatch::Ticket ticket : tickets) {
      absl::StatusOr<std::vector<bool>> added = batch->TakeResult(ticket);
      ASSERT_OK(added.status());
      EXPECT_EQ(*added, (std::vector<bool>{true, true, true}));
    }
    absl::StatusOr<std::vector<bool>> added = batch->TakeResult(existing);
    ASSERT_OK(added.status());
    EXPECT_EQ(std::count(added->begin(), added->end(), true), 50);
    EXPECT_FALSE(batch->TakeResult(existing).ok());  // once per ticket
  }
  EXPECT_EQ(Writes() - before,
            (101 + OperationBatch::kMaxFiltersPerWrite - 1) / OperationBatch::kMaxFiltersPerWrite);
  ExpectAllPresent("existing", Items("e", 0, 50));
  // Reopened without a checkpoint (the store's Close checkpoints; a reopen after kill -9 is the
  // crash test's): the creations and journal records came back from the one write.
  ASSERT_OK(store_->Close());
  Open();
  EXPECT_EQ(store_->num_filters(), 101u);
  for (int user = 0; user < 100; ++user) {
    ExpectAllPresent(absl::StrCat("user:", user), Items("seen", 0, 3));
    EXPECT_EQ(store_->Stats(absl::StrCat("user:", user))->stats.items_added, 3u);
  }
  EXPECT_EQ(store_->Stats("existing")->stats.items_added, 50u);
}

// Entries in the journal column family (records of adds not yet checkpointed).
size_t JournalEntries(Database& db) {
  std::unique_ptr<rocksdb::Iterator> it = db.Scan(db.journal());
  size_t entries = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++entries;
  EXPECT_OK(FromRocksDb(it->status(), "scanning the journal"));
  return entries;
}

TEST_F(OperationBatchTest, TheAddThatCreatesASmallFilterIsItsFirstCheckpoint) {
  const FilterParams spec{1000, 0.01};
  const FilterParams large{1'000'000, 0.01};  // 1.2 MB of bits: its first add is journalled
  {
    std::unique_ptr<OperationBatch> batch = Batch();
    for (int user = 0; user < 20; ++user) {
      batch->Add(absl::StrCat("user:", user), Views(Items("seen", 0, 3)), &spec);
    }
    batch->Add("large", Views(Items("l", 0, 5)), &large);
  }
  // The per-user filters wrote their record and page, no journal record: nothing is left for
  // a checkpoint (or an eviction) to write. Only the large filter journalled its add.
  EXPECT_EQ(JournalEntries(store_->database()), 1u);
  ASSERT_OK(store_->Add("large", Views(Items("l", 5, 10)), nullptr).status());
  ASSERT_OK(store_->CheckpointAll());
  const uint64_t before = Writes();
  ASSERT_OK(store_->CheckpointAll());
  EXPECT_EQ(Writes(), before);
  // A later add to a per-user filter journals as any add does.
  ASSERT_OK(store_->Add("user:0", Views(Items("later", 0, 2)), nullptr).status());
  EXPECT_EQ(JournalEntries(store_->database()), 1u);

  ASSERT_OK(store_->Close());
  Open();
  for (int user = 0; user < 20; ++user) {
    const std::string name = absl::StrCat("user:", user);
    ExpectAllPresent(name, Items("seen", 0, 3));
    absl::StatusOr<FilterInfo> info = store_->Stats(name);
    ASSERT_OK(info.status());
    EXPECT_EQ(info->stats.items_added, user == 0 ? 5u : 3u) << name;
    EXPECT_EQ(info->spec.capacity, 1000u);
  }
  ExpectAllPresent("user:0", Items("later", 0, 2));
  ExpectAllPresent("large", Items("l", 0, 10));
}

// Many threads create the same filters at once: one add creates each filter (and writes it
// as a checkpoint) while the others wait for it or journal after it; every acknowledged item
// is there, and items_added counts each item that was new exactly once.
TEST_F(OperationBatchTest, ConcurrentFirstAddsToOneNewFilterLoseNothing) {
  Open(/*background_checkpoints=*/true);
  const FilterParams spec{1000, 0.01};
  constexpr int kThreads = 4;
  constexpr int kFilters = 50;
  std::vector<std::vector<std::string>> acked(kThreads);
  std::atomic<uint64_t> new_items{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        absl::StatusOr<std::unique_ptr<OperationBatch>> batch = store_->StartBatch();
        ASSERT_OK(batch.status());
        std::vector<std::pair<OperationBatch::Ticket, std::string>> queued;
        for (int f = 0; f < kFilters; ++f) {
          const std::string name = absl::StrCat("race:", (f + t * 7) % kFilters);
          const std::string item = absl::StrCat("t", t, "-r", round, "-f", f);
          const std::vector<absl::string_view> items = {item};
          queued.emplace_back((*batch)->Add(name, items, &spec), name + "|" + item);
        }
        (*batch)->Flush();
        for (auto& [ticket, label] : queued) {
          absl::StatusOr<std::vector<bool>> added = (*batch)->TakeResult(ticket);
          ASSERT_TRUE(added.ok()) << label << ": " << added.status();
          new_items += std::count(added->begin(), added->end(), true);
          acked[t].push_back(label);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  auto check = [&] {
    uint64_t items_added = 0;
    for (int f = 0; f < kFilters; ++f) {
      absl::StatusOr<FilterInfo> info = store_->Stats(absl::StrCat("race:", f));
      ASSERT_OK(info.status());
      items_added += info->stats.items_added;
    }
    EXPECT_EQ(items_added, new_items.load());
    for (const std::vector<std::string>& labels : acked) {
      ASSERT_EQ(labels.size(), 5u * kFilters);
      for (const std::string& label : labels) {
        const size_t bar = label.find('|');
        ExpectAllPresent(label.substr(0, bar), {label.substr(bar + 1)});
      }
    }
  };
  check();
  ASSERT_OK(store_->Close());
  Open();
  check();
}

TEST_F(OperationBatchTest, ACheckSeesTheAddsQueuedBeforeIt) {
  ASSERT_OK(store_->Reserve("a", {1000, 0.01}).status());
  ASSERT_OK(store_->Reserve("b", {1000, 0.01}).status());
  std::unique_ptr<OperationBatch> batch = Batch();
  const std::vector<std::string> items = Items("x", 0, 20);
  const OperationBatch::Ticket ticket = batch->Add("a", Views(items), nullptr);
  // A check of another filter does not write the pending add.
  bool present[20];
  ASSERT_OK(batch->MightContainInto("b", Views(items), present));
  EXPECT_EQ(batch->pending_adds(), 1u);
  EXPECT_LE(std::count(present, present + 20, true), 2);
  // A check of its filter writes it first, and sees it.
  ASSERT_OK(batch->MightContainInto("a", Views(items), present));
  EXPECT_EQ(batch->pending_adds(), 0u);
  EXPECT_EQ(std::count(present, present + 20, true), 20);
  ASSERT_OK(batch->TakeResult(ticket).status());
  EXPECT_EQ(absl::StatusCode::kNotFound,
            batch->MightContainInto("missing", Views(items), present).code());
}

TEST_F(OperationBatchTest, ASecondAddToOneFilterSeesTheFirst) {
  const FilterParams spec{1000, 0.01};
  std::unique_ptr<OperationBatch> batch = Batch();
  const std::vector<std::string> items = Items("x", 0, 10);
  const OperationBatch::Ticket first = batch->Add("f", Views(items), &spec);
  const OperationBatch::Ticket second = batch->Add("f", Views(Items("x", 5, 15)), &spec);
  batch->Flush();
  EXPECT_EQ(batch->writes(), 2u);
  EXPECT_EQ(*batch->TakeResult(first), std::vector<bool>(10, true));
  absl::StatusOr<std::vector<bool>> again = batch->TakeResult(second);
  ASSERT_OK(again.status());
  EXPECT_EQ(std::count(again->begin(), again->begin() + 5, true), 0);  // added by the first
  EXPECT_EQ(std::count(again->begin() + 5, again->end(), true), 5);
  batch.reset();
  EXPECT_EQ(store_->Stats("f")->stats.items_added, 15u);
}

TEST_F(OperationBatchTest, EachAddGetsTheErrorAnAddAloneWouldGet) {
  ASSERT_OK(store_->Reserve("small", {10, 0.01, 0, /*non_scaling=*/true}).status());
  std::unique_ptr<OperationBatch> batch = Batch();
  const FilterParams bad_spec{0, 0.01};
  const OperationBatch::Ticket missing = batch->Add("missing", Views(Items("x", 0, 1)), nullptr);
  const OperationBatch::Ticket bad_name = batch->Add("bad name", Views(Items("x", 0, 1)), nullptr);
  const OperationBatch::Ticket bad = batch->Add("new", Views(Items("x", 0, 1)), &bad_spec);
  const OperationBatch::Ticket full = batch->Add("small", Views(Items("x", 0, 11)), nullptr);
  const OperationBatch::Ticket fits = batch->Add("small", Views(Items("x", 0, 10)), nullptr);
  batch->Flush();
  EXPECT_EQ(batch->TakeResult(missing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(batch->TakeResult(bad_name).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status bad_status = batch->TakeResult(bad).status();
  EXPECT_EQ(bad_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad_status.message(), "create_if_missing.capacity")) << bad_status;
  EXPECT_EQ(batch->TakeResult(full).status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_OK(batch->TakeResult(fits).status());
  batch.reset();
  EXPECT_EQ(store_->Stats("small")->stats.items_added, 10u);
  EXPECT_EQ(store_->Stats("new").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(OperationBatchTest, ABatchAfterCloseIsRefused) {
  ASSERT_OK(store_->Close());
  EXPECT_EQ(store_->StartBatch().status().code(), absl::StatusCode::kFailedPrecondition);
}

// Batches of adds over shared filters race checkpoints, Deletes and Reserves of the same
// names, and plain adds: nothing deadlocks (the test ends), and every acknowledged add to a
// filter that was never deleted reads as present, also after a restart.
TEST_F(OperationBatchTest, BatchesRaceCheckpointsDeletesAndPlainAdds) {
  Open(/*background_checkpoints=*/true);
  const FilterParams spec{200, 0.01};  // small: adds keep opening sub-filters
  constexpr int kKeptFilters = 8;
  constexpr int kThreads = 4;
  std::atomic<bool> stop{false};
  std::vector<std::vector<std::string>> acked(kThreads);
  std::atomic<size_t> acked_count{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; !stop.load(); ++round) {
        absl::StatusOr<std::unique_ptr<OperationBatch>> batch = store_->StartBatch();
        ASSERT_OK(batch.status());
        std::vector<std::pair<OperationBatch::Ticket, std::string>> queued;
        for (int op = 0; op < 12; ++op) {
          // Kept filters (never deleted) and doomed ones, in an order that differs per thread.
          const int which = (op * 5 + t * 3 + round) % (kKeptFilters + 4);
          const std::string name =
              which < kKeptFilters ? absl::StrCat("kept:", which) : absl::StrCat("doomed:", which);
          const std::string item = absl::StrCat("t", t, "-r", round, "-o", op);
          const std::vector<absl::string_view> items = {item};
          queued.emplace_back((*batch)->Add(name, items, &spec), name);
          if (op % 4 == 3) {
            bool present = false;
            const absl::Status checked = (*batch)->MightContainInto(name, items, &present);
            if (checked.ok()) {  // (a doomed filter may be deleted meanwhile)
              EXPECT_TRUE(present) << item;
            }
          }
          if (name.rfind("kept:", 0) == 0) queued.back().second = name + "|" + item;
        }
        (*batch)->Flush();
        for (auto& [ticket, label] : queued) {
          absl::StatusOr<std::vector<bool>> added = (*batch)->TakeResult(ticket);
          if (label.rfind("kept:", 0) == 0) {
            ASSERT_TRUE(added.ok()) << label << ": " << added.status();
            acked[t].push_back(label);
            acked_count.fetch_add(1);
          }
        }
      }
    });
  }
  // The race runs for a number of the deleter's rounds (each deletes, reserves, adds and
  // checkpoints while the batches run) and of acknowledged batch adds, not for a time: as much
  // racing on a slow machine, and on a busy one where the scheduler lets the deleter's 200
  // rounds finish before the batch threads have acknowledged a hundred adds.
  constexpr int kDeleterRounds = 200;
  constexpr size_t kAckedAdds = 200;
  std::atomic<int> deleter_rounds{0};
  std::thread deleter([&] {
    for (int i = 0; !stop.load(); ++i, ++deleter_rounds) {
      const std::string name = absl::StrCat("doomed:", kKeptFilters + i % 4);
      (void)store_->Delete(name);
      (void)store_->Reserve(name, spec);
      (void)store_->Add(absl::StrCat("kept:", i % kKeptFilters), {absl::StrCat("plain-", i)},
                        nullptr);
      ASSERT_OK(store_->CheckpointAll());
    }
  });
  EXPECT_TRUE(bloomtest::WaitFor(
      [&] { return deleter_rounds.load() >= kDeleterRounds && acked_count.load() >= kAckedAdds; },
      absl::Minutes(5)));
  stop.store(true);
  for (std::thread& thread : threads) thread.join();
  deleter.join();

  size_t total = 0;
  auto check_all = [&] {
    for (const std::vector<std::string>& labels : acked) {
      for (const std::string& label : labels) {
        const size_t bar = label.find('|');
        ExpectAllPresent(label.substr(0, bar), {label.substr(bar + 1)});
      }
      total += labels.size();
    }
  };
  check_all();
  EXPECT_GT(total, 100u);
  ASSERT_OK(store_->Close());
  Open();
  check_all();
}

}  // namespace
}  // namespace storage

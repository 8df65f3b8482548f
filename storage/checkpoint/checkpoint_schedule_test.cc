// The checkpointer's schedule through a FilterStore: it holds exactly the filters with changes
// to checkpoint, windowed filters and filters with an idle_ttl, and no change escapes it.
#include "storage/checkpoint/checkpoint_schedule.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloomtest::Items;
using bloomtest::Views;

// A filter outside any store, whose changes go to `schedule`: checks only (no database).
std::unique_ptr<StoredFilter> LoneFilter(const StoreContext* context) {
  FilterRecord record;
  record.generation = 1;
  record.seed = 7;
  record.spec = {1000, 0.01};
  const bloom::SubFilterShape first = *bloom::SubFilterShapeFor(record.spec, 0);
  record.sub_filters.push_back(
      {first.capacity, first.error_rate, first.layout.num_blocks, first.layout.hash_count, 0, 0});
  absl::StatusOr<std::unique_ptr<bloom::ScalableFilter>> built = StoredFilter::BuildFilter(record);
  EXPECT_OK(built.status());
  return std::make_unique<StoredFilter>("lone", record, *std::move(built), context, 0);
}

TEST(StoredFilterScheduleTest, TheFirstChangeSchedulesOnceAndARacingChangeKeepsItScheduled) {
  CheckpointSchedule schedule;
  StoreContext context;
  context.schedule = &schedule;
  std::unique_ptr<StoredFilter> filter = LoneFilter(&context);
  const uint64_t hashes[] = {1, 2, 3};
  bool present[3];
  EXPECT_FALSE(filter->HasUnpersistedChanges());

  ASSERT_OK(filter->MightContain(hashes, present));
  ASSERT_OK(filter->MightContain(hashes, present));
  EXPECT_TRUE(filter->HasUnpersistedChanges());
  EXPECT_EQ(schedule.sizes().changed, 1u);  // told once, not per change

  // A pass found changes (kept): nothing is told again however often it changes meanwhile.
  ASSERT_OK(filter->MightContain(hashes, present));
  EXPECT_EQ(schedule.sizes().changed, 1u);
  // A change made after the pass saw the filter clean but before it unscheduled it (here:
  // changes it never saw) makes Unschedule keep it: no later change would tell the schedule.
  EXPECT_TRUE(filter->Unschedule());
  filter->MarkChanged();  // so it is still scheduled, and this tells nobody
  EXPECT_EQ(schedule.sizes().changed, 1u);
}

// A changed filter is visited when its checkpoint is due (last checkpoint + interval), not by
// every pass before that; one reported overdue is visited by the next pass; one whose visit
// left its changes (a checkpoint that failed) again by the pass after.
TEST(StoredFilterScheduleTest, AChangedFilterIsVisitedWhenDueOrWhenReportedOverdue) {
  CheckpointSchedule schedule;
  StoreContext context;
  context.schedule = &schedule;
  const std::shared_ptr<StoredFilter> filter(LoneFilter(&context).release());
  const auto find = [&](absl::string_view name) {
    return name == filter->name() ? filter : nullptr;
  };
  int visits = 0;
  const auto visit = [&](const std::shared_ptr<StoredFilter>& visited) {
    EXPECT_EQ(visited, filter);
    ++visits;
    return true;  // checkpoints nothing: the changes stay
  };
  const uint64_t hashes[] = {1, 2, 3};
  bool present[3];
  ASSERT_OK(filter->MightContain(hashes, present));
  const absl::Duration interval = absl::Seconds(30);
  const absl::Time last = filter->last_checkpoint();
  const absl::Time never = absl::InfinitePast();  // no idle filters here

  for (int second = 1; second < 30; second += 7) {
    schedule.Pass(last + absl::Seconds(second), interval, never, find, visit);
  }
  EXPECT_EQ(visits, 0);
  EXPECT_EQ(schedule.sizes().changed, 1u);

  schedule.Overdue(filter->name());
  schedule.Pass(last + absl::Seconds(29), interval, never, find, visit);
  EXPECT_EQ(visits, 1);  // the report, once
  schedule.Pass(last + absl::Milliseconds(29'500), interval, never, find, visit);
  EXPECT_EQ(visits, 1);

  schedule.Pass(last + absl::Seconds(31), interval, never, find, visit);
  EXPECT_EQ(visits, 2);  // due
  schedule.Pass(last + absl::Seconds(32), interval, never, find, visit);
  EXPECT_EQ(visits, 3);  // its changes are still there: retried each pass
  EXPECT_EQ(schedule.sizes().changed, 1u);
}

class CheckpointScheduleTest : public ::testing::Test {
 protected:
  // `memory_limit_bytes` 0: none.
  void Open(absl::Duration checkpoint_interval, uint64_t memory_limit_bytes = 0) {
    store_.reset();
    StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = false;  // Pass() runs the checkpointer's passes
    options.checkpoint_interval = checkpoint_interval;
    options.memory_limit_bytes = memory_limit_bytes;
    options.clock = &clock_;
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
  }

  // One pass of the checkpointer, `later` after now (real time, which checkpoint intervals
  // count; idle_ttl counts by clock_).
  void Pass(absl::Duration later = absl::ZeroDuration()) {
    ASSERT_TRUE(store_->RunCheckpointPass(absl::Now() + later));
  }

  // A memory limit that holds about 700 small filters, and 5 rounds of one add to each of
  // kChurnFilters with `spec` (a pass after each): the last ~700 of a round stay resident
  // through a pass, and the next round evicts them. Returns the figures after the last pass.
  static constexpr int kChurnFilters = 1500;
  static constexpr uint64_t kChurnMemoryLimit = 700 * ResidentCharge(1472, 1);
  StoreFigures Churn(const bloom::FilterParams& spec) {
    for (int round = 0; round < 5; ++round) {
      for (int f = 0; f < kChurnFilters; ++f) {
        EXPECT_OK(store_->Add(absl::StrCat("feed:", f), Views(Items("x", round, round + 1)), &spec)
                      .status());
      }
      Pass();
    }
    const StoreFigures figures = store_->Figures();
    EXPECT_GT(figures.evictions, static_cast<uint64_t>(3 * kChurnFilters));
    return figures;
  }

  bloomtest::TempDir dir_;
  bloomtime::ManualClock clock_;
  std::unique_ptr<FilterStore> store_;
};

TEST_F(CheckpointScheduleTest, HoldsOnlyChangedFiltersUntilTheirCheckpoint) {
  Open(/*checkpoint_interval=*/absl::Hours(1));
  for (int f = 0; f < 100; ++f) {
    ASSERT_OK(store_->Reserve(absl::StrCat("user:", f), {1000, 0.01}).status());
  }
  // Created and unchanged: nothing for the checkpointer to visit.
  EXPECT_EQ(store_->CheckpointScheduleSizes().changed, 0u);

  ASSERT_OK(store_->Add("user:1", Views(Items("a", 0, 10)), nullptr).status());
  ASSERT_OK(store_->Add("user:1", Views(Items("b", 0, 10)), nullptr).status());
  ASSERT_OK(store_->Add("user:2", Views(Items("a", 0, 10)), nullptr).status());
  ASSERT_OK(store_->MightContain("user:3", Views(Items("a", 0, 10))).status());
  EXPECT_EQ(store_->CheckpointScheduleSizes().changed, 3u);  // each filter once

  // Not due for an hour: still scheduled after passes.
  Pass();
  Pass(absl::Minutes(59));
  EXPECT_EQ(store_->CheckpointScheduleSizes().changed, 3u);
  EXPECT_EQ(store_->Figures().checkpoints, 0u);

  // Due at once: checkpointed, then dropped.
  Open(/*checkpoint_interval=*/absl::ZeroDuration());  // a clean restart checkpoints all
  EXPECT_EQ(store_->CheckpointScheduleSizes().changed, 0u);
  ASSERT_OK(store_->Add("user:7", Views(Items("c", 0, 10)), nullptr).status());
  ASSERT_OK(store_->MightContain("user:8", Views(Items("c", 0, 10))).status());
  EXPECT_EQ(store_->CheckpointScheduleSizes().changed, 2u);
  Pass();  // checkpoints both
  Pass();  // finds them clean: drops them
  EXPECT_EQ(store_->CheckpointScheduleSizes().changed, 0u);
  EXPECT_EQ(store_->Figures().journal_pending_bytes, 0u);
  EXPECT_EQ(store_->Figures().checkpoints, 2u);
  // The check counters reached the record: they survive a restart that replays nothing.
  Open(absl::ZeroDuration());
  absl::StatusOr<FilterInfo> info = store_->Stats("user:8");
  ASSERT_OK(info.status());
  EXPECT_EQ(info->checks, 10u);
}

// A journal that grows as large as the bits (and 1 MiB) is checkpointed by the next pass,
// though the interval is an hour away: the add that makes it so reports it.
TEST_F(CheckpointScheduleTest, AnOverdueJournalIsCheckpointedBeforeTheInterval) {
  Open(/*checkpoint_interval=*/absl::Hours(1));
  ASSERT_OK(store_->Reserve("big", {200'000, 0.01}).status());
  // A first add, and a pass that takes the filter into the schedule, due in an hour.
  ASSERT_OK(store_->Add("big", Views(Items("first", 0, 10)), nullptr).status());
  Pass();
  EXPECT_EQ(store_->Figures().checkpoints, 0u);
  // 8 bytes of journal per new item: 140,000 items make 1.1 MB, more than the bits (234 KiB).
  for (int batch = 0; batch < 140; ++batch) {
    ASSERT_OK(
        store_->Add("big", Views(Items(absl::StrCat("b", batch, "-"), 0, 1000)), nullptr).status());
  }
  Pass();
  EXPECT_EQ(store_->Figures().checkpoints, 1u)
      << store_->Figures().journal_pending_bytes << " journal bytes pending";
  EXPECT_LT(store_->Figures().journal_pending_bytes, 1u << 20);
}

TEST_F(CheckpointScheduleTest, NoChangeRacingThePassesIsLeftUncheckpointed) {
  Open(/*checkpoint_interval=*/absl::ZeroDuration());  // every pass checkpoints what changed
  constexpr int kFilters = 20;
  for (int f = 0; f < kFilters; ++f) {
    ASSERT_OK(store_->Reserve(absl::StrCat("f", f), {100000, 0.01}).status());
  }
  // Writers and readers through 30 passes: changes land before, during and after each pass's
  // visits and its unscheduling of the filters it found clean.
  std::atomic<bool> stop{false};
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const std::string name = absl::StrCat("f", (i * 7 + t) % kFilters);
        const std::vector<std::string> items = Items(absl::StrCat("t", t, "-", i, "-"), 0, 3);
        if (t % 2 == 0) {
          EXPECT_OK(store_->Add(name, Views(items), nullptr).status());
        } else {
          EXPECT_OK(store_->MightContain(name, Views(items)).status());
        }
        if (i % 64 == 0) absl::SleepFor(absl::Milliseconds(1));
      }
    });
  }
  for (int pass = 0; pass < 30; ++pass) {
    Pass();
    absl::SleepFor(absl::Milliseconds(5));  // let the writers run between passes
  }
  stop = true;
  for (std::thread& thread : threads) thread.join();
  // Two more passes checkpoint every change and empty the schedule: a change lost by the
  // schedule would stay in the journal, pending, for good.
  Pass();
  Pass();
  const StoreFigures figures = store_->Figures();
  EXPECT_TRUE(figures.journal_pending_bytes == 0 &&
              figures.checkpoint_lag == absl::ZeroDuration() &&
              store_->CheckpointScheduleSizes().changed == 0)
      << store_->Figures().journal_pending_bytes << " journal bytes pending, "
      << store_->CheckpointScheduleSizes().changed << " filters scheduled";
  EXPECT_GT(store_->Figures().checkpoints, static_cast<uint64_t>(kFilters));
}

TEST_F(CheckpointScheduleTest, IdleFiltersWaitForTheirExpiryAndUseMovesIt) {
  Open(/*checkpoint_interval=*/absl::Seconds(30));
  bloom::FilterParams idle{1000, 0.01};
  idle.idle_ttl = absl::Minutes(10);
  for (int f = 0; f < 40; ++f) {
    ASSERT_OK(store_->Reserve(absl::StrCat("feed:", f), idle).status());
  }
  ASSERT_OK(store_->Reserve("plain", {1000, 0.01}).status());
  EXPECT_EQ(store_->CheckpointScheduleSizes().idle, 40u);

  clock_.Advance(absl::Minutes(6));
  for (int f = 0; f < 40; f += 2) {  // half of them used: they live 6 minutes longer
    ASSERT_OK(store_->MightContain(absl::StrCat("feed:", f), Views(Items("x", 0, 1))).status());
  }
  clock_.Advance(absl::Minutes(5));  // the other half idle for 11 minutes
  Pass();
  EXPECT_EQ(store_->Figures().filters_expired, 20u);
  for (int f = 0; f < 40; ++f) {
    EXPECT_EQ(store_->Stats(absl::StrCat("feed:", f)).status().code(),
              f % 2 == 0 ? absl::StatusCode::kOk : absl::StatusCode::kNotFound)
        << f;
  }
  // The used ones went back into the heap at their new expiry, and wait there.
  EXPECT_EQ(store_->CheckpointScheduleSizes().idle, 20u);
  Pass();
  EXPECT_EQ(store_->Figures().filters_expired, 20u);

  clock_.Advance(absl::Minutes(6));
  Pass();
  EXPECT_EQ(store_->Figures().filters_expired, 40u);
  EXPECT_EQ(store_->CheckpointScheduleSizes().idle, 0u);
  EXPECT_OK(store_->Stats("plain").status());
}

TEST_F(CheckpointScheduleTest, IdleEntriesOfEvictedFiltersDoNotPileUp) {
  // The filters resident at a pass go into the idle heap, and the next round evicts them.
  // Their expiry is an hour away, so without pruning the heap would keep an entry (and its
  // object's memory) per load until then: about 3,500 here.
  Open(/*checkpoint_interval=*/absl::Seconds(30), kChurnMemoryLimit);
  bloom::FilterParams idle{1000, 0.01};
  idle.idle_ttl = absl::Hours(1);
  const StoreFigures figures = Churn(idle);
  // At most twice the live entries at the last pruning (with a floor of 1,024).
  EXPECT_LE(store_->CheckpointScheduleSizes().idle, 2 * figures.resident_filters + 100);
  EXPECT_EQ(figures.filters_expired, 0u);
}

// The same for changed filters: each load below is changed by its add, those resident at a
// pass are taken into the schedule, due in an hour, and most are evicted long before. Without
// pruning their entries would pile up, one per such load.
TEST_F(CheckpointScheduleTest, ChangedEntriesOfEvictedFiltersDoNotPileUp) {
  Open(/*checkpoint_interval=*/absl::Hours(1), kChurnMemoryLimit);
  const StoreFigures figures = Churn({1000, 0.01});
  // 692 held against 692 resident here; 2,700 without pruning.
  EXPECT_LE(store_->CheckpointScheduleSizes().changed, 2 * figures.resident_filters + 100);
}

TEST_F(CheckpointScheduleTest, WindowedFiltersAreWatchedWhileResident) {
  Open(/*checkpoint_interval=*/absl::Seconds(30));
  bloom::FilterParams windowed{1000, 0.01, 0, false};
  windowed.window = absl::Hours(1);
  windowed.window_slices = 4;
  ASSERT_OK(store_->Reserve("w1", windowed).status());
  ASSERT_OK(store_->Reserve("w2", windowed).status());
  ASSERT_OK(store_->Reserve("plain", {1000, 0.01}).status());
  EXPECT_EQ(store_->CheckpointScheduleSizes().windowed, 2u);
  ASSERT_OK(store_->Delete("w1"));
  Pass();  // drops the deleted one
  EXPECT_EQ(store_->CheckpointScheduleSizes().windowed, 1u);
  // A restart watches the windowed filter again as it becomes resident.
  Open(absl::Seconds(30));
  ASSERT_OK(store_->Stats("w2").status());
  EXPECT_EQ(store_->CheckpointScheduleSizes().windowed, 1u);
}

}  // namespace
}  // namespace storage

// Windowed filters in the store: slices retired by checkpoints (memory and pages given back),
// windows that keep ageing across restarts and a kill -9, Export/Import keeping the ages,
// Reserve idempotent with the window fields. Every clock here is a ManualClock.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloomtest::Items;
using bloomtest::Views;

constexpr int64_t kWindowedStart = 1'700'000'000;  // crash_helper.cc's clock start

bloom::FilterParams WindowSpec(uint64_t capacity, absl::Duration window, uint32_t slices) {
  bloom::FilterParams spec{capacity, 0.01, 0, false};
  spec.window = window;
  spec.window_slices = slices;
  return spec;
}

class WindowedStoreTest : public ::testing::Test {
 protected:
  WindowedStoreTest() : clock_(absl::FromUnixSeconds(kWindowedStart)) { Open(); }

  void Open() {
    store_.reset();
    StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = false;
    options.clock = &clock_;
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  int CountPresent(absl::string_view name, const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<bool>> present = store_->MightContain(name, Views(items));
    EXPECT_TRUE(present.ok()) << present.status();
    if (!present.ok()) return -1;
    return static_cast<int>(std::count(present->begin(), present->end(), true));
  }

  // Copies filter `from` to a new filter `to` through an Export dump and an Import.
  absl::StatusOr<FilterInfo> ExportImport(absl::string_view from, absl::string_view to) {
    std::string dump;
    if (absl::Status exported = store_->Export(from,
                                               [&](absl::string_view chunk) {
                                                 dump.append(chunk.data(), chunk.size());
                                                 return absl::OkStatus();
                                               });
        !exported.ok()) {
      return exported;
    }
    absl::StatusOr<std::unique_ptr<PendingImport>> import = store_->BeginImport(to);
    if (!import.ok()) return import.status();
    if (absl::Status appended = (*import)->Append(dump); !appended.ok()) return appended;
    return store_->CommitImport(**import);
  }

  // Block keys stored for all filters (pages of retired slices must be gone).
  int CountPages() {
    store_.reset();
    rocksdb::DB* raw = nullptr;
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    std::vector<std::string> names;
    EXPECT_TRUE(rocksdb::DB::ListColumnFamilies({}, dir_.path(), &names).ok());
    for (const std::string& n : names) families.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    EXPECT_TRUE(rocksdb::DB::OpenForReadOnly({}, dir_.path(), families, &handles, &raw).ok());
    int pages = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] != "blocks") continue;
      std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator({}, handles[i]));
      for (it->SeekToFirst(); it->Valid(); it->Next()) ++pages;
    }
    for (auto* h : handles) raw->DestroyColumnFamilyHandle(h);
    delete raw;
    Open();
    return pages;
  }

  bloomtest::TempDir dir_;
  bloomtime::ManualClock clock_;
  std::unique_ptr<FilterStore> store_;
};

// A slice's overflow sub-filter is sized by the clock when it opens (bloom::
// SliceOverflowCapacity), so a restart must rebuild it from its record, not recompute it:
// after a restart (and a later slice's clock) it has the same shape, every item reads
// present, and Export/Import keeps it.
TEST_F(WindowedStoreTest, ASlicesSmallOverflowSubFilterSurvivesRestartsAsItWasMade) {
  const bloom::FilterParams spec = WindowSpec(8000, absl::Seconds(800), 8);  // 1,000 per 100 s
  ASSERT_OK(store_->Reserve("w", spec).status());
  const std::vector<std::string> steady = Items("steady", 1000);
  for (int i = 0; i < 1000; i += 100) {  // the slice's share over 99.9 s
    ASSERT_OK(
        store_->Add("w", Views({steady.begin() + i, steady.begin() + i + 100}), nullptr).status());
    clock_.Advance(absl::Milliseconds(9990));
  }
  const std::vector<std::string> extra = Items("extra", 10);
  ASSERT_OK(store_->Add("w", Views(extra), nullptr).status());
  auto overflow_capacity = [&]() -> uint64_t {
    absl::StatusOr<FilterInfo> info = store_->Stats("w");
    EXPECT_TRUE(info.ok()) << info.status();
    if (!info.ok() || info->stats.sub_filters.size() != 2) return 0;
    return info->stats.sub_filters[1].capacity;
  };
  ASSERT_EQ(overflow_capacity(), 32u);  // 1/32 of the slice's 1,000, not 2,000
  clock_.Advance(absl::Seconds(30));    // the next slice: a fresh sizing would differ
  Open();
  EXPECT_EQ(overflow_capacity(), 32u);
  EXPECT_EQ(CountPresent("w", steady), 1000);
  EXPECT_EQ(CountPresent("w", extra), 10);
  absl::StatusOr<FilterInfo> copy = ExportImport("w", "w-copy");
  ASSERT_OK(copy.status());
  ASSERT_EQ(copy->stats.sub_filters.size(), 2u);
  EXPECT_EQ(copy->stats.sub_filters[1].capacity, 32u);
  EXPECT_EQ(CountPresent("w-copy", extra), 10);
}

TEST_F(WindowedStoreTest, CheckpointsRetireExpiredSlicesAndGiveTheirMemoryBack) {
  const bloom::FilterParams spec = WindowSpec(8000, absl::Seconds(80), 8);  // 10 s slices
  ASSERT_OK(store_->Reserve("w", spec).status());
  for (int slice = 0; slice < 20; ++slice) {
    ASSERT_OK(store_->Add("w", Views(Items(absl::StrCat("s", slice, "-"), 100)), nullptr).status());
    clock_.Advance(absl::Seconds(10));
  }
  const uint64_t before = store_->Figures().memory_used_bytes;
  absl::StatusOr<FilterInfo> info = store_->Stats("w");
  ASSERT_OK(info.status());
  EXPECT_LE(info->stats.sub_filters.size(), 9u);  // expired slices are not reported
  ASSERT_TRUE(info->window_start.has_value());
  EXPECT_EQ(*info->window_start, clock_.Now() - absl::Seconds(80));
  EXPECT_EQ(info->spec.window_slices, 8u);
  ASSERT_OK(store_->CheckpointAll());
  const uint64_t after = store_->Figures().memory_used_bytes;
  EXPECT_LT(after, before);  // 11+ slices freed
  EXPECT_EQ(CountPresent("w", Items("s19-", 100)), 100);
  EXPECT_EQ(CountPresent("w", Items("s12-", 100)), 100);  // added 80 s ago: in the window
  EXPECT_LE(CountPresent("w", Items("s5-", 100)), 5);     // long gone
  // The pages on disk are the live slices' only (each 100-item slice fits one page).
  EXPECT_LE(CountPages(), 9);
  // Reopened: the same answers, the retired slices stay retired.
  EXPECT_EQ(CountPresent("w", Items("s19-", 100)), 100);
  EXPECT_LE(CountPresent("w", Items("s5-", 100)), 5);
}

TEST_F(WindowedStoreTest, AWindowKeepsAgeingWhileTheServerIsDown) {
  ASSERT_OK(store_->Reserve("w", WindowSpec(1000, absl::Hours(24), 8)).status());
  ASSERT_OK(store_->Add("w", Views(Items("old", 200)), nullptr).status());
  clock_.Advance(absl::Hours(20));
  ASSERT_OK(store_->Add("w", Views(Items("new", 200)), nullptr).status());
  store_.reset();                  // clean shutdown
  clock_.Advance(absl::Hours(7));  // "old" is 27 h old, "new" 7 h
  Open();
  EXPECT_LE(CountPresent("w", Items("old", 200)), 10);
  EXPECT_EQ(CountPresent("w", Items("new", 200)), 200);
  clock_.Advance(absl::Hours(24 * 7));  // a week later everything is gone
  Open();
  // Expired slices are not even loaded: the filter takes its bookkeeping only.
  EXPECT_EQ(store_->Figures().memory_used_bytes, kResidentFilterOverheadBytes);
  EXPECT_LE(CountPresent("w", Items("new", 200)), 10);
  ASSERT_OK(store_->CheckpointAll());
  absl::StatusOr<FilterInfo> info = store_->Stats("w");
  ASSERT_OK(info.status());
  EXPECT_EQ(info->stats.sub_filters.size(), 0u);
  EXPECT_EQ(info->stats.items_added, 0u);
  EXPECT_EQ(CountPages(), 0);
  // Still a working filter.
  ASSERT_OK(store_->Add("w", Views(Items("later", 10)), nullptr).status());
  EXPECT_EQ(CountPresent("w", Items("later", 10)), 10);
  Open();
  EXPECT_EQ(CountPresent("w", Items("later", 10)), 10);
}

TEST_F(WindowedStoreTest, ReserveIsIdempotentWithTheWindowFields) {
  const bloom::FilterParams spec = WindowSpec(1000, absl::Hours(1), 0);
  absl::StatusOr<FilterStore::ReserveResult> first = store_->Reserve("w", spec);
  ASSERT_OK(first.status());
  EXPECT_TRUE(first->created);
  absl::StatusOr<FilterStore::ReserveResult> again = store_->Reserve("w", spec);
  ASSERT_OK(again.status());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(store_->Reserve("w", WindowSpec(1000, absl::Hours(2), 0)).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->Reserve("w", WindowSpec(1000, absl::Hours(1), 4)).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->Reserve("w", bloom::FilterParams{1000, 0.01}).status().code(),
            absl::StatusCode::kAlreadyExists);
  // A window with nanoseconds is stored to the microsecond: still the same spec after a restart.
  bloom::FilterParams fine = WindowSpec(1000, absl::Hours(1) + absl::Nanoseconds(1500), 0);
  ASSERT_OK(store_->Reserve("fine", fine).status());
  Open();
  absl::StatusOr<FilterStore::ReserveResult> after_restart = store_->Reserve("fine", fine);
  ASSERT_OK(after_restart.status());
  EXPECT_FALSE(after_restart->created);
  EXPECT_EQ(after_restart->info.spec.window, absl::Hours(1) + absl::Microseconds(1));
  bloom::FilterParams bad = WindowSpec(1000, absl::Milliseconds(10), 0);
  absl::Status refused = store_->Reserve("x", bad).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.message(), "spec.window")) << refused;
}

TEST_F(WindowedStoreTest, ExportImportKeepsTheWindowAndItsAges) {
  ASSERT_OK(store_->Reserve("w", WindowSpec(1000, absl::Seconds(100), 4)).status());
  ASSERT_OK(store_->Add("w", Views(Items("a", 100)), nullptr).status());
  clock_.Advance(absl::Seconds(60));
  ASSERT_OK(store_->Add("w", Views(Items("b", 100)), nullptr).status());
  absl::StatusOr<FilterInfo> copied = ExportImport("w", "copy");
  ASSERT_OK(copied.status());
  EXPECT_EQ(copied->spec, store_->Stats("w")->spec);
  EXPECT_EQ(CountPresent("copy", Items("a", 100)), 100);
  clock_.Advance(absl::Seconds(70));  // "a" is 130 s old (> 100 * 1.25), "b" 70 s
  for (const char* name : {"w", "copy"}) {
    EXPECT_LE(CountPresent(name, Items("a", 100)), 5) << name;
    EXPECT_EQ(CountPresent(name, Items("b", 100)), 100) << name;
  }
}

// Adds, checks, Stats and Exports race checkpoints that retire slices while the clock runs
// (for the sanitizers: a retired slice must never be read after it is freed).
TEST_F(WindowedStoreTest, OperationsRaceSliceRetirement) {
  ASSERT_OK(store_->Reserve("w", WindowSpec(2000, absl::Seconds(8), 8)).status());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const std::vector<std::string> items = {absl::StrCat("t", t, "-", i)};
        if (!store_->Add("w", Views(items), nullptr).ok()) ++failures;
        // Just added: inside the window whatever the clock did meanwhile (it moves 1 s at a
        // time, far less than the 8 s window).
        absl::StatusOr<std::vector<bool>> present = store_->MightContain("w", Views(items));
        if (!present.ok() || !(*present)[0]) ++failures;
        if (i % 50 == 0 && !store_->Stats("w").ok()) ++failures;
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop.load()) {
      absl::Status exported =
          store_->Export("w", [](absl::string_view) { return absl::OkStatus(); });
      if (!exported.ok()) ++failures;
    }
  });
  for (int step = 0; step < 60; ++step) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_OK(store_->CheckpointAll());
    absl::SleepFor(absl::Milliseconds(5));
  }
  stop.store(true);
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(store_->Figures().slices_retired, 40u);  // a 1 s slice retires about every step
}

// A crash (kill -9) of a process adding to a windowed filter, then restarts: at the crash's
// instant every acknowledged batch inside the window reads present; long after, none does, and
// the retired slices' pages are gone.
TEST_F(WindowedStoreTest, AcknowledgedAddsInTheWindowSurviveKillNine) {
  store_.reset();  // the helper needs the directory lock
  constexpr int kBatches = 40, kBatchSize = 50, kWindow = 100, kAdvance = 10;
  const std::string command = absl::StrCat(CRASH_HELPER_PATH, " ", dir_.path(), " w ", kBatches,
                                           " ", kBatchSize, " 25 0 ", kWindow, " ", kAdvance);
  FILE* out = popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr);
  int acked = 0;
  char line[128];
  while (std::fgets(line, sizeof(line), out) != nullptr) {
    if (absl::StartsWith(line, "acked ")) ++acked;
  }
  const int status = pclose(out);
  ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL))
      << status;
  ASSERT_EQ(acked, kBatches);
  // Batch b was added at kWindowedStart + b * kAdvance; the helper died at + kBatches * kAdvance.
  clock_.Set(absl::FromUnixSeconds(kWindowedStart + kBatches * kAdvance));
  Open();
  auto batch_items = [&](int b) {
    std::vector<std::string> items;
    for (int i = 0; i < kBatchSize; ++i) items.push_back(absl::StrCat("w-", b, "-", i));
    return items;
  };
  for (int b = 0; b < kBatches; ++b) {
    const int64_t age = (kBatches - b) * kAdvance;
    const int present = CountPresent("w", batch_items(b));
    if (age <= kWindow) {
      EXPECT_EQ(present, kBatchSize) << "batch " << b << " (age " << age << " s)";
    } else if (age >= kWindow + kWindow / 4 + kAdvance) {
      EXPECT_LE(present, 3) << "batch " << b << " (age " << age << " s)";
    }
  }
  // A restart long after: everything expired; the first checkpoint retires it all.
  clock_.Advance(absl::Hours(24 * 7));
  Open();
  for (int b = 0; b < kBatches; ++b) EXPECT_LE(CountPresent("w", batch_items(b)), 3) << b;
  ASSERT_OK(store_->CheckpointAll());
  EXPECT_EQ(CountPages(), 0);
}

// A large window keeps its slices interleaved in one arena (bloom/slice_arena.h): charged whole
// from its creation, its slices' pages written and loaded through the interleaving, across a
// restart and a retirement, and exported and imported like any filter.
TEST_F(WindowedStoreTest, ALargeWindowsArenaIsChargedWholeAndItsSlicesReloadExactly) {
  const bloom::FilterParams spec = *bloom::NormalizeSpec(WindowSpec(2'000'000, absl::Hours(8), 8));
  const absl::optional<bloom::ArenaShape> arena = bloom::ArenaShapeFor(spec);
  ASSERT_TRUE(arena.has_value());
  ASSERT_OK(store_->Reserve("big", spec).status());
  EXPECT_EQ(store_->Figures().memory_used_bytes, ResidentCharge(arena->bytes(), 1));
  for (int slice = 0; slice < 4; ++slice) {
    if (slice > 0) clock_.Advance(absl::Hours(1));
    ASSERT_OK(
        store_->Add("big", Views(Items(absl::StrCat("s", slice, "-"), 3000)), nullptr).status());
  }
  // Three more slices, each a sub-filter's bookkeeping and no bits of its own.
  EXPECT_EQ(store_->Figures().memory_used_bytes, ResidentCharge(arena->bytes(), 4));
  ASSERT_OK(store_->CheckpointAll());
  store_.reset();
  Open();
  for (int slice = 0; slice < 4; ++slice) {
    EXPECT_EQ(CountPresent("big", Items(absl::StrCat("s", slice, "-"), 3000)), 3000) << slice;
  }
  EXPECT_EQ(store_->Figures().memory_used_bytes, ResidentCharge(arena->bytes(), 4));
  EXPECT_LE(CountPresent("big", Items("never-", 3000)), 10);

  // Slices 0 and 1 expire (slice s at s + 1 h + 8 h); the checkpoint retires them, and their
  // slots serve new slices.
  clock_.Advance(absl::Hours(7));
  ASSERT_OK(store_->CheckpointAll());
  EXPECT_EQ(store_->Figures().memory_used_bytes, ResidentCharge(arena->bytes(), 2));
  ASSERT_OK(store_->Add("big", Views(Items("late-", 3000)), nullptr).status());
  EXPECT_LE(CountPresent("big", Items("s1-", 3000)), 10);
  EXPECT_EQ(CountPresent("big", Items("s3-", 3000)), 3000);
  EXPECT_EQ(CountPresent("big", Items("late-", 3000)), 3000);
  // Unpersisted adds of a slot come back from the journal after a restart too.
  store_.reset();
  Open();
  EXPECT_EQ(CountPresent("big", Items("s2-", 3000)), 3000);
  EXPECT_EQ(CountPresent("big", Items("late-", 3000)), 3000);

  // Export gathers each slice's pages out of the interleaving; Import scatters them back.
  ASSERT_OK(ExportImport("big", "copy").status());
  for (const char* prefix : {"s2-", "s3-", "late-"}) {
    EXPECT_EQ(CountPresent("copy", Items(prefix, 3000)), 3000) << prefix;
  }
  EXPECT_LE(CountPresent("copy", Items("never-", 3000)), 10);
}

}  // namespace
}  // namespace storage

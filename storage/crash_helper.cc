// Test helper for filter_store_test: opens a store, adds batches of items, prints
// "acked <batch> <items new>" after each acknowledged Add, optionally checkpoints, then kills
// itself with SIGKILL (a crash: no destructor, no Close, no flush).
//
// Usage: storage_crash_helper DIR FILTER BATCHES BATCH_SIZE CHECKPOINT_AFTER_BATCH SYNC
//                             [WINDOW_SECONDS ADVANCE_SECONDS]
//        storage_crash_helper DIR --merge TARGET_ITEMS SOURCE_ITEMS
//        storage_crash_helper DIR --cuckoo ROUNDS
// The --cuckoo form (cuckoo_store_test): a scaling CUCKOO filter "c" (capacity 1000, so it
// grows); round r adds "c-<r>-<i>" for i < 100, then removes "c-<r-1>-<i>" for i < 50, and
// prints "acked <r>"; a second thread checkpoints all the while, so the kill lands during
// checkpoints as well as writes.
// The second form (filter_merge_test): reserves "target" and "source" like it, adds items
// "t-<i>" and "s-<i>" to them, merges the source into the target, prints "merged", and dies.
// With WINDOW_SECONDS the filter has a sliding window of that length and the store a manual
// clock that starts at kWindowedStart and moves ADVANCE_SECONDS after each batch, so batch b
// is added at kWindowedStart + b * ADVANCE_SECONDS (windowed_store_test knows when).
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "storage/filter_store.h"

namespace {
constexpr int64_t kWindowedStart = 1'700'000'000;
}  // namespace

// The --merge form.
int MergeThenDie(const std::string& dir, int target_items, int source_items) {
  storage::StoreOptions options;
  options.data_dir = dir;
  options.background_checkpoints = false;
  auto store = storage::FilterStore::Open(options);
  if (!store.ok()) return 1;
  auto items = [](const std::string& prefix, int n) {
    std::vector<std::string> out;
    out.reserve(n);
    for (int i = 0; i < n; ++i) out.push_back(prefix + std::to_string(i));
    return out;
  };
  const std::vector<std::string> target = items("t-", target_items);
  const std::vector<std::string> source = items("s-", source_items);
  const std::vector<absl::string_view> target_views(target.begin(), target.end());
  const std::vector<absl::string_view> source_views(source.begin(), source.end());
  const bool merged = (*store)->Reserve("target", {10'000, 0.01}).ok() &&
                      (*store)->ReserveLike("source", "target").ok() &&
                      (*store)->Add("target", target_views, nullptr).ok() &&
                      (*store)->Add("source", source_views, nullptr).ok() &&
                      (*store)->Merge("target", {"source"}).ok();
  if (!merged) return 1;
  std::printf("merged\n");
  std::fflush(stdout);
  std::raise(SIGKILL);
  return 3;  // unreachable
}

// The --cuckoo form.
int CuckooThenDie(const std::string& dir, int rounds) {
  storage::StoreOptions options;
  options.data_dir = dir;
  options.background_checkpoints = false;
  auto store = storage::FilterStore::Open(options);
  if (!store.ok()) return 1;
  bloom::FilterParams spec{1000, 0.01};
  spec.kind = bloom::FilterKind::kCuckoo;
  if (!(*store)->Reserve("c", spec).ok()) return 1;
  std::atomic<bool> stop{false};
  std::thread checkpointer([&] {
    while (!stop.load()) (*store)->CheckpointAll().IgnoreError();
  });
  auto round_items = [](int round, int n) {
    std::vector<std::string> out;
    out.reserve(n);
    for (int i = 0; i < n; ++i) {
      out.push_back("c-" + std::to_string(round) + "-" + std::to_string(i));
    }
    return out;
  };
  for (int r = 0; r < rounds; ++r) {
    const std::vector<std::string> added = round_items(r, 100);
    const std::vector<absl::string_view> added_views(added.begin(), added.end());
    if (!(*store)->Add("c", added_views, nullptr).ok()) return 1;
    if (r > 0) {
      const std::vector<std::string> gone = round_items(r - 1, 50);
      const std::vector<absl::string_view> gone_views(gone.begin(), gone.end());
      if (!(*store)->RemoveItems("c", gone_views).ok()) return 1;
    }
    std::printf("acked %d\n", r);
    std::fflush(stdout);
  }
  std::raise(SIGKILL);
  return 3;  // unreachable
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[2]) == "--cuckoo") {
    return CuckooThenDie(argv[1], std::atoi(argv[3]));
  }
  if (argc == 5 && std::string(argv[2]) == "--merge") {
    return MergeThenDie(argv[1], std::atoi(argv[3]), std::atoi(argv[4]));
  }
  if (argc != 7 && argc != 9) {
    std::fprintf(stderr,
                 "usage: %s DIR FILTER BATCHES BATCH_SIZE CHECKPOINT_AFTER SYNC "
                 "[WINDOW_SECONDS ADVANCE_SECONDS]\n",
                 argv[0]);
    return 2;
  }
  const int window_seconds = argc == 9 ? std::atoi(argv[7]) : 0;
  const int advance_seconds = argc == 9 ? std::atoi(argv[8]) : 0;
  bloomtime::ManualClock clock(absl::FromUnixSeconds(kWindowedStart));
  storage::StoreOptions options;
  options.data_dir = argv[1];
  options.sync = std::string(argv[6]) == "1";
  options.background_checkpoints = false;
  if (window_seconds > 0) options.clock = &clock;
  const std::string filter = argv[2];
  const int batches = std::atoi(argv[3]);
  const int batch_size = std::atoi(argv[4]);
  const int checkpoint_after = std::atoi(argv[5]);
  auto store = storage::FilterStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    return 1;
  }
  // Small capacity: the filter grows sub-filters during the run.
  bloom::FilterParams spec{static_cast<uint64_t>(batch_size) * 2, 0.01, 2, false};
  if (window_seconds > 0) {
    spec.window = absl::Seconds(window_seconds);
    spec.window_slices = 4;
  }
  for (int b = 0; b < batches; ++b) {
    std::vector<std::string> items;
    items.reserve(batch_size);
    for (int i = 0; i < batch_size; ++i) {
      items.push_back(filter + "-" + std::to_string(b) + "-" + std::to_string(i));
    }
    std::vector<absl::string_view> views(items.begin(), items.end());
    auto added = (*store)->Add(filter, views, &spec);
    if (!added.ok()) {
      std::fprintf(stderr, "add: %s\n", added.status().ToString().c_str());
      return 1;
    }
    std::printf("acked %d %ld\n", b,
                static_cast<long>(std::count(added->begin(), added->end(), true)));
    std::fflush(stdout);
    clock.Advance(absl::Seconds(advance_seconds));
    if (b == checkpoint_after) {
      if (absl::Status s = (*store)->CheckpointAll(); !s.ok()) return 1;
      std::printf("checkpointed %d\n", b);
      std::fflush(stdout);
    }
  }
  std::raise(SIGKILL);
  return 3;  // unreachable
}

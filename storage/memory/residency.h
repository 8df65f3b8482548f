// The state of memory as a cache (FilterStore's filter_store_residency.cc): filters on disk only,
// the evictor's queue of victims and its wake-ups, and the counters Figures() reports.
//
// FilterStore holds one and its residency methods use it; it has no behaviour of its own.
//
// Thread-safety: the atomics may be used from any thread; every other field says which mutex
// guards it.
#ifndef STORAGE_MEMORY_RESIDENCY_H_
#define STORAGE_MEMORY_RESIDENCY_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "common/blocking_mutex.h"
#include "common/mutex.h"

namespace storage {

struct ResidencyState {
  // Whether some filter may be on disk only: then a name missing from memory is looked up in
  // RocksDB. Set before the first filter leaves memory; never cleared.
  std::atomic<bool> may_have_cold{false};
  std::atomic<int64_t> cold_filters{0};
  std::atomic<uint64_t> evictions{0};  // since start
  std::atomic<uint64_t> loads{0};      // cold filters loaded on use, since start
  std::atomic<int64_t> load_micros{0};
  // Generations of cold filters that had journal records at start-up (maybe after their
  // checkpoint): their loads replay the journal. A filter evicted since has none after its
  // checkpoint (eviction checkpoints it with no add in flight).
  bloomsync::Mutex cold_journaled_mu;
  absl::flat_hash_set<uint64_t> cold_journaled ABSL_GUARDED_BY(cold_journaled_mu);

  bloomsync::BlockingMutex round_mu;  // one EvictToBudget round at a time
  // The oldest resident filters when EvictToBudget last scanned them all, oldest last, for
  // this and the next rounds. Names, not pointers: a kept pointer would
  // keep a deleted filter's memory.
  struct EvictionCandidate {
    uint32_t last_used;  // its recency tick at the scan (used since, if it differs now)
    uint32_t age;        // ticks from the scan's now back to last_used
    std::string name;
  };
  std::vector<EvictionCandidate> eviction_queue ABSL_GUARDED_BY(round_mu);

  bloomsync::BlockingMutex evict_mu;  // guards evict_requested, evict_stop and the waits below
  bloomsync::CondVar evict_cv;        // wakes the evictor
  bloomsync::CondVar evicted_cv;      // wakes WaitForRoom
  bool evict_requested ABSL_GUARDED_BY(evict_mu) = false;
  bool evict_stop ABSL_GUARDED_BY(evict_mu) = false;
};

}  // namespace storage

#endif  // STORAGE_MEMORY_RESIDENCY_H_

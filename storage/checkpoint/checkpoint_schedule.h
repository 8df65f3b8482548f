// CheckpointSchedule: which resident filters the checkpointer visits in its once-a-second pass,
// so that a pass costs in proportion to the filters that need one, not to every resident
// filter: an idle server costs nothing however many filters it holds (store_benchmark
// BM_IdleCheckpointer measures a pass).
//
// Three kinds of filter need the checkpointer:
//   - changed ones: adds journalled or checks counted since their last checkpoint. A filter
//     reports its first change itself (StoredFilter::MarkChanged calls Changed() with its name,
//     once until it is unscheduled); a pass looks the name up once and keeps the filter, by a
//     weak reference, in a min-heap by when its checkpoint is due (its last checkpoint + the
//     interval), visiting it then, and again after each interval until a visit finds nothing
//     left to checkpoint. A filter whose journal grows past its early-checkpoint size before
//     that reports it (Overdue()) and is visited by the next pass. So under writes to many
//     filters a pass visits the ones due, not all that changed;
//   - windowed ones: their slices expire with time, changed or not: visited every pass while
//     resident;
//   - ones with an idle_ttl: visited when they would expire, from a min-heap by expiry; one
//     used meanwhile goes back in with its new expiry.
// The store registers the last two kinds when a filter becomes resident (Watch), and a filter
// that arrives with unpersisted changes (a journal replayed on load) is reported as changed.
//
// Weak references throughout: a filter that is deleted or evicted is freed at once (its
// object's memory, not its bits, waits for the pass that drops the reference).
//
// Thread-safety: Changed(), Overdue() and Watch() may be called from any thread; Pass() from
// one thread at a time (the checkpointer), concurrently with them.
#ifndef STORAGE_CHECKPOINT_CHECKPOINT_SCHEDULE_H_
#define STORAGE_CHECKPOINT_CHECKPOINT_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace storage {

class StoredFilter;

class CheckpointSchedule {
 public:
  // `name`'s filter has changes to checkpoint (called by the filter, on its first change).
  void Changed(absl::string_view name);
  // `name`'s filter's journal is as large as it may grow before its checkpoint is due
  // (StoredFilter::JournalOverdue): the next pass visits it.
  void Overdue(absl::string_view name);
  // A filter just became resident: windowed ones and ones with an idle_ttl are watched while
  // they live; one with unpersisted changes is scheduled as changed.
  void Watch(const std::shared_ptr<StoredFilter>& filter);

  // One pass: calls `visit` for every changed filter whose checkpoint is due at `now` (its
  // last checkpoint + `interval`, or an overdue journal), every windowed one, and every one
  // with an idle_ttl whose expiry is at or before `idle_now` (the store's clock). `find`
  // looks a reported filter's name up among the resident filters. `visit` returns false to
  // end the pass at once (the store is closing); what was not visited is visited by the next
  // pass.
  void Pass(absl::Time now, absl::Duration interval, absl::Time idle_now,
            absl::FunctionRef<std::shared_ptr<StoredFilter>(absl::string_view)> find,
            absl::FunctionRef<bool(const std::shared_ptr<StoredFilter>&)> visit);

  // What the next pass will visit at least (for tests and metrics): changed filters, counting
  // names not looked up yet, and watched windowed and idle ones.
  struct Sizes {
    size_t changed = 0;
    size_t windowed = 0;
    size_t idle = 0;
  };
  Sizes sizes() const;

 private:
  struct IdleEntry {
    int64_t expires_micros;  // Unix microseconds by the store's clock
    std::weak_ptr<StoredFilter> filter;
  };
  // Min-heap order for std::push_heap / pop_heap.
  static bool LaterExpiry(const IdleEntry& a, const IdleEntry& b) {
    return a.expires_micros > b.expires_micros;
  }
  struct DueEntry {
    int64_t due_micros;       // Unix microseconds, real time
    const StoredFilter* key;  // changed_'s
    std::weak_ptr<StoredFilter> filter;
  };
  static bool LaterDue(const DueEntry& a, const DueEntry& b) { return a.due_micros > b.due_micros; }
  // When `filter`'s checkpoint is due: now if its journal is overdue, else its last
  // checkpoint + `interval`.
  static int64_t DueMicros(const StoredFilter& filter, int64_t now_micros, absl::Duration interval);
  // Moves what Changed(), Overdue() and Watch() queued into the pass's own sets; returns the
  // overdue filters, to visit now.
  std::vector<std::shared_ptr<StoredFilter>> TakeQueued(
      int64_t now_micros, absl::Duration interval,
      absl::FunctionRef<std::shared_ptr<StoredFilter>(absl::string_view)> find)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  void PushIdle(const std::shared_ptr<StoredFilter>& filter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);

  mutable bloomsync::Mutex queue_mu_ ABSL_ACQUIRED_AFTER(pass_mu_);
  std::vector<std::string> changed_names_ ABSL_GUARDED_BY(queue_mu_);
  std::vector<std::string> overdue_names_ ABSL_GUARDED_BY(queue_mu_);
  std::vector<std::weak_ptr<StoredFilter>> watch_queue_ ABSL_GUARDED_BY(queue_mu_);

  // The pass's own: held through a pass (one at a time), and by sizes().
  mutable bloomsync::Mutex pass_mu_;
  // The changed filters held, by the object's address, which cannot be reused while the weak
  // reference in due_ holds its memory: a filter found by two names in one pass (an old one's
  // and a new one's) is kept once. Each has one entry in due_, a min-heap by due_micros.
  absl::flat_hash_set<const StoredFilter*> changed_ ABSL_GUARDED_BY(pass_mu_);
  std::vector<DueEntry> due_ ABSL_GUARDED_BY(pass_mu_);
  // The entries of changed filters freed since (evicted, deleted) wait until they are due, up
  // to an interval, each holding its object's memory: under eviction churn (tens of thousands
  // of loads a second, each changed) that would be hundreds of MB beyond the memory budget. At this
  // size due_ drops them, as idle_ does below.
  size_t due_prune_at_ ABSL_GUARDED_BY(pass_mu_) = kMinIdlePruneAt;
  void PruneDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  std::vector<std::weak_ptr<StoredFilter>> windowed_ ABSL_GUARDED_BY(pass_mu_);
  std::vector<IdleEntry> idle_ ABSL_GUARDED_BY(pass_mu_);  // a min-heap by expires_micros
  // The heap's entries for filters freed since (evicted, deleted) wait for their expiry, which
  // may be days away, each holding its object's memory: at this size the heap drops them, and
  // the next time at twice what is left, so it stays within twice the live entries.
  size_t idle_prune_at_ ABSL_GUARDED_BY(pass_mu_) = kMinIdlePruneAt;
  static constexpr size_t kMinIdlePruneAt = 1024;
};

}  // namespace storage

#endif  // STORAGE_CHECKPOINT_CHECKPOINT_SCHEDULE_H_

// CreationLog: the names of the filters a primary made while a slot mover watches
// (FilterStore::WatchCreations and CreationsSince, filter_store_journal.cc; ReplicationService's
// ListMade). A move's rounds ask which filters were made since the last round instead of
// listing every filter the group holds, so the write pause at the end grows with the filters
// moved, not with the group. Deletions need no log: the journal read of a deleted filter says
// so (ReadJournal answers NOT_FOUND for it).
//
// A watch lasts `hold` past the last Watch or Since, so a mover that dies leaves nothing behind
// for long; while none is on, Record costs an atomic load and the log holds no name. A position
// names this log (its epoch: another store, as a restarted or promoted pod's, has another) and
// counts the names recorded before it. Since answers nullopt when it cannot say everything made
// after a position: another epoch, a watch that lapsed after it, or more than `capacity` names
// since. The reader then watches again and lists every filter.
//
//   CreationLog::Position at = log.Watch(now, absl::Minutes(1));  // before the full listing
//   ...
//   absl::optional<CreationLog::Made> made = log.Since(at, now, absl::Minutes(1));
//   if (made.has_value()) { ... made->names; at = made->next; } else { ... list every filter }
//
// Thread-safety: thread-safe.
#ifndef STORAGE_FILTER_CREATION_LOG_H_
#define STORAGE_FILTER_CREATION_LOG_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "common/mutex.h"

namespace storage {

class CreationLog {
 public:
  struct Position {
    uint64_t epoch = 0;
    uint64_t count = 0;  // names recorded before it, since the log was made
  };
  struct Made {
    std::vector<std::string> names;  // in the order they were made
    Position next;                   // where the next Since starts
  };

  CreationLog(uint64_t epoch, size_t capacity) : epoch_(epoch), capacity_(capacity) {}

  // Starts a watch, or renews the one on, for `hold` from `now`: the position now.
  Position Watch(absl::Time now, absl::Duration hold) {
    bloomsync::MutexLock lock(&mu_);
    LapseIfDue(now);
    if (!watching_.load(std::memory_order_relaxed)) {
      watch_start_ = count_;
      watching_.store(true, std::memory_order_release);
    }
    watched_until_ = now + hold;
    return {epoch_, count_};
  }

  // The names made after `from`, renewing the watch; nullopt if the log cannot say them all.
  absl::optional<Made> Since(Position from, absl::Time now, absl::Duration hold) {
    bloomsync::MutexLock lock(&mu_);
    LapseIfDue(now);
    const uint64_t oldest = count_ - names_.size();
    if (from.epoch != epoch_ || !watching_.load(std::memory_order_relaxed) ||
        from.count < watch_start_ || from.count < oldest || from.count > count_) {
      return absl::nullopt;
    }
    watched_until_ = now + hold;
    Made made;
    made.names.assign(names_.begin() + static_cast<ptrdiff_t>(from.count - oldest), names_.end());
    made.next = {epoch_, count_};
    return made;
  }

  // `name` was made at `now`: kept if a watch is on.
  void Record(absl::string_view name, absl::Time now) {
    if (!watching_.load(std::memory_order_acquire)) return;  // the usual case
    bloomsync::MutexLock lock(&mu_);
    LapseIfDue(now);
    if (!watching_.load(std::memory_order_relaxed)) return;
    names_.emplace_back(name);
    ++count_;
    if (names_.size() > capacity_) names_.pop_front();
  }

 private:
  void LapseIfDue(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!watching_.load(std::memory_order_relaxed) || watched_until_ > now) return;
    watching_.store(false, std::memory_order_release);
    names_.clear();
    // Unrecorded names may be made from now on: every position until now is behind the next
    // watch's start.
    ++count_;
  }

  const uint64_t epoch_;
  const size_t capacity_;
  bloomsync::Mutex mu_;
  std::atomic<bool> watching_{false};  // written under mu_
  absl::Time watched_until_ ABSL_GUARDED_BY(mu_);
  uint64_t watch_start_ ABSL_GUARDED_BY(mu_) = 0;  // count_ when the watch on began
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::string> names_ ABSL_GUARDED_BY(mu_);  // the last ones recorded, up to count_
};

}  // namespace storage

#endif  // STORAGE_FILTER_CREATION_LOG_H_

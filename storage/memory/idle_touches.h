// IdleTouches: on a replica, the filters with an idle_ttl that its reads used, for the primary
// to count as used. A filter's idle clock runs on the primary (which decides expiry); without
// this, a per-user filter read only through followers would expire on the primary while in
// use. StoredFilter notes a filter at most once a second (when its last use moves on a second,
// TouchIdle), the follower takes the names with each message it sends the primary, and the
// primary touches them (FilterStore::TouchIdle).
//
// Bounded: past kMaxNames names between two takes, further ones are dropped (and counted); the
// next read of such a filter notes it again a second later.
//
// Thread-safety: thread-safe.
#ifndef STORAGE_MEMORY_IDLE_TOUCHES_H_
#define STORAGE_MEMORY_IDLE_TOUCHES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "common/blocking_mutex.h"

namespace storage {

class IdleTouches {
 public:
  static constexpr size_t kMaxNames = 100'000;

  void Note(absl::string_view name) {
    bloomsync::BlockingLock lock(&mu_);
    if (names_.size() >= kMaxNames) {
      ++dropped_;
      return;
    }
    names_.emplace(name);
  }
  // The names noted since the last Take, in no order.
  std::vector<std::string> Take() {
    bloomsync::BlockingLock lock(&mu_);
    std::vector<std::string> out(names_.begin(), names_.end());
    names_.clear();
    return out;
  }
  size_t dropped() const {
    bloomsync::BlockingLock lock(&mu_);
    return dropped_;
  }

 private:
  mutable bloomsync::BlockingMutex mu_;
  absl::flat_hash_set<std::string> names_ ABSL_GUARDED_BY(mu_);
  size_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace storage

#endif  // STORAGE_MEMORY_IDLE_TOUCHES_H_

// ReplicaIndex: a replica's resident filters by generation, the key its journal records carry.
// A replicated batch's journal records are replayed into the filters they name that are in
// memory (FilterStore::ApplyReplicated); cold filters read the records with their pages when
// they load. Entries are weak: the registry owns the filters, and an entry outliving its filter
// finds nothing.
//
//   index.Note(filter);                       // made resident
//   std::shared_ptr<StoredFilter> f = index.Find(key.generation);
//   index.Forget(filter);                     // about to leave the registry
//
// Thread-safety: thread-safe (one lock, held for one map operation).
#ifndef STORAGE_REPLICA_REPLICA_INDEX_H_
#define STORAGE_REPLICA_REPLICA_INDEX_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "common/blocking_mutex.h"
#include "storage/filter/stored_filter.h"

namespace storage {

class ReplicaIndex {
 public:
  // Indexes `filter` under its generation; an unreadable one has nothing to replay into.
  void Note(const std::shared_ptr<StoredFilter>& filter) {
    if (!filter->has_body()) return;
    bloomsync::BlockingLock lock(&mu_);
    by_generation_[filter->generation()] = filter;
  }
  // Drops `filter`'s entry, unless another filter of its generation replaced it.
  void Forget(const std::shared_ptr<StoredFilter>& filter) {
    bloomsync::BlockingLock lock(&mu_);
    auto it = by_generation_.find(filter->generation());
    if (it != by_generation_.end() && it->second.lock() == filter) by_generation_.erase(it);
  }
  // The filter of `generation` if it is still alive; null otherwise.
  std::shared_ptr<StoredFilter> Find(uint64_t generation) const {
    bloomsync::BlockingLock lock(&mu_);
    auto it = by_generation_.find(generation);
    return it == by_generation_.end() ? nullptr : it->second.lock();
  }

 private:
  mutable bloomsync::BlockingMutex mu_;
  absl::flat_hash_map<uint64_t, std::weak_ptr<StoredFilter>> by_generation_ ABSL_GUARDED_BY(mu_);
};

}  // namespace storage

#endif  // STORAGE_REPLICA_REPLICA_INDEX_H_

// FilterRegistry: the resident filters of a FilterStore by name, and the per-name locks that
// serialise the creation, deletion, loading and eviction of one name.
//
//   FilterRegistry registry;
//   registry.Insert(filter);
//   std::shared_ptr<StoredFilter> found = registry.Find("users");  // null if not resident
//   { bloomsync::MutexLock lock(&registry.NameLock("users")); ... }
//
// The map is sharded (16 shards, each behind a reader-writer lock) so that lookups of
// different names rarely meet. A slot is one shared_ptr keyed by the filter's own name: for
// millions of small per-user filters, no second copy of each name sits beside it.
//
// What "resident" means, and who may call Insert/Remove for a name (the holder of its name
// lock, or start-up), is FilterStore's business; the registry only keeps the map consistent.
//
// Thread-safety: every method is thread-safe.
#ifndef STORAGE_FILTER_REGISTRY_H_
#define STORAGE_FILTER_REGISTRY_H_

#include <array>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "storage/filter/stored_filter.h"

namespace storage {

class FilterRegistry {
 public:
  FilterRegistry() = default;
  FilterRegistry(const FilterRegistry&) = delete;
  FilterRegistry& operator=(const FilterRegistry&) = delete;

  // The resident filter `name`, or null.
  std::shared_ptr<StoredFilter> Find(absl::string_view name) const;
  // Adds `filter`, replacing one of the same name (a reload, or one whose Delete raced it).
  void Insert(std::shared_ptr<StoredFilter> filter);
  void Remove(absl::string_view name);
  // Every resident filter, copied out.
  std::vector<std::shared_ptr<StoredFilter>> Snapshot() const;
  // Calls `visit` for every resident filter, under its shard's reader lock: a pass that keeps
  // only some of them copies no shared_ptr of the others. `visit` must not take a lock a
  // writer of the registry may hold (a name's lock, a filter's apply lock).
  void Visit(absl::FunctionRef<void(const std::shared_ptr<StoredFilter>&)> visit) const;
  size_t size() const;

  // The lock of `name`'s stripe (64 stripes): held to create, delete, load or evict it.
  bloomsync::Mutex& NameLock(absl::string_view name) const;

 private:
  struct ByName {
    using is_transparent = void;
    static absl::string_view Key(absl::string_view name) { return name; }
    static absl::string_view Key(const std::shared_ptr<StoredFilter>& filter) {
      return filter->name();
    }
    template <typename T>
    size_t operator()(const T& key) const {
      return absl::Hash<absl::string_view>()(Key(key));
    }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return Key(a) == Key(b);
    }
  };
  struct Shard {
    mutable bloomsync::Mutex mu;
    absl::flat_hash_set<std::shared_ptr<StoredFilter>, ByName, ByName> filters ABSL_GUARDED_BY(mu);
  };
  Shard& ShardFor(absl::string_view name) const;

  mutable std::array<Shard, 16> shards_;
  mutable std::array<bloomsync::Mutex, 64> name_locks_;
};

}  // namespace storage

#endif  // STORAGE_FILTER_REGISTRY_H_

#include "storage/filter_registry.h"

#include <utility>

namespace storage {

FilterRegistry::Shard& FilterRegistry::ShardFor(absl::string_view name) const {
  return shards_[absl::Hash<absl::string_view>()(name) % shards_.size()];
}

bloomsync::Mutex& FilterRegistry::NameLock(absl::string_view name) const {
  // Other bits of the hash than the shard's: names of one shard spread over the stripes.
  return name_locks_[(absl::Hash<absl::string_view>()(name) >> 8) % name_locks_.size()];
}

std::shared_ptr<StoredFilter> FilterRegistry::Find(absl::string_view name) const {
  Shard& shard = ShardFor(name);
  bloomsync::ReaderMutexLock lock(&shard.mu);
  auto it = shard.filters.find(name);
  return it == shard.filters.end() ? nullptr : *it;
}

void FilterRegistry::Insert(std::shared_ptr<StoredFilter> filter) {
  Shard& shard = ShardFor(filter->name());
  bloomsync::MutexLock lock(&shard.mu);
  shard.filters.erase(filter->name());
  shard.filters.insert(std::move(filter));
}

void FilterRegistry::Remove(absl::string_view name) {
  Shard& shard = ShardFor(name);
  bloomsync::MutexLock lock(&shard.mu);
  shard.filters.erase(name);
}

std::vector<std::shared_ptr<StoredFilter>> FilterRegistry::Snapshot() const {
  std::vector<std::shared_ptr<StoredFilter>> all;
  Visit([&](const std::shared_ptr<StoredFilter>& filter) { all.push_back(filter); });
  return all;
}

void FilterRegistry::Visit(
    absl::FunctionRef<void(const std::shared_ptr<StoredFilter>&)> visit) const {
  for (Shard& shard : shards_) {
    bloomsync::ReaderMutexLock lock(&shard.mu);
    for (const std::shared_ptr<StoredFilter>& filter : shard.filters) visit(filter);
  }
}

size_t FilterRegistry::size() const {
  size_t n = 0;
  for (Shard& shard : shards_) {
    bloomsync::ReaderMutexLock lock(&shard.mu);
    n += shard.filters.size();
  }
  return n;
}

}  // namespace storage

#include "storage/checkpoint_schedule.h"

#include <algorithm>
#include <utility>

#include "storage/stored_filter.h"

namespace storage {

void CheckpointSchedule::Changed(absl::string_view name) {
  bloomsync::MutexLock lock(&queue_mu_);
  changed_names_.emplace_back(name);
}

void CheckpointSchedule::Watch(const std::shared_ptr<StoredFilter>& filter) {
  if (filter->HasUnpersistedChanges()) filter->MarkChanged();
  if (!filter->windowed() && !filter->has_idle_ttl()) return;
  bloomsync::MutexLock lock(&queue_mu_);
  watch_queue_.emplace_back(filter);
}

void CheckpointSchedule::TakeQueued(
    absl::FunctionRef<std::shared_ptr<StoredFilter>(absl::string_view)> find) {
  std::vector<std::string> names;
  std::vector<std::weak_ptr<StoredFilter>> watched;
  {
    bloomsync::MutexLock lock(&queue_mu_);
    names.swap(changed_names_);
    watched.swap(watch_queue_);
  }
  for (const std::string& name : names) {
    // Not found: deleted or evicted since (either checkpointed it). Found, it may be a newer
    // object of that name: visiting it costs one test if it has nothing to checkpoint.
    if (std::shared_ptr<StoredFilter> filter = find(name); filter != nullptr) {
      changed_.try_emplace(filter.get(), filter);
    }
  }
  for (const std::weak_ptr<StoredFilter>& weak : watched) {
    const std::shared_ptr<StoredFilter> filter = weak.lock();
    if (filter == nullptr) continue;
    if (filter->windowed()) windowed_.push_back(weak);
    if (filter->has_idle_ttl()) PushIdle(filter);
  }
}

void CheckpointSchedule::PushIdle(const std::shared_ptr<StoredFilter>& filter) {
  const absl::optional<absl::Time> at = filter->IdleExpiresAt();
  if (!at.has_value()) return;
  if (idle_.size() >= idle_prune_at_) {
    std::erase_if(idle_, [](const IdleEntry& entry) { return entry.filter.expired(); });
    std::make_heap(idle_.begin(), idle_.end(), LaterExpiry);
    idle_prune_at_ = std::max(kMinIdlePruneAt, 2 * idle_.size());
  }
  idle_.push_back({absl::ToUnixMicros(*at), filter});
  std::push_heap(idle_.begin(), idle_.end(), LaterExpiry);
}

void CheckpointSchedule::Pass(
    absl::Time idle_now, absl::FunctionRef<std::shared_ptr<StoredFilter>(absl::string_view)> find,
    absl::FunctionRef<bool(const std::shared_ptr<StoredFilter>&)> visit) {
  bloomsync::MutexLock pass(&pass_mu_);
  TakeQueued(find);

  // Windowed filters, every pass. An evicted or unusable object is done with: a reload is a
  // new object, watched anew.
  bool stopped = false;
  std::erase_if(windowed_, [&](const std::weak_ptr<StoredFilter>& weak) {
    const std::shared_ptr<StoredFilter> filter = weak.lock();
    if (filter == nullptr || filter->evicted() || !filter->usable()) return true;
    if (!stopped && !visit(filter)) stopped = true;
    return false;
  });
  if (stopped) return;

  // Changed filters, until a visit leaves nothing to checkpoint.
  for (auto it = changed_.begin(); it != changed_.end();) {
    const std::shared_ptr<StoredFilter> filter = it->second.lock();
    if (filter != nullptr && filter->usable() && !filter->evicted()) {
      if (!visit(filter)) return;
      if (filter->HasUnpersistedChanges() || filter->Unschedule()) {
        ++it;
        continue;
      }
    }
    changed_.erase(it++);
  }

  // Filters with an idle_ttl whose expiry came: expired by the visit unless used since (then
  // back in at their new expiry) or their deletion failed (then again next pass).
  const int64_t now_micros = absl::ToUnixMicros(idle_now);
  while (!idle_.empty() && idle_.front().expires_micros <= now_micros) {
    std::pop_heap(idle_.begin(), idle_.end(), LaterExpiry);
    const std::shared_ptr<StoredFilter> filter = idle_.back().filter.lock();
    idle_.pop_back();
    if (filter == nullptr || filter->evicted() || !filter->usable()) continue;
    const absl::optional<absl::Time> at = filter->IdleExpiresAt();
    if (!at.has_value()) continue;
    if (absl::ToUnixMicros(*at) <= now_micros) {
      if (!visit(filter)) {
        PushIdle(filter);
        return;
      }
      if (filter->evicted() || !filter->usable()) continue;  // expired (or evicted meanwhile)
      // Still here: its deletion failed, or it is an object no longer registered (which ends
      // when its last reference goes). Again next pass.
      idle_.push_back({now_micros + 1, filter});
      std::push_heap(idle_.begin(), idle_.end(), LaterExpiry);
      continue;
    }
    PushIdle(filter);
  }
}

CheckpointSchedule::Sizes CheckpointSchedule::sizes() const {
  Sizes sizes;
  bloomsync::MutexLock pass(&pass_mu_);
  sizes.changed = changed_.size();
  sizes.windowed = windowed_.size();
  sizes.idle = idle_.size();
  bloomsync::MutexLock lock(&queue_mu_);
  sizes.changed += changed_names_.size();
  for (const std::weak_ptr<StoredFilter>& weak : watch_queue_) {
    if (const std::shared_ptr<StoredFilter> filter = weak.lock(); filter != nullptr) {
      sizes.windowed += filter->windowed() ? 1 : 0;
      sizes.idle += filter->has_idle_ttl() ? 1 : 0;
    }
  }
  return sizes;
}

}  // namespace storage

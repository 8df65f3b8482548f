#include "storage/checkpoint/checkpoint_schedule.h"

#include <algorithm>
#include <utility>

#include "storage/filter/stored_filter.h"

namespace storage {

void CheckpointSchedule::Changed(absl::string_view name) {
  bloomsync::MutexLock lock(&queue_mu_);
  changed_names_.emplace_back(name);
}

void CheckpointSchedule::Overdue(absl::string_view name) {
  bloomsync::MutexLock lock(&queue_mu_);
  overdue_names_.emplace_back(name);
}

void CheckpointSchedule::Watch(const std::shared_ptr<StoredFilter>& filter) {
  if (filter->HasUnpersistedChanges()) filter->MarkChanged();
  if (!filter->windowed() && !filter->has_idle_ttl()) return;
  bloomsync::MutexLock lock(&queue_mu_);
  watch_queue_.emplace_back(filter);
}

int64_t CheckpointSchedule::DueMicros(const StoredFilter& filter, int64_t now_micros,
                                      absl::Duration interval) {
  if (filter.JournalOverdue()) return now_micros;
  return absl::ToUnixMicros(filter.last_checkpoint() + interval);
}

std::vector<std::shared_ptr<StoredFilter>> CheckpointSchedule::TakeQueued(
    int64_t now_micros, absl::Duration interval,
    absl::FunctionRef<std::shared_ptr<StoredFilter>(absl::string_view)> find) {
  std::vector<std::string> names;
  std::vector<std::string> overdue_names;
  std::vector<std::weak_ptr<StoredFilter>> watched;
  {
    bloomsync::MutexLock lock(&queue_mu_);
    names.swap(changed_names_);
    overdue_names.swap(overdue_names_);
    watched.swap(watch_queue_);
  }
  for (const std::string& name : names) {
    // Not found: deleted or evicted since (either checkpointed it). Found, it may be a newer
    // object of that name: visiting it costs one test if it has nothing to checkpoint.
    if (due_.size() >= due_prune_at_) PruneDue();
    if (std::shared_ptr<StoredFilter> filter = find(name);
        filter != nullptr && changed_.insert(filter.get()).second) {
      due_.push_back({DueMicros(*filter, now_micros, interval), filter.get(), filter});
      std::push_heap(due_.begin(), due_.end(), LaterDue);
    }
  }
  // Their entries in due_ stay where they are: visited again when due, they then have
  // nothing to checkpoint, or what came since.
  std::vector<std::shared_ptr<StoredFilter>> overdue;
  for (const std::string& name : overdue_names) {
    if (std::shared_ptr<StoredFilter> filter = find(name); filter != nullptr) {
      overdue.push_back(std::move(filter));
    }
  }
  for (const std::weak_ptr<StoredFilter>& weak : watched) {
    const std::shared_ptr<StoredFilter> filter = weak.lock();
    if (filter == nullptr) continue;
    if (filter->windowed()) windowed_.push_back(weak);
    if (filter->has_idle_ttl()) PushIdle(filter);
  }
  return overdue;
}

void CheckpointSchedule::PruneDue() {
  // A loop rather than std::erase_if: the lock analysis does not follow pass_mu_ into a lambda.
  auto kept = due_.begin();
  for (auto entry = due_.begin(); entry != due_.end(); ++entry) {
    if (entry->filter.expired()) {
      changed_.erase(entry->key);
      continue;
    }
    if (kept != entry) *kept = std::move(*entry);
    ++kept;
  }
  due_.erase(kept, due_.end());
  std::make_heap(due_.begin(), due_.end(), LaterDue);
  due_prune_at_ = std::max(kMinIdlePruneAt, 2 * due_.size());
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
    absl::Time now, absl::Duration interval, absl::Time idle_now,
    absl::FunctionRef<std::shared_ptr<StoredFilter>(absl::string_view)> find,
    absl::FunctionRef<bool(const std::shared_ptr<StoredFilter>&)> visit) {
  bloomsync::MutexLock pass(&pass_mu_);
  const int64_t now_micros = absl::ToUnixMicros(now);
  for (const std::shared_ptr<StoredFilter>& filter : TakeQueued(now_micros, interval, find)) {
    // One that stopped the pass is reported again by its next add, or due in its turn.
    if (filter->usable() && !filter->evicted() && !visit(filter)) return;
  }

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

  // Changed filters whose checkpoint is due, until a visit leaves nothing to checkpoint. One
  // kept goes back in at its next due time, at the earliest the next pass (a checkpoint that
  // failed is retried then).
  while (!due_.empty() && due_.front().due_micros <= now_micros) {
    std::pop_heap(due_.begin(), due_.end(), LaterDue);
    DueEntry entry = std::move(due_.back());
    due_.pop_back();
    const std::shared_ptr<StoredFilter> filter = entry.filter.lock();
    if (filter != nullptr && filter->usable() && !filter->evicted()) {
      if (!visit(filter)) {
        due_.push_back(std::move(entry));
        std::push_heap(due_.begin(), due_.end(), LaterDue);
        return;
      }
      if (filter->HasUnpersistedChanges() || filter->Unschedule()) {
        entry.due_micros = std::max(DueMicros(*filter, now_micros, interval), now_micros + 1);
        due_.push_back(std::move(entry));
        std::push_heap(due_.begin(), due_.end(), LaterDue);
        continue;
      }
    }
    changed_.erase(entry.key);
  }

  // Filters with an idle_ttl whose expiry came: expired by the visit unless used since (then
  // back in at their new expiry) or their deletion failed (then again next pass).
  const int64_t idle_now_micros = absl::ToUnixMicros(idle_now);
  while (!idle_.empty() && idle_.front().expires_micros <= idle_now_micros) {
    std::pop_heap(idle_.begin(), idle_.end(), LaterExpiry);
    const std::shared_ptr<StoredFilter> filter = idle_.back().filter.lock();
    idle_.pop_back();
    if (filter == nullptr || filter->evicted() || !filter->usable()) continue;
    const absl::optional<absl::Time> at = filter->IdleExpiresAt();
    if (!at.has_value()) continue;
    if (absl::ToUnixMicros(*at) <= idle_now_micros) {
      if (!visit(filter)) {
        PushIdle(filter);
        return;
      }
      if (filter->evicted() || !filter->usable()) continue;  // expired (or evicted meanwhile)
      // Still here: its deletion failed, or it is an object no longer registered (which ends
      // when its last reference goes). Again next pass.
      idle_.push_back({idle_now_micros + 1, filter});
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

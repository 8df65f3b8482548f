// AppliedWaiters (applied_waiters.h): the table of waiting reads and the thread that answers
// them.
#include "replication/applied_waiters.h"

#include <algorithm>
#include <vector>

namespace replication {
namespace {

// The longest the thread sleeps while reads wait: the applied sequence is looked at again at
// least this often, whether or not Notify() is called (a safety net: the follower notifies
// after every batch it applies).
constexpr absl::Duration kRecheck = absl::Milliseconds(50);

}  // namespace

AppliedWaiters::AppliedWaiters(std::function<uint64_t()> applied_sequence, size_t max_waiting,
                               const bloomtime::Clock* clock)
    : applied_sequence_(std::move(applied_sequence)), max_waiting_(max_waiting), clock_(clock) {}

AppliedWaiters::~AppliedWaiters() { Stop(); }

void AppliedWaiters::Wait(uint64_t sequence, absl::Time deadline, Done done) {
  if (applied_sequence_() >= sequence) {
    std::move(done)(true);
    return;
  }
  {
    bloomsync::BlockingLock lock(&mu_);
    if (!stopped_ && by_sequence_.size() < max_waiting_ && deadline > clock_->Now()) {
      auto waiter = by_sequence_.emplace(sequence, BySequence{std::move(done), {}});
      waiter->second.twin = by_deadline_.emplace(deadline, ByDeadline{waiter});
      // The thread looks at the applied sequence again after this insert: one applied between
      // the look above and here is not missed.
      notified_ = true;
      if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
      wake_.NotifyOne();
      return;
    }
  }
  std::move(done)(false);
}

void AppliedWaiters::Notify() {
  {
    bloomsync::BlockingLock lock(&mu_);
    if (by_sequence_.empty()) return;
    notified_ = true;
  }
  wake_.NotifyOne();
}

size_t AppliedWaiters::waiting() const {
  bloomsync::BlockingLock lock(&mu_);
  return by_sequence_.size();
}

void AppliedWaiters::Stop() {
  std::vector<Done> refused;
  {
    bloomsync::BlockingLock lock(&mu_);
    stopped_ = true;
    for (auto& [sequence, waiter] : by_sequence_) refused.push_back(std::move(waiter.done));
    by_sequence_.clear();
    by_deadline_.clear();
  }
  wake_.NotifyOne();
  // No Wait starts the thread once stopped_ is set, so thread_ no longer changes.
  if (thread_.joinable()) thread_.join();
  for (Done& done : refused) std::move(done)(false);
}

void AppliedWaiters::Run() {
  bloomsync::BlockingLock lock(&mu_);
  while (!stopped_) {
    const auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopped_ || notified_; };
    if (by_deadline_.empty()) {
      wake_.Wait(lock, woken);  // idle: a Wait that waits notifies
    } else {
      const absl::Time wake_at = std::min(clock_->Now() + kRecheck, by_deadline_.begin()->first);
      clock_->WaitUntil(wake_, lock, wake_at, woken);
    }
    if (stopped_) break;
    notified_ = false;
    if (by_sequence_.empty()) continue;
    lock.Unlock();
    const uint64_t applied = applied_sequence_();
    looks_.fetch_add(1);
    const absl::Time now = clock_->Now();
    lock.Lock();
    if (stopped_) break;  // Stop() answers what is left
    // Collect the answered under the lock, call them outside it.
    std::vector<std::pair<Done, bool>> answered;
    while (!by_sequence_.empty() && by_sequence_.begin()->first <= applied) {
      auto waiter = by_sequence_.begin();
      answered.emplace_back(std::move(waiter->second.done), true);
      by_deadline_.erase(waiter->second.twin);
      by_sequence_.erase(waiter);
    }
    while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
      auto waiter = by_deadline_.begin()->second.twin;
      answered.emplace_back(std::move(waiter->second.done), false);
      by_deadline_.erase(by_deadline_.begin());
      by_sequence_.erase(waiter);
    }
    if (answered.empty()) continue;
    lock.Unlock();
    for (auto& [done, applied_now] : answered) std::move(done)(applied_now);
    lock.Lock();
  }
}

}  // namespace replication

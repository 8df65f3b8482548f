#include "service/call_lane.h"

#include <utility>

namespace service {

CallLane::CallLane(size_t threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

CallLane::~CallLane() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

bool CallLane::Post(absl::AnyInvocable<void() &&> work) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= max_queued_) return false;
  queue_.push_back(std::move(work));
  return true;
}

void CallLane::Loop() {
  for (;;) {
    absl::AnyInvocable<void() &&> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CallLane* lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane->mu_) {
            return lane->stopping_ || !lane->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, and nothing left to run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(work)();
  }
}

}  // namespace service

#include "service/call_lane.h"

#include <utility>

namespace service {

CallLane::CallLane(size_t threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

CallLane::~CallLane() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stopping_ = true;
  }
  ready_.NotifyAll();
  for (std::thread& thread : threads_) thread.join();
}

bool CallLane::Post(absl::AnyInvocable<void() &&> work) {
  {
    bloomsync::BlockingLock lock(&mu_);
    if (queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(work));
  }
  ready_.NotifyOne();
  return true;
}

void CallLane::Loop() {
  for (;;) {
    absl::AnyInvocable<void() &&> work;
    {
      bloomsync::BlockingLock lock(&mu_);
      ready_.Wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(work)();
  }
}

}  // namespace service

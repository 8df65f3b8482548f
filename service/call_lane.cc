#include "service/call_lane.h"

#include <utility>

namespace service {

CallLane::CallLane(size_t threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

CallLane::~CallLane() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

bool CallLane::Post(absl::AnyInvocable<void() &&> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(work));
  }
  ready_.notify_one();
  return true;
}

void CallLane::Loop() {
  for (;;) {
    absl::AnyInvocable<void() &&> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(work)();
  }
}

}  // namespace service

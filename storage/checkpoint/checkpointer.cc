#include "storage/checkpoint/checkpointer.h"

#include <utility>

namespace storage {

Checkpointer::Checkpointer(absl::Duration period, Pass pass, const bloomtime::Clock* clock)
    : period_(period), clock_(clock), pass_(std::move(pass)), thread_([this] { Loop(); }) {}

void Checkpointer::Stop() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_requested_.store(true, std::memory_order_relaxed);
  }
  stop_cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void Checkpointer::Loop() {
  for (;;) {
    {
      bloomsync::BlockingLock lock(&mu_);
      if (clock_->WaitFor(stop_cv_, lock, period_, [this] { return stop_requested(); })) return;
    }
    if (!pass_(clock_->Now()) || stop_requested()) return;
  }
}

}  // namespace storage

#include "storage/checkpointer.h"

#include <utility>

#include "absl/time/clock.h"

namespace storage {

Checkpointer::Checkpointer(absl::Duration period, Pass pass)
    : period_(period), pass_(std::move(pass)), thread_([this] { Loop(); }) {}

void Checkpointer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_.store(true, std::memory_order_relaxed);
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Checkpointer::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_cv_.wait_for(lock, absl::ToChronoNanoseconds(period_),
                            [this] { return stop_requested(); })) {
        return;
      }
    }
    if (!pass_(absl::Now()) || stop_requested()) return;
  }
}

}  // namespace storage

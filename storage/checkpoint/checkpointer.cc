#include "storage/checkpoint/checkpointer.h"

#include <utility>

#include "absl/time/clock.h"

namespace storage {

Checkpointer::Checkpointer(absl::Duration period, Pass pass)
    : period_(period), pass_(std::move(pass)), thread_([this] { Loop(); }) {}

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
      if (stop_cv_.WaitFor(lock, absl::ToChronoNanoseconds(period_),
                           [this] { return stop_requested(); })) {
        return;
      }
    }
    if (!pass_(absl::Now()) || stop_requested()) return;
  }
}

}  // namespace storage

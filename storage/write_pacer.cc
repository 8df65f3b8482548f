// WritePacer (write_pacer.h): a byte-rate schedule of writes, with waits that end early.
#include "storage/write_pacer.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace storage {

absl::Duration WritePacer::Charge(absl::Time now, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Unpaced()) return absl::ZeroDuration();
  const absl::Time start = std::max(free_at_, now);
  free_at_ =
      start + absl::Seconds(static_cast<double>(bytes) / static_cast<double>(bytes_per_second_));
  return start - now;
}

void WritePacer::Pace(uint64_t bytes) {
  const absl::Time now = absl::Now();
  const absl::Duration wait = Charge(now, bytes);
  if (wait <= absl::ZeroDuration()) return;
  std::unique_lock<std::mutex> lock(mu_);
  // A Rush that came and went while this slept still ends the wait (rushes_started_ moved).
  const uint64_t rushes_started = rushes_started_;
  unpaced_cv_.wait_for(lock, absl::ToChronoNanoseconds(wait),
                       [&] { return Unpaced() || rushes_started_ != rushes_started; });
}

void WritePacer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  unpaced_cv_.notify_all();
}

WritePacer::Rush::Rush(WritePacer* pacer) : pacer_(pacer) {
  if (pacer_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(pacer_->mu_);
    ++pacer_->rushes_;
    ++pacer_->rushes_started_;
  }
  pacer_->unpaced_cv_.notify_all();
}

WritePacer::Rush::~Rush() {
  if (pacer_ == nullptr) return;
  std::lock_guard<std::mutex> lock(pacer_->mu_);
  --pacer_->rushes_;
}

}  // namespace storage

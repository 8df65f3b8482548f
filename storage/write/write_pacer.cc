// WritePacer (write_pacer.h): a byte-rate schedule of writes, with waits that end early.
#include "storage/write/write_pacer.h"

#include <algorithm>

namespace storage {

absl::Duration WritePacer::Charge(absl::Time now, uint64_t bytes) {
  bloomsync::BlockingLock lock(&mu_);
  if (Unpaced()) return absl::ZeroDuration();
  const absl::Time start = std::max(free_at_, now);
  free_at_ =
      start + absl::Seconds(static_cast<double>(bytes) / static_cast<double>(bytes_per_second_));
  return start - now;
}

void WritePacer::Pace(uint64_t bytes) {
  const absl::Time now = clock_->Now();
  const absl::Duration wait = Charge(now, bytes);
  if (wait <= absl::ZeroDuration()) return;
  bloomsync::BlockingLock lock(&mu_);
  // A Rush that came and went while this slept still ends the wait (rushes_started_ moved).
  const uint64_t rushes_started = rushes_started_;
  clock_->WaitUntil(unpaced_cv_, lock, now + wait, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return Unpaced() || rushes_started_ != rushes_started;
  });
}

void WritePacer::Stop() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stopped_ = true;
  }
  unpaced_cv_.NotifyAll();
}

WritePacer::Rush::Rush(WritePacer* pacer) : pacer_(pacer) {
  if (pacer_ == nullptr) return;
  {
    bloomsync::BlockingLock lock(&pacer_->mu_);
    ++pacer_->rushes_;
    ++pacer_->rushes_started_;
  }
  pacer_->unpaced_cv_.NotifyAll();
}

WritePacer::Rush::~Rush() {
  if (pacer_ == nullptr) return;
  bloomsync::BlockingLock lock(&pacer_->mu_);
  --pacer_->rushes_;
}

}  // namespace storage

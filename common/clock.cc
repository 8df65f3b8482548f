// The real and manual clocks (common/clock.h).
#include "common/clock.h"

#include <algorithm>
#include <chrono>

#include "absl/time/clock.h"

namespace bloomtime {
namespace {

constexpr absl::Duration kLongestWait = absl::Hours(24 * 365);

// Waits on the monotonic clock, for the time left by Now().
class SystemClock : public Clock {
 public:
  bool WaitUntil(bloomsync::CondVar& cv, bloomsync::BlockingLock& lock, absl::Time deadline,
                 absl::FunctionRef<bool()> ready) const override {
    // The time left on the monotonic clock: a step of the wall clock neither ends the wait
    // early nor makes it last longer. At most a year: the monotonic clock plus an infinite
    // duration would overflow, and a wait that long is one that only its condition ends.
    const absl::Duration left = std::min(deadline - Now(), kLongestWait);
    return cv.WaitFor(lock, absl::ToChronoNanoseconds(left), [&] { return ready(); });
  }
};

class RealClock final : public SystemClock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

class MonotonicClock final : public SystemClock {
 public:
  absl::Time Now() const override {
    return absl::UnixEpoch() +
           absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  }
};

}  // namespace

const Clock* Clock::Real() {
  static const RealClock* const clock = new RealClock();
  return clock;
}

const Clock* Clock::Monotonic() {
  static const MonotonicClock* const clock = new MonotonicClock();
  return clock;
}

bool ManualClock::WaitUntil(bloomsync::CondVar& cv, bloomsync::BlockingLock& lock,
                            absl::Time deadline, absl::FunctionRef<bool()> ready) const {
  waiters_.fetch_add(1);
  while (!ready() && Now() < deadline) cv.WaitFor(lock, std::chrono::milliseconds(1));
  waiters_.fetch_sub(1);
  return ready();
}

}  // namespace bloomtime

// Clock: where the server reads the time and waits for it to pass, so that tests step time
// instead of sleeping.
//
// Windows and idle expiry age filters by Now(); the checkpointer waits for its period, the
// write pacer for a write's turn, the applied-sequence waiters for their deadlines, through
// WaitUntil. Production code takes Clock::Real(); a test passes a ManualClock and moves it:
//
//   bloomtime::ManualClock clock;
//   Checkpointer checkpointer(absl::Seconds(1), pass, &clock);
//   ASSERT_TRUE(bloomtest::WaitFor([&] { return clock.waiters() == 1; }));  // it waits
//   clock.Advance(absl::Seconds(1));                                          // one pass runs
//
// A wait on a ManualClock ends when something notifies its condition variable or when the
// clock is moved to or past its deadline; it looks at the clock every millisecond of real time
// meanwhile (a test's cost, never production's).
//
// Thread-safety: every method is thread-safe.
#ifndef COMMON_CLOCK_H_
#define COMMON_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"

namespace bloomtime {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // Waits on `cv`, with `lock` held (as CondVar::Wait), until `ready()` or until this clock
  // reads `deadline` (absl::InfiniteFuture(): only `ready()` ends it); returns what ready()
  // returns at the end. `ready` runs with the lock
  // held: annotate it ABSL_EXCLUSIVE_LOCKS_REQUIRED (blocking_mutex.h).
  virtual bool WaitUntil(bloomsync::CondVar& cv, bloomsync::BlockingLock& lock, absl::Time deadline,
                         absl::FunctionRef<bool()> ready) const = 0;
  bool WaitFor(bloomsync::CondVar& cv, bloomsync::BlockingLock& lock, absl::Duration time,
               absl::FunctionRef<bool()> ready) const {
    return WaitUntil(cv, lock, Now() + time, ready);
  }

  // The system's clock (absl::Now; waits measured on the monotonic clock), shared and never
  // destroyed.
  static const Clock* Real();
  // The monotonic clock (std::chrono::steady_clock) as an absl::Time: time since an arbitrary
  // start, not a date, that no step of the wall clock moves. For bounds that must hold
  // whatever an operator or NTP does to the date (the etcd lease's fence). Shared and never
  // destroyed.
  static const Clock* Monotonic();
};

// A clock that moves only when told to; for tests and benchmarks.
class ManualClock : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000))
      : micros_(absl::ToUnixMicros(start)) {}

  absl::Time Now() const override { return absl::FromUnixMicros(micros_.load()); }
  bool WaitUntil(bloomsync::CondVar& cv, bloomsync::BlockingLock& lock, absl::Time deadline,
                 absl::FunctionRef<bool()> ready) const override;

  void Advance(absl::Duration by) { micros_.fetch_add(absl::ToInt64Microseconds(by)); }
  void Set(absl::Time to) { micros_.store(absl::ToUnixMicros(to)); }
  // Threads in a WaitUntil of this clock now: a test waits for a thread to get there before
  // it moves the clock past the thread's deadline.
  int waiters() const { return waiters_.load(); }

 private:
  std::atomic<int64_t> micros_;
  mutable std::atomic<int> waiters_{0};
};

}  // namespace bloomtime

#endif  // COMMON_CLOCK_H_

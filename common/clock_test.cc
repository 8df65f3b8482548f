// Clock: waits end at their condition or at their deadline on the clock they were given, the
// real one (even with no deadline) and a ManualClock a test moves.
#include "common/clock.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace bloomtime {
namespace {

struct Waiter {
  bloomsync::BlockingMutex mu;
  bloomsync::CondVar cv;
  bool ready ABSL_GUARDED_BY(mu) = false;

  void Set() {
    {
      bloomsync::BlockingLock lock(&mu);
      ready = true;
    }
    cv.NotifyAll();
  }
  bool Wait(const Clock& clock, absl::Time deadline) {
    bloomsync::BlockingLock lock(&mu);
    return clock.WaitUntil(cv, lock, deadline,
                           [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return ready; });
  }
};

TEST(ClockTest, ARealWaitWithoutADeadlineEndsAtItsCondition) {
  Waiter waiter;
  std::atomic<bool> returned{false};
  std::thread thread([&] {
    EXPECT_TRUE(waiter.Wait(*Clock::Real(), absl::InfiniteFuture()));
    returned = true;
  });
  waiter.Set();
  thread.join();
  EXPECT_TRUE(returned.load());
}

TEST(ClockTest, ARealWaitEndsAtItsDeadline) {
  Waiter waiter;
  const absl::Time start = absl::Now();
  EXPECT_FALSE(waiter.Wait(*Clock::Real(), start + absl::Milliseconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
  EXPECT_FALSE(waiter.Wait(*Clock::Real(), start - absl::Seconds(1)));  // passed: at once
}

TEST(ClockTest, TheMonotonicClockNeverGoesBackAndWaitsOnItsOwnTime) {
  const Clock& clock = *Clock::Monotonic();
  absl::Time last = clock.Now();
  for (int i = 0; i < 10000; ++i) {
    const absl::Time now = clock.Now();
    ASSERT_GE(now, last);
    last = now;
  }
  // A deadline on its time (not a date): a wait to 20 ms from its now lasts 20 ms.
  Waiter waiter;
  const absl::Time start = clock.Now();
  const absl::Time wall_start = absl::Now();
  EXPECT_FALSE(waiter.Wait(clock, start + absl::Milliseconds(20)));
  EXPECT_GE(clock.Now() - start, absl::Milliseconds(20));
  EXPECT_LT(absl::Now() - wall_start, absl::Seconds(10));
}

TEST(ClockTest, AManualWaitEndsWhenTheClockReachesItsDeadline) {
  ManualClock clock;
  Waiter waiter;
  std::atomic<bool> returned{false};
  std::thread thread([&] {
    EXPECT_FALSE(waiter.Wait(clock, clock.Now() + absl::Hours(1)));
    returned = true;
  });
  ASSERT_TRUE(bloomtest::WaitFor([&] { return clock.waiters() == 1; }));
  clock.Advance(absl::Minutes(59));
  EXPECT_EQ(clock.waiters(), 1);
  clock.Advance(absl::Minutes(1));
  thread.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(clock.waiters(), 0);
}

TEST(ClockTest, AManualWaitEndsAtItsConditionWhateverTheClock) {
  ManualClock clock;
  Waiter waiter;
  std::thread thread([&] { EXPECT_TRUE(waiter.Wait(clock, absl::InfiniteFuture())); });
  ASSERT_TRUE(bloomtest::WaitFor([&] { return clock.waiters() == 1; }));
  waiter.Set();
  thread.join();
  EXPECT_EQ(clock.waiters(), 0);
}

}  // namespace
}  // namespace bloomtime

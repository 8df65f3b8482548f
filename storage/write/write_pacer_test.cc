// WritePacer: the schedule it charges (with chosen times), and waits that Stop and Rush end.
#include "storage/write/write_pacer.h"

#include <atomic>
#include <functional>
#include <thread>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(WritePacerTest, FirstWriteAfterQuietGoesAtOnceAndFollowersWaitTheirTurn) {
  WritePacer pacer(4 * kMiB);  // 4 MiB/s: 1 MiB takes 250 ms
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_EQ(pacer.Charge(start, kMiB), absl::ZeroDuration());
  EXPECT_EQ(pacer.Charge(start, kMiB), absl::Milliseconds(250));
  EXPECT_EQ(pacer.Charge(start + absl::Milliseconds(100), 2 * kMiB), absl::Milliseconds(400));
  // The charged writes end at start + 1 s; a write after a quiet spell is not held back for
  // the time that went unused (no credit is saved up either).
  EXPECT_EQ(pacer.Charge(start + absl::Seconds(5), kMiB), absl::ZeroDuration());
  EXPECT_EQ(pacer.Charge(start + absl::Seconds(5), kMiB), absl::Milliseconds(250));
}

TEST(WritePacerTest, ZeroRateNeverWaits) {
  WritePacer pacer(0);
  const absl::Time now = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pacer.Charge(now, 1 << 30), absl::ZeroDuration());
}

TEST(WritePacerTest, RushSuspendsPacingWhileItLasts) {
  WritePacer pacer(kMiB);
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_EQ(pacer.Charge(now, kMiB), absl::ZeroDuration());
  {
    const WritePacer::Rush rush(&pacer);
    EXPECT_EQ(pacer.Charge(now, 100 * kMiB), absl::ZeroDuration());
  }
  EXPECT_EQ(pacer.Charge(now, kMiB), absl::Seconds(1));
  const WritePacer::Rush no_pacer(nullptr);  // a store without a pacer: harmless
}

// A write scheduled an hour out waits until the clock gets there: a minute short it still
// waits; the hour (or a Stop, or a Rush) ends the wait.
void ExpectWaitEndedBy(const std::function<void(WritePacer&, bloomtime::ManualClock&)>& end_wait) {
  bloomtime::ManualClock clock;
  WritePacer pacer(1, &clock);  // one byte a second
  pacer.Pace(3600);             // at once: nothing was charged before it
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    pacer.Pace(1);  // waits for the hour charged above
    returned = true;
  });
  ASSERT_TRUE(bloomtest::WaitFor([&] { return clock.waiters() == 1; }));
  clock.Advance(absl::Minutes(59));
  EXPECT_FALSE(returned.load());
  EXPECT_EQ(clock.waiters(), 1);
  end_wait(pacer, clock);
  waiter.join();
  EXPECT_TRUE(returned.load());
}

TEST(WritePacerTest, AWaitEndsWhenItsTurnComes) {
  ExpectWaitEndedBy(
      [](WritePacer&, bloomtime::ManualClock& clock) { clock.Advance(absl::Minutes(1)); });
}

TEST(WritePacerTest, StopEndsAWaitAndPacingForGood) {
  ExpectWaitEndedBy([](WritePacer& pacer, bloomtime::ManualClock&) { pacer.Stop(); });
  WritePacer pacer(1);
  pacer.Stop();
  EXPECT_EQ(pacer.Charge(absl::Now(), 1 << 30), absl::ZeroDuration());
  EXPECT_EQ(pacer.Charge(absl::Now(), 1 << 30), absl::ZeroDuration());
}

TEST(WritePacerTest, RushEndsAWait) {
  ExpectWaitEndedBy(
      [](WritePacer& pacer, bloomtime::ManualClock&) { const WritePacer::Rush rush(&pacer); });
}

}  // namespace
}  // namespace storage

// The checkpointer's thread: it runs the pass once per period, stops when asked (also in the
// middle of its wait), and stops by itself when the pass says the store is closing.
#include "storage/checkpoint/checkpointer.h"

#include <atomic>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

// Whether the checkpointer's thread is waiting for its next period on `clock`.
bool Waiting(const bloomtime::ManualClock& clock) {
  return bloomtest::WaitFor([&] { return clock.waiters() == 1; });
}

TEST(CheckpointerTest, RunsThePassEachPeriodUntilStopped) {
  bloomtime::ManualClock clock;
  const absl::Time start = clock.Now();
  std::atomic<int> passes{0};
  std::atomic<int64_t> last_pass_micros{0};
  Checkpointer checkpointer(
      absl::Seconds(1),
      [&](absl::Time now) {
        last_pass_micros = absl::ToUnixMicros(now);
        ++passes;
        return true;
      },
      &clock);
  for (int period = 1; period <= 3; ++period) {
    ASSERT_TRUE(Waiting(clock));
    // Most of a period is not enough.
    clock.Advance(absl::Milliseconds(999));
    EXPECT_EQ(passes.load(), period - 1);
    clock.Advance(absl::Milliseconds(1));
    ASSERT_TRUE(bloomtest::WaitFor([&] { return passes.load() == period; }));
    EXPECT_EQ(absl::FromUnixMicros(last_pass_micros.load()), start + absl::Seconds(period));
  }
  ASSERT_TRUE(Waiting(clock));
  EXPECT_FALSE(checkpointer.stop_requested());
  checkpointer.Stop();  // joins the thread: no pass can follow
  EXPECT_TRUE(checkpointer.stop_requested());
  EXPECT_EQ(clock.waiters(), 0);
  clock.Advance(absl::Hours(1));
  EXPECT_EQ(passes.load(), 3);
  checkpointer.Stop();  // idempotent
}

TEST(CheckpointerTest, StopDoesNotWaitForThePeriod) {
  Checkpointer checkpointer(absl::Hours(1), [](absl::Time) {
    ADD_FAILURE() << "no pass is due within the test";
    return true;
  });
  const absl::Time start = absl::Now();
  checkpointer.Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(CheckpointerTest, APassThatSaysClosingEndsTheThread) {
  bloomtime::ManualClock clock;
  std::atomic<int> passes{0};
  Checkpointer checkpointer(
      absl::Seconds(1),
      [&](absl::Time) {
        ++passes;
        return false;
      },
      &clock);
  ASSERT_TRUE(Waiting(clock));
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(bloomtest::WaitFor([&] { return passes.load() == 1; }));
  // The thread ended instead of waiting for another period.
  ASSERT_TRUE(bloomtest::WaitFor([&] { return clock.waiters() == 0; }));
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(passes.load(), 1);
  checkpointer.Stop();
}

}  // namespace
}  // namespace storage

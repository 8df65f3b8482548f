// The checkpointer's thread: it runs the pass once per period, stops when asked (also in the
// middle of its wait), and stops by itself when the pass says the store is closing.
#include "storage/checkpoint/checkpointer.h"

#include <atomic>

#include "absl/time/clock.h"
#include "common/testing.h"
#include "gtest/gtest.h"

namespace storage {
namespace {

TEST(CheckpointerTest, RunsThePassEachPeriodUntilStopped) {
  std::atomic<int> passes{0};
  Checkpointer checkpointer(absl::Milliseconds(5), [&](absl::Time now) {
    EXPECT_LE(now, absl::Now());
    ++passes;
    return true;
  });
  ASSERT_TRUE(bloomtest::WaitFor([&] { return passes.load() >= 3; }));
  EXPECT_FALSE(checkpointer.stop_requested());
  checkpointer.Stop();
  EXPECT_TRUE(checkpointer.stop_requested());
  const int after_stop = passes.load();
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(passes.load(), after_stop);  // joined: no pass after Stop()
  checkpointer.Stop();                   // idempotent
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
  std::atomic<int> passes{0};
  Checkpointer checkpointer(absl::Milliseconds(1), [&](absl::Time) {
    ++passes;
    return false;
  });
  ASSERT_TRUE(bloomtest::WaitFor([&] { return passes.load() >= 1; }));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(passes.load(), 1);
  checkpointer.Stop();
}

}  // namespace
}  // namespace storage

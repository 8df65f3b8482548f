#include "replication/applied_waiters.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace replication {
namespace {

// What a waiter was told, and what had been applied when it was told.
struct Answer {
  std::atomic<int> calls{0};
  std::atomic<bool> applied{false};
  std::atomic<uint64_t> applied_then{0};
  std::atomic<bool> answered_inline{false};
  std::atomic<bool> wait_returned{false};
};

class AppliedWaitersTest : public ::testing::Test {
 protected:
  // Waits on `waiters` for `sequence` until `deadline`, recording the answer in `answer`.
  void Wait(AppliedWaiters& waiters, uint64_t sequence, absl::Time deadline, Answer& answer) {
    waiters.Wait(sequence, deadline, [this, &answer](bool applied) {
      answer.answered_inline.store(!answer.wait_returned.load());
      answer.applied_then.store(applied_.load());
      answer.applied.store(applied);
      answer.calls.fetch_add(1);
    });
    answer.wait_returned.store(true);
  }

  std::atomic<uint64_t> applied_{5};
};

TEST_F(AppliedWaitersTest, AnAppliedSequenceIsAnsweredAtOnceOnTheCallersThread) {
  AppliedWaiters waiters([this] { return applied_.load(); }, 8);
  Answer answer;
  Wait(waiters, 5, absl::Now() + absl::Seconds(10), answer);
  EXPECT_EQ(answer.calls.load(), 1);
  EXPECT_TRUE(answer.applied.load());
  EXPECT_TRUE(answer.answered_inline.load());
  EXPECT_EQ(waiters.waiting(), 0u);
}

TEST_F(AppliedWaitersTest, AWaiterIsAnsweredTrueOnceItsSequenceIsApplied) {
  AppliedWaiters waiters([this] { return applied_.load(); }, 8);
  Answer answer;
  Wait(waiters, 10, absl::Now() + absl::Seconds(30), answer);
  EXPECT_EQ(waiters.waiting(), 1u);
  applied_.store(9);
  const uint64_t looks = waiters.looks();
  waiters.Notify();
  ASSERT_TRUE(bloomtest::WaitFor([&] { return waiters.looks() > looks; }));
  EXPECT_EQ(answer.calls.load(), 0) << "answered before its sequence was applied";
  applied_.store(10);
  waiters.Notify();
  ASSERT_TRUE(bloomtest::WaitFor([&] { return answer.calls.load() > 0; }));
  EXPECT_TRUE(answer.applied.load());
  EXPECT_GE(answer.applied_then.load(), 10u);
  EXPECT_FALSE(answer.answered_inline.load());
  EXPECT_EQ(answer.calls.load(), 1);
  EXPECT_EQ(waiters.waiting(), 0u);
}

TEST_F(AppliedWaitersTest, AnAppliedSequenceIsSeenWithoutANotify) {
  AppliedWaiters waiters([this] { return applied_.load(); }, 8);
  Answer answer;
  Wait(waiters, 7, absl::Now() + absl::Seconds(30), answer);
  applied_.store(7);  // no Notify: the periodic look finds it
  ASSERT_TRUE(bloomtest::WaitFor([&] { return answer.calls.load() > 0; }));
  EXPECT_TRUE(answer.applied.load());
}

TEST_F(AppliedWaitersTest, AWaiterIsAnsweredFalseAtItsDeadlineAndNotBefore) {
  bloomtime::ManualClock clock;
  AppliedWaiters waiters([this] { return applied_.load(); }, 8, &clock);
  Answer late;
  Answer early;
  const absl::Time start = clock.Now();
  Wait(waiters, 100, start + absl::Seconds(30), late);
  Wait(waiters, 100, start + absl::Milliseconds(200), early);
  ASSERT_TRUE(bloomtest::WaitFor([&] { return clock.waiters() == 1; }));
  // Short of the deadline the waiters' thread looks again (every 50 ms of its clock) and
  // leaves the waiter waiting.
  const uint64_t looks = waiters.looks();
  clock.Advance(absl::Milliseconds(199));
  ASSERT_TRUE(bloomtest::WaitFor([&] { return waiters.looks() > looks; }));
  EXPECT_EQ(early.calls.load(), 0) << "answered before its deadline";
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(bloomtest::WaitFor([&] { return early.calls.load() > 0; }));
  EXPECT_FALSE(early.applied.load());
  EXPECT_EQ(late.calls.load(), 0) << "a later deadline was answered with the earlier one";
  EXPECT_EQ(waiters.waiting(), 1u);
  waiters.Stop();  // answers `late` while it still exists
  EXPECT_EQ(late.calls.load(), 1);
  EXPECT_FALSE(late.applied.load());
}

TEST_F(AppliedWaitersTest, APassedDeadlineIsAnsweredFalseAtOnce) {
  AppliedWaiters waiters([this] { return applied_.load(); }, 8);
  Answer answer;
  Wait(waiters, 100, absl::Now() - absl::Seconds(1), answer);
  EXPECT_EQ(answer.calls.load(), 1);
  EXPECT_FALSE(answer.applied.load());
  EXPECT_TRUE(answer.answered_inline.load());
}

TEST_F(AppliedWaitersTest, BeyondMaxWaitingACallIsAnsweredFalseAtOnce) {
  AppliedWaiters waiters([this] { return applied_.load(); }, 2);
  Answer first;
  Answer second;
  Answer third;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  Wait(waiters, 50, deadline, first);
  Wait(waiters, 60, deadline, second);
  Wait(waiters, 70, deadline, third);
  EXPECT_EQ(third.calls.load(), 1);
  EXPECT_FALSE(third.applied.load());
  EXPECT_TRUE(third.answered_inline.load());
  EXPECT_EQ(waiters.waiting(), 2u);
  // An answered waiter frees its place.
  applied_.store(50);
  waiters.Notify();
  ASSERT_TRUE(bloomtest::WaitFor([&] { return first.calls.load() > 0; }));
  Answer fourth;
  Wait(waiters, 80, deadline, fourth);
  EXPECT_EQ(fourth.calls.load(), 0);
  EXPECT_EQ(waiters.waiting(), 2u);
  waiters.Stop();  // answers the waiting ones while they still exist
  EXPECT_EQ(second.calls.load(), 1);
  EXPECT_EQ(fourth.calls.load(), 1);
}

TEST_F(AppliedWaitersTest, StopAnswersEveryWaiterFalseAndLaterCallsAtOnce) {
  AppliedWaiters waiters([this] { return applied_.load(); }, 8);
  std::vector<Answer> answers(5);
  for (size_t i = 0; i < answers.size(); ++i) {
    Wait(waiters, 10 + i, absl::Now() + absl::Seconds(30), answers[i]);
  }
  waiters.Stop();
  for (const Answer& answer : answers) {
    EXPECT_EQ(answer.calls.load(), 1);
    EXPECT_FALSE(answer.applied.load());
  }
  Answer later;
  Wait(waiters, 10, absl::Now() + absl::Seconds(30), later);
  EXPECT_EQ(later.calls.load(), 1);
  EXPECT_FALSE(later.applied.load());
  EXPECT_EQ(waiters.waiting(), 0u);
}

// Many threads wait on sequences while another applies them one by one: every waiter is told
// exactly once, true, and never before its sequence was applied.
TEST_F(AppliedWaitersTest, ConcurrentWaitersAreEachAnsweredOnceWhenTheirSequenceComes) {
  applied_.store(0);
  AppliedWaiters waiters([this] { return applied_.load(); }, 100'000);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  constexpr uint64_t kLast = 200;
  std::vector<Answer> answers(static_cast<size_t>(kThreads) * kPerThread);
  std::vector<uint64_t> sequences(answers.size());
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const size_t k = t * kPerThread + i;
        sequences[k] = 1 + (k * 7919) % kLast;
        Wait(waiters, sequences[k], absl::Now() + absl::Seconds(60), answers[k]);
      }
    });
  }
  std::thread applier([&] {
    for (uint64_t s = 1; s <= kLast; ++s) {
      applied_.store(s);
      waiters.Notify();
      std::this_thread::yield();
    }
  });
  for (std::thread& thread : threads) thread.join();
  applier.join();
  ASSERT_TRUE(bloomtest::WaitFor([&] { return waiters.waiting() == 0; }));
  for (size_t k = 0; k < answers.size(); ++k) {
    ASSERT_TRUE(bloomtest::WaitFor([&] { return answers[k].calls.load() > 0; })) << k;
    EXPECT_EQ(answers[k].calls.load(), 1) << k;
    EXPECT_TRUE(answers[k].applied.load()) << k;
    EXPECT_GE(answers[k].applied_then.load(), sequences[k]) << k;
  }
}

}  // namespace
}  // namespace replication

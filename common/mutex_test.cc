// bloomsync::Mutex: exclusion, shared holders, writer preference and waking sleepers. Run under
// ThreadSanitizer by the test command, which also checks the lock's acquire/release ordering:
// the plain counters below are guarded only by it.
#include "common/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

// These tests lock and unlock by hand, across threads and in patterns the lock analysis cannot
// follow (TryLock in loops, a lock taken in one scope and released in another): they test the
// lock itself, which the analysis takes on trust everywhere else.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wthread-safety-analysis"
#endif

namespace bloomsync {
namespace {

TEST(MutexTest, WritersExcludeEachOtherAndReaders) {
  Mutex mu;
  uint64_t counter = 0;  // guarded by mu
  uint64_t shadow = 0;   // always equal to counter under the lock
  std::atomic<bool> mismatch{false};
  std::vector<std::thread> threads;
  constexpr int kWriters = 4, kReaders = 4, kRounds = 20'000;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        MutexLock lock(&mu);
        ++counter;
        ++shadow;
      }
    });
  }
  for (int t = 0; t < kReaders; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        ReaderMutexLock lock(&mu);
        if (counter != shadow) mismatch = true;  // a writer between the two increments
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_FALSE(mismatch.load());
  EXPECT_EQ(counter, uint64_t{kWriters} * kRounds);
}

TEST(MutexTest, ReadersShareTheLock) {
  Mutex mu;
  mu.ReaderLock();
  EXPECT_TRUE(mu.ReaderTryLock());
  EXPECT_FALSE(mu.TryLock());
  mu.ReaderUnlock();
  EXPECT_FALSE(mu.TryLock());
  mu.ReaderUnlock();
  EXPECT_TRUE(mu.TryLock());
  EXPECT_FALSE(mu.ReaderTryLock());
  EXPECT_FALSE(mu.TryLock());
  mu.Unlock();
  EXPECT_TRUE(mu.ReaderTryLock());
  mu.ReaderUnlock();
}

TEST(MutexTest, AWaitingWriterHoldsOffNewReadersAndGetsTheLock) {
  Mutex mu;
  mu.ReaderLock();
  std::atomic<bool> writer_in{false};
  std::thread writer([&] {
    MutexLock lock(&mu);
    writer_in = true;
  });
  // Once the writer waits, a new reader may not join the holder (that would starve writers).
  bool reader_refused = false;
  for (int i = 0; i < 10'000 && !reader_refused; ++i) {
    if (mu.ReaderTryLock()) {
      mu.ReaderUnlock();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    } else {
      reader_refused = true;
    }
  }
  EXPECT_TRUE(reader_refused);
  EXPECT_FALSE(writer_in.load());
  mu.ReaderUnlock();  // the last reader wakes the sleeping writer
  writer.join();
  EXPECT_TRUE(writer_in.load());
  EXPECT_TRUE(mu.TryLock());
  mu.Unlock();
}

TEST(MutexTest, SleepersOfBothKindsWakeWhenTheWriterLeaves) {
  Mutex mu;
  mu.Lock();
  std::atomic<int> entered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      ReaderMutexLock lock(&mu);
      ++entered;
    });
    threads.emplace_back([&] {
      MutexLock lock(&mu);
      ++entered;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let them go to sleep
  EXPECT_EQ(entered.load(), 0);
  mu.Unlock();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(entered.load(), 6);
}

}  // namespace
}  // namespace bloomsync

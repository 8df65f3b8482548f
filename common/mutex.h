// A reader-writer mutex in one 32-bit word, with Abseil's thread-safety annotations.
//
// Why not absl::Mutex: Debian's libabsl is built without ThreadSanitizer instrumentation, so
// TSAN cannot see its synchronisation and reports every access it guards as a race. This lock
// is built from std::atomic operations (acquire on lock, release on unlock), which every
// sanitizer sees, and sleeps with std::atomic::wait (a futex on Linux).
// Why not pthread_rwlock_t: 56 bytes. Every filter has four locks, and a server holds millions
// of small per-user filters.
//
// The lock prefers writers: once a writer waits, new readers wait too, so a checkpoint waiting
// for the exclusive lock is not starved by a steady stream of shared holders. A thread that
// must wait sets kSleepers; whoever releases the lock with kSleepers set clears it and wakes
// every sleeper, and those that still cannot proceed set it again and sleep. Uncontended lock
// and unlock are one atomic read-modify-write each and never enter the kernel.
//
//   bloomsync::Mutex mu;
//   int value ABSL_GUARDED_BY(mu);
//   { bloomsync::MutexLock lock(&mu); ++value; }
//   { bloomsync::ReaderMutexLock lock(&mu); Read(value); }
//
// Where a thread sleeps until something changes, use BlockingMutex and CondVar
// (blocking_mutex.h): a condition variable needs a std::mutex. The server has no other lock
// types, so clang checks every ABSL_GUARDED_BY.
//
// Thread-safety: it is a mutex. Not recursive; unlocking a lock not held is undefined.
#ifndef COMMON_MUTEX_H_
#define COMMON_MUTEX_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"

namespace bloomsync {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    uint32_t expected = 0;
    if (!state_.compare_exchange_strong(expected, kWriter, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      LockSlow();
    }
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    // Clears kWriterWaiting too: a writer still waiting sets it again when it wakes.
    if (state_.exchange(0, std::memory_order_release) & kSleepers) state_.notify_all();
  }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() {
    uint32_t state = state_.load(std::memory_order_relaxed);
    if ((state & (kWriter | kWriterWaiting)) != 0 ||
        !state_.compare_exchange_strong(state, state + 1, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      ReaderLockSlow();
    }
  }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() {
    const uint32_t before = state_.fetch_sub(1, std::memory_order_release);
    // Only the last reader can let a waiting writer in (readers wait only for writers).
    if ((before & kReaderMask) == 1 && (before & kSleepers) != 0) WakeSleepers();
  }
  // Without waiting: false if the lock is held (for the shared form, also when a writer is
  // waiting for it: the lock prefers writers).
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    uint32_t state = state_.load(std::memory_order_relaxed);
    while ((state & (kWriter | kReaderMask)) == 0) {
      if (state_.compare_exchange_weak(state, (state & kSleepers) | kWriter,
                                       std::memory_order_acquire, std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  bool ReaderTryLock() ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    uint32_t state = state_.load(std::memory_order_relaxed);
    while ((state & (kWriter | kWriterWaiting)) == 0) {
      if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

 private:
  static constexpr uint32_t kWriter = 1u << 31;         // held exclusively
  static constexpr uint32_t kWriterWaiting = 1u << 30;  // new readers must wait
  static constexpr uint32_t kSleepers = 1u << 29;       // someone may sleep in wait()
  static constexpr uint32_t kReaderMask = kSleepers - 1;

  void LockSlow() {
    uint32_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if ((state & (kWriter | kReaderMask)) == 0) {
        // Free (kWriterWaiting may be ours or another writer's; kSleepers stays for Unlock).
        if (state_.compare_exchange_weak(state, (state & kSleepers) | kWriter,
                                         std::memory_order_acquire, std::memory_order_relaxed)) {
          return;
        }
        continue;
      }
      const uint32_t waiting = state | kWriterWaiting | kSleepers;
      if (state != waiting &&
          !state_.compare_exchange_weak(state, waiting, std::memory_order_relaxed)) {
        continue;
      }
      state_.wait(waiting, std::memory_order_relaxed);
      state = state_.load(std::memory_order_relaxed);
    }
  }
  void ReaderLockSlow() {
    uint32_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if ((state & (kWriter | kWriterWaiting)) == 0) {
        if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
          return;
        }
        continue;
      }
      const uint32_t waiting = state | kSleepers;
      if (state != waiting &&
          !state_.compare_exchange_weak(state, waiting, std::memory_order_relaxed)) {
        continue;
      }
      state_.wait(waiting, std::memory_order_relaxed);
      state = state_.load(std::memory_order_relaxed);
    }
  }
  void WakeSleepers() {
    // A sleeper that set kSleepers after this clear has not slept yet: its wait() sees the
    // word changed and returns, or sleeps on a value with kSleepers, which the next release
    // of whatever it waits for clears again.
    state_.fetch_and(~kSleepers, std::memory_order_relaxed);
    state_.notify_all();
  }

  std::atomic<uint32_t> state_{0};
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};
using WriterMutexLock = MutexLock;

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace bloomsync

#endif  // COMMON_MUTEX_H_

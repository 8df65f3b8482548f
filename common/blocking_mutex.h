// A std::mutex and std::condition_variable the compiler's thread-safety analysis can see.
//
// bloomsync::Mutex (mutex.h) is the lock where size matters (every filter has four). This one
// is for the places where a thread sleeps until something changes (a queue's consumer, a
// thread's periodic wait, an acknowledgement): a condition variable needs a std::mutex. The
// wrappers carry Abseil's annotations, so ABSL_GUARDED_BY on what they guard is checked by
// clang's -Wthread-safety (CMakeLists.txt turns it on, as an error, for clang builds).
//
//   bloomsync::BlockingMutex mu_;
//   bloomsync::CondVar ready_;
//   std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
//
//   bloomsync::BlockingLock lock(&mu_);
//   ready_.Wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); });
//   Work work = std::move(queue_.front());
//   lock.Unlock();  // run it without the lock; Lock() takes it again
//
// A predicate passed to a wait runs with the lock held: annotate it so the analysis checks
// what it reads (the wait itself cannot tell the analysis that it holds the lock).
//
// Thread-safety: they are the synchronisation. Not recursive.
#ifndef COMMON_BLOCKING_MUTEX_H_
#define COMMON_BLOCKING_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace bloomsync {

class ABSL_LOCKABLE BlockingMutex {
 public:
  BlockingMutex() = default;
  BlockingMutex(const BlockingMutex&) = delete;
  BlockingMutex& operator=(const BlockingMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class BlockingLock;
  std::mutex mu_;
};

// Holds a BlockingMutex for its scope; Unlock() and Lock() let go of it and take it again
// within the scope (the analysis follows both).
class ABSL_SCOPED_LOCKABLE BlockingLock {
 public:
  explicit BlockingLock(BlockingMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu->mu_) {}
  ~BlockingLock() ABSL_UNLOCK_FUNCTION() = default;
  BlockingLock(const BlockingLock&) = delete;
  BlockingLock& operator=(const BlockingLock&) = delete;

  void Unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// A condition variable waited on with a BlockingLock held. As std::condition_variable: a wait
// may wake for no reason, so wait for a condition (the predicate forms loop on it).
class CondVar {
 public:
  void Wait(BlockingLock& lock) { cv_.wait(lock.lock_); }
  template <typename Ready>
  void Wait(BlockingLock& lock, Ready ready) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    cv_.wait(lock.lock_, std::move(ready));
  }
  // False when the time ran out (std::cv_status::timeout).
  template <typename Rep, typename Period>
  bool WaitFor(BlockingLock& lock, const std::chrono::duration<Rep, Period>& time) {
    return cv_.wait_for(lock.lock_, time) == std::cv_status::no_timeout;
  }
  // What `ready()` returns at the end: false when the time ran out first.
  template <typename Rep, typename Period, typename Ready>
  bool WaitFor(BlockingLock& lock, const std::chrono::duration<Rep, Period>& time,
               Ready ready) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return cv_.wait_for(lock.lock_, time, std::move(ready));
  }
  template <typename Clock, typename Duration, typename Ready>
  bool WaitUntil(BlockingLock& lock, const std::chrono::time_point<Clock, Duration>& deadline,
                 Ready ready) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return cv_.wait_until(lock.lock_, deadline, std::move(ready));
  }

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace bloomsync

#endif  // COMMON_BLOCKING_MUTEX_H_

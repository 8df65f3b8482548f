// A reader-writer mutex with Abseil's thread-safety annotations, over pthread_rwlock.
//
// Why not absl::Mutex: Debian's libabsl is built without ThreadSanitizer instrumentation, so
// TSAN cannot see its synchronisation and reports every access it guards as a race. pthread
// locks are intercepted by every sanitizer. The lock prefers writers, so a checkpoint waiting
// for the exclusive lock is not starved by a steady stream of shared holders.
//
//   bloomsync::Mutex mu;
//   int value ABSL_GUARDED_BY(mu);
//   { bloomsync::MutexLock lock(&mu); ++value; }
//   { bloomsync::ReaderMutexLock lock(&mu); Read(value); }
//
// Thread-safety: it is a mutex. Not recursive.
#ifndef COMMON_MUTEX_H_
#define COMMON_MUTEX_H_

#include <pthread.h>

#include <cstdlib>

#include "absl/base/thread_annotations.h"

namespace bloomsync {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    if (pthread_rwlock_init(&lock_, &attr) != 0) std::abort();
    pthread_rwlockattr_destroy(&attr);
  }
  ~Mutex() { pthread_rwlock_destroy(&lock_); }
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { pthread_rwlock_wrlock(&lock_); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { pthread_rwlock_unlock(&lock_); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { pthread_rwlock_rdlock(&lock_); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { pthread_rwlock_unlock(&lock_); }
  // Without waiting: false if the lock is held (for the shared form, also when a writer is
  // waiting for it: the lock prefers writers).
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return pthread_rwlock_trywrlock(&lock_) == 0;
  }
  bool ReaderTryLock() ABSL_SHARED_TRYLOCK_FUNCTION(true) {
    return pthread_rwlock_tryrdlock(&lock_) == 0;
  }

 private:
  pthread_rwlock_t lock_;
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

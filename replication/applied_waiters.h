// AppliedWaiters: reads on a follower that wait for it to apply a sequence (a caller's
// `min_sequence`: read your writes), without holding a thread each.
//
// A read asking for a sequence the follower has not applied yet waits a moment for it, and is
// forwarded to the primary if it does not come. Waiting on the gRPC thread that received the
// call would let a client blind a follower: a few hundred such calls (any read token will do,
// with a min_sequence nobody will reach) hold every gRPC thread for their whole wait, and
// every other call queues behind them. Here a waiting call is an entry in a table; one thread
// answers the entries whose sequence has come or whose deadline has passed, and at most
// `max_waiting` wait at once (beyond that a call is told "not applied" at once, and goes to the
// primary).
//
//   AppliedWaiters waiters([&] { return store->VisibleSequence(); }, /*max_waiting=*/4096);
//   waiters.Wait(sequence, deadline, [](bool applied) { applied ? Serve() : Forward(); });
//   ... after applying a batch: waiters.Notify();
//
// Thread-safety: thread-safe. `done` runs at most once per Wait, on the caller's thread (when
// the answer is known at once) or on the waiters' thread; it must not block.
#ifndef REPLICATION_APPLIED_WAITERS_H_
#define REPLICATION_APPLIED_WAITERS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "common/clock.h"

namespace replication {

class AppliedWaiters {
 public:
  using Done = absl::AnyInvocable<void(bool applied) &&>;

  // `applied_sequence` says what has been applied (and is visible to reads); it is called
  // with no lock of the waiters held. Deadlines are read on `clock` (common/clock.h).
  AppliedWaiters(std::function<uint64_t()> applied_sequence, size_t max_waiting,
                 const bloomtime::Clock* clock = bloomtime::Clock::Real());
  ~AppliedWaiters();  // Stop()
  AppliedWaiters(const AppliedWaiters&) = delete;
  AppliedWaiters& operator=(const AppliedWaiters&) = delete;

  // done(true) once applied_sequence() >= `sequence` (at once if it is already); done(false)
  // at `deadline`, at Stop(), or at once when `max_waiting` calls wait already.
  void Wait(uint64_t sequence, absl::Time deadline, Done done);
  // The applied sequence may have grown: answers the waiters it reaches (on the waiters'
  // thread, not the caller's).
  void Notify();
  // Answers every waiter false (on the caller's thread) and every later Wait false at once;
  // joins the waiters' thread.
  void Stop();

  size_t waiting() const;
  // How many times the waiters' thread has read applied_sequence(): a test waits for it to
  // grow to know a Notify was looked at.
  uint64_t looks() const { return looks_.load(); }

 private:
  void Run();

  const std::function<uint64_t()> applied_sequence_;
  const size_t max_waiting_;
  const bloomtime::Clock* const clock_;
  std::atomic<uint64_t> looks_{0};

  mutable bloomsync::BlockingMutex mu_;
  bloomsync::CondVar wake_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;  // Notify() since the thread last looked
  // The waiting calls in two orders, by sequence and by deadline; each entry
  // points at its twin in the other (a multimap's iterators stay valid until erased).
  struct BySequence;
  struct ByDeadline;
  using SequenceOrder = std::multimap<uint64_t, BySequence>;
  using DeadlineOrder = std::multimap<absl::Time, ByDeadline>;
  struct BySequence {
    Done done;
    DeadlineOrder::iterator twin;
  };
  struct ByDeadline {
    SequenceOrder::iterator twin;
  };
  SequenceOrder by_sequence_ ABSL_GUARDED_BY(mu_);
  DeadlineOrder by_deadline_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // started by the first Wait that waits
};

}  // namespace replication

#endif  // REPLICATION_APPLIED_WAITERS_H_

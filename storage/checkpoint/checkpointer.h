// Checkpointer: the thread that runs a FilterStore's checkpoint passes, one per period, until
// it is stopped.
//
// The pass itself belongs to the store (FilterStore::RunCheckpointPass: reopen RocksDB after a
// write error, checkpoint due filters, delete idle ones); this class owns only the timing and
// the stop, so tests run passes by hand at the moments they choose instead of sleeping; its
// period is measured on a Clock (common/clock.h), which its own tests step.
//
//   Checkpointer checkpointer(absl::Seconds(1),
//                             [store](absl::Time now) { return store->RunCheckpointPass(now); });
//   ...
//   checkpointer.Stop();  // waits for a pass in progress
//
// Thread-safety: Stop() and stop_requested() may be called from any thread; the pass runs on
// the checkpointer's own thread.
#ifndef STORAGE_CHECKPOINT_CHECKPOINTER_H_
#define STORAGE_CHECKPOINT_CHECKPOINTER_H_

#include <atomic>
#include <functional>
#include <thread>

#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "common/clock.h"

namespace storage {

class Checkpointer {
 public:
  // One pass at time `now` (of the checkpointer's clock); false: the store is closing, stop.
  using Pass = std::function<bool(absl::Time now)>;

  // Starts the thread: it waits `period`, runs `pass`, and again. The pass may start before
  // the constructor's caller has stored the object, so it must not reach the Checkpointer
  // through the caller's pointer; a pass that should stop early watches a flag its owner sets
  // before calling Stop() (FilterStore's closing_).
  Checkpointer(absl::Duration period, Pass pass,
               const bloomtime::Clock* clock = bloomtime::Clock::Real());
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;
  ~Checkpointer() { Stop(); }

  // Asks the thread to stop and joins it, after the pass in progress. Idempotent.
  void Stop();

  // Whether Stop() was called.
  bool stop_requested() const { return stop_requested_.load(std::memory_order_relaxed); }

 private:
  void Loop();

  const absl::Duration period_;
  const bloomtime::Clock* const clock_;
  const Pass pass_;
  bloomsync::BlockingMutex mu_;
  bloomsync::CondVar stop_cv_;
  // Set under mu_, so that the thread's wait cannot miss it; read anywhere.
  std::atomic<bool> stop_requested_{false};
  std::thread thread_;
};

}  // namespace storage

#endif  // STORAGE_CHECKPOINT_CHECKPOINTER_H_

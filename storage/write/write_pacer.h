// WritePacer: spreads the page writes of large checkpoints over time, at a byte rate.
//
// A checkpoint of a filter whose pages all changed rewrites all of them: 120 MB for a filter of
// 100M items at 1%. Written at once, that is a burst on the disk, in RocksDB's write queue
// (adds wait behind it), and through the log to every follower, which is behind for as long as
// it takes to receive, write and fsync the burst. Paced, the same bytes go out as a stream of
// 1 MiB writes. Correctness does not depend on the pace: the checkpoint's journal sequence is
// taken before its first page is written, pages only gain bits, and replaying journal records
// onto pages that already hold them changes nothing.
//
//   WritePacer pacer(64 << 20);        // 64 MiB/s; 0: never waits
//   pacer.Pace(batch.GetDataSize());   // before each write of a paced checkpoint
//   WritePacer::Rush rush(&pacer);     // while someone waits for a checkpoint to finish
//   pacer.Stop();                      // closing: never waits again
//
// Only writes that follow one another wait: the first write after a quiet spell goes at once,
// so a checkpoint of less than one batch (every small filter) never waits.
//
// Thread-safety: thread-safe.
#ifndef STORAGE_WRITE_WRITE_PACER_H_
#define STORAGE_WRITE_WRITE_PACER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "common/clock.h"

namespace storage {

class WritePacer {
 public:
  // Writes are paced to `bytes_per_second`; 0 turns pacing off.
  // Waits are measured on `clock` (common/clock.h; tests step a ManualClock).
  explicit WritePacer(uint64_t bytes_per_second,
                      const bloomtime::Clock* clock = bloomtime::Clock::Real())
      : bytes_per_second_(bytes_per_second), clock_(clock) {}
  WritePacer(const WritePacer&) = delete;
  WritePacer& operator=(const WritePacer&) = delete;

  // Charges a write of `bytes` that is about to start, and waits until the writes charged
  // before it have had their time at the rate. Returns at once when pacing is off, stopped, or
  // rushed (and wakes up when that changes while it waits).
  void Pace(uint64_t bytes);

  // How long a write of `bytes` charged at `now` waits, and charges it (Pace without the wait;
  // tests call it with chosen times).
  absl::Duration Charge(absl::Time now, uint64_t bytes);

  // Pacing stops for good (the store is closing: its final checkpoints go at full speed).
  void Stop();

  // While a Rush exists, Pace does not wait: a Delete or an eviction that must wait for a
  // filter's checkpoint to end does not wait for its pace. Null pacer: does nothing.
  class Rush {
   public:
    explicit Rush(WritePacer* pacer);
    Rush(const Rush&) = delete;
    Rush& operator=(const Rush&) = delete;
    ~Rush();

   private:
    WritePacer* const pacer_;
  };

 private:
  bool Unpaced() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return bytes_per_second_ == 0 || stopped_ || rushes_ > 0;
  }

  const uint64_t bytes_per_second_;
  const bloomtime::Clock* const clock_;
  bloomsync::BlockingMutex mu_;
  bloomsync::CondVar unpaced_cv_;
  // When the writes charged so far have had their time; a write charged later starts then.
  absl::Time free_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int rushes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rushes_started_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace storage

#endif  // STORAGE_WRITE_WRITE_PACER_H_

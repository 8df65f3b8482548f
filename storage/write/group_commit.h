// GroupCommitter: the adds of many threads served by one OperationBatch, on whichever thread
// is already serving (flat combining): concurrent writers share one RocksDB write, and none of
// them waits for another.
//
// Why: on a busy server, Add calls and Pipeline streams each bring one add at a time (what
// any generated client sends). Each made its own RocksDB write. RocksDB joins concurrent writes
// into a write group, but every follower thread sleeps (sched_yield, then a futex) until its
// leader has written, and those sleeping threads are gRPC's, which should be reading the next
// messages (tests/bench/compare.sh scenarios 3 and 5 measure the server CPU per add).
//
// Here a thread that submits a job while another serves leaves the job queued and returns at
// once. The serving thread takes every job queued meanwhile, queues all their operations in
// one OperationBatch (one write for all of them; with --sync their WhenDurable calls then
// share the syncer's fsync), lets each job take its answers, destroys the batch, and only then
// calls each job's Done(). Alone, a
// job is served at once on its own thread: nothing waits on a timer.
//
//   class StreamJob : public storage::GroupCommitter::Job { ... };
//   committer.Submit(&job);  // may serve other threads' jobs before returning, or none
//
// Jobs are served in the order they were submitted; their operations see each other's as
// OperationBatch defines (a check sees every add queued before it).
//
// Thread-safety: thread-safe. A job's methods run on whichever thread serves it, one job at a
// time; it must stay alive until its Done() returns (the committer does not touch it after).
// Done() may Submit() again (it is queued and served next) and may make any store call.
#ifndef STORAGE_WRITE_GROUP_COMMIT_H_
#define STORAGE_WRITE_GROUP_COMMIT_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/blocking_mutex.h"
#include "storage/write/operation_batch.h"

namespace storage {

class FilterStore;

class GroupCommitter {
 public:
  class Job {
   public:
    virtual ~Job() = default;
    // Queues its operations (adds, and checks answered at once) in `batch`, which other jobs
    // share: it must not Flush() it nor keep it.
    virtual void Queue(OperationBatch& batch) = 0;
    // `batch` has been flushed: takes the results of its tickets.
    virtual void Answer(OperationBatch& batch) = 0;
    // Instead of Queue and Answer when no batch could start (the store is closed).
    virtual void Fail(const absl::Status& why) = 0;
    // Last: the batch is gone (its locks released). Acknowledge from here; with --sync, after
    // FilterStore::WhenDurable.
    virtual void Done() = 0;
  };

  // `store` must outlive the committer. `defer_sync`: as for FilterStore::StartBatch.
  GroupCommitter(FilterStore* store, bool defer_sync);
  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Serves `job` now, with any others queued meanwhile, or, when another thread is serving,
  // queues it for that thread and returns at once.
  void Submit(Job* job);

  // Batches served and jobs served by them (jobs / batches: the group size).
  uint64_t batches() const;
  uint64_t jobs() const;

 private:
  void ServeTogether(const std::vector<Job*>& jobs);

  FilterStore* const store_;
  const bool defer_sync_;
  mutable bloomsync::BlockingMutex mu_;
  std::vector<Job*> queue_ ABSL_GUARDED_BY(mu_);
  bool serving_ ABSL_GUARDED_BY(mu_) = false;  // a thread is in Submit's loop
  uint64_t batches_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t jobs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace storage

#endif  // STORAGE_WRITE_GROUP_COMMIT_H_

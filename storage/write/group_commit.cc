#include "storage/write/group_commit.h"

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "storage/filter_store.h"

namespace storage {

GroupCommitter::GroupCommitter(FilterStore* store, bool defer_sync)
    : store_(store), defer_sync_(defer_sync) {}

void GroupCommitter::Submit(Job* job) {
  std::vector<Job*> jobs;
  {
    bloomsync::BlockingLock lock(&mu_);
    queue_.push_back(job);
    if (serving_) return;  // the serving thread takes it
    serving_ = true;
  }
  // This thread serves until nothing is queued. Jobs queued while it serves come from other
  // threads, or from a Done() that submits again; there are at most as many as there are
  // submitters (a stream has one job at a time), so the loop ends when they pause.
  for (;;) {
    {
      bloomsync::BlockingLock lock(&mu_);
      if (queue_.empty()) {
        serving_ = false;
        return;
      }
      jobs.swap(queue_);
      ++batches_;
      jobs_ += jobs.size();
    }
    ServeTogether(jobs);
    jobs.clear();
  }
}

void GroupCommitter::ServeTogether(const std::vector<Job*>& jobs) {
  {
    absl::StatusOr<std::unique_ptr<OperationBatch>> batch = store_->StartBatch(defer_sync_);
    if (!batch.ok()) {
      for (Job* job : jobs) job->Fail(batch.status());
    } else {
      for (Job* job : jobs) job->Queue(**batch);
      (*batch)->Flush();
      for (Job* job : jobs) job->Answer(**batch);
    }
  }  // the batch releases its locks here, before any Done() may call the store
  for (Job* job : jobs) job->Done();
}

uint64_t GroupCommitter::batches() const {
  bloomsync::BlockingLock lock(&mu_);
  return batches_;
}

uint64_t GroupCommitter::jobs() const {
  bloomsync::BlockingLock lock(&mu_);
  return jobs_;
}

}  // namespace storage

#include "storage/write/wal_sync.h"

#include <utility>

namespace storage {

WalSyncer::WalSyncer(Sync sync) : sync_(std::move(sync)), thread_([this] { Loop(); }) {}

WalSyncer::~WalSyncer() { Stop(); }

void WalSyncer::AfterSync(Done done) {
  {
    bloomsync::BlockingLock lock(&mu_);
    if (!stopped_) {
      queue_.push_back(std::move(done));
      wake_.NotifyOne();
      return;
    }
  }
  // Stopped: nobody else will sync for this request.
  std::vector<Done> alone;
  alone.push_back(std::move(done));
  bloomsync::BlockingLock serving(&serve_mu_);
  Serve(alone);
}

void WalSyncer::Stop() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stopping_ = true;
  }
  wake_.NotifyOne();
  if (thread_.joinable()) thread_.join();
}

uint64_t WalSyncer::syncs() const {
  bloomsync::BlockingLock lock(&mu_);
  return syncs_;
}

uint64_t WalSyncer::requests() const {
  bloomsync::BlockingLock lock(&mu_);
  return requests_;
}

void WalSyncer::Loop() {
  std::vector<Done> batch;
  for (;;) {
    {
      bloomsync::BlockingLock lock(&mu_);
      wake_.Wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      });
      if (queue_.empty()) {  // stopping, and nothing left: later requests sync themselves
        stopped_ = true;
        return;
      }
      // Everything queued so far shares the next sync: the writes of all of them finished
      // before they queued, so before that sync starts.
      batch.swap(queue_);
    }
    Serve(batch);
    batch.clear();
  }
}

void WalSyncer::Serve(std::vector<Done>& batch) {
  const absl::Status synced = sync_();
  {
    bloomsync::BlockingLock lock(&mu_);
    ++syncs_;
    requests_ += batch.size();
  }
  for (Done& done : batch) std::move(done)(synced);
}

}  // namespace storage

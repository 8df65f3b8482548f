// WalSyncer: group commit of the write-ahead log's fsync, off the callers' threads.
//
// Why: with --sync an add is acknowledged only once its journal record is on stable storage.
// A RocksDB write with sync=true makes the writing thread wait for the fsync: on gRPC's
// callback threads that would stall every call behind it. Here
// the caller writes without sync, asks AfterSync() to call it back, and returns: one thread
// fsyncs the log for every request that queued while the previous fsync ran (however many
// calls and streams they came from) and then calls them back.
//
//   WalSyncer syncer([&] { return database.SyncWal(); });
//   ... database.Write(batch, /*sync=*/false, ...) ...
//   syncer.AfterSync([reactor](absl::Status synced) { reactor->Finish(ToGrpcStatus(synced)); });
//
// Meaning: `done` runs after a call of `sync` that started after AfterSync() was called, so
// every write that finished before AfterSync() is covered by it; `done` gets that call's
// status. A write made without sync is visible to readers at once: a reader may see an add
// before it is acknowledged (and, after a power loss before its fsync, not see it again), but
// never misses an acknowledged one.
//
// Thread-safety: thread-safe. `done` callbacks run on the syncer's thread (or, after Stop(), on
// the caller's), one at a time and in the order they were queued; they must not block long
// nor call AfterSync() or Stop() themselves.
#ifndef STORAGE_WRITE_WAL_SYNC_H_
#define STORAGE_WRITE_WAL_SYNC_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "common/blocking_mutex.h"

namespace storage {

class WalSyncer {
 public:
  using Sync = absl::AnyInvocable<absl::Status()>;
  using Done = absl::AnyInvocable<void(absl::Status) &&>;

  // Starts the thread; `sync` makes every finished write durable (Database::SyncWal).
  explicit WalSyncer(Sync sync);
  // Stop()s.
  ~WalSyncer();
  WalSyncer(const WalSyncer&) = delete;
  WalSyncer& operator=(const WalSyncer&) = delete;

  // Calls `done` once a sync started after this call has finished (see above).
  void AfterSync(Done done);
  // Syncs for and calls back every queued request, then ends the thread. Afterwards
  // AfterSync() syncs in the caller's thread before calling back.
  void Stop();

  // Calls of `sync` so far, and requests served by them (requests / syncs: the group size).
  uint64_t syncs() const;
  uint64_t requests() const;

 private:
  void Loop();
  // Runs `sync` once and calls back `batch` in order.
  void Serve(std::vector<Done>& batch);

  Sync sync_;  // called by one thread at a time (the loop, or callers after Stop)
  mutable bloomsync::BlockingMutex mu_;
  bloomsync::CondVar wake_;
  std::vector<Done> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // the thread ended
  uint64_t syncs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t requests_ ABSL_GUARDED_BY(mu_) = 0;
  bloomsync::BlockingMutex serve_mu_;  // serialises Serve() once stopped (callers may race)
  std::thread thread_;
};

}  // namespace storage

#endif  // STORAGE_WRITE_WAL_SYNC_H_

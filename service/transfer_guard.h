// TransferGuard: bounds the Export and Import streams a server runs at once, and ends those
// that stop making progress.
//
// An Export to a client that never reads, or an Import that stalls after its first chunk,
// would otherwise hold buffers and an import's memory, and a transfer slot, forever; one that
// trickles a byte now and then would do the same. Each stream takes a Ticket for its lifetime,
// touches it with the bytes of every chunk that moves, and says how to abandon it:
//
//   absl::StatusOr<std::unique_ptr<TransferGuard::Ticket>> ticket = guard.Admit(
//       TransferGuard::Kind::kImport, context->peer(), client_key,
//       [this](const absl::Status& why) { Abandon(why); });
//   ... (*ticket)->Touch(chunk.size()); ...
//
// Admission bounds the streams at once, in all and per client (a token's label, or the peer's
// address), so one client cannot take every slot. A watchdog thread calls `abandon` (once) for
// every stream whose ticket was not touched for `idle_timeout`, or that moved fewer than
// `min_bytes_per_second` x `idle_timeout` bytes in its latest `idle_timeout`, with the status
// to end it with (ABORTED, saying why), while holding the guard's lock: `abandon` must not
// block, nor destroy a ticket.
//
// Thread-safety: every method is thread-safe. A ticket's owner must destroy it before whatever
// `abandon` touches.
#ifndef SERVICE_TRANSFER_GUARD_H_
#define SERVICE_TRANSFER_GUARD_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "metrics/metrics.h"

namespace service {

class TransferGuard {
 public:
  // kSnapshot: a follower's copy of the primary (replication/replication_service.h), which
  // sends as an export does.
  enum class Kind { kExport, kImport, kSnapshot };

  struct Options {
    size_t max_concurrent = 16;                       // exports and imports together
    size_t max_per_client = 4;                        // of those, one client's
    absl::Duration idle_timeout = absl::Seconds(30);  // zero: never
    uint64_t min_bytes_per_second = 0;                // averaged over idle_timeout; 0: any
  };

  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

    // The stream moved a chunk of `bytes`: it is not idle.
    void Touch(uint64_t bytes) {
      bytes_moved_.fetch_add(bytes, std::memory_order_relaxed);
      last_progress_micros_.store(absl::ToUnixMicros(absl::Now()));
    }
    // Whether the watchdog cancelled the stream for idling or for moving too slowly.
    bool abandoned() const { return abandoned_.load(); }
    // ABORTED, saying why and what was released. Only once abandoned().
    absl::Status AbandonedStatus() const;

   private:
    friend class TransferGuard;
    Ticket(TransferGuard* guard, Kind kind, std::string peer, std::string client,
           std::function<void(const absl::Status&)> abandon);

    TransferGuard* const guard_;
    const Kind kind_;
    const std::string peer_;
    const std::string client_;
    const std::function<void(const absl::Status&)> abandon_;
    std::atomic<int64_t> last_progress_micros_;
    std::atomic<uint64_t> bytes_moved_{0};
    std::string why_abandoned_;  // written before abandoned_ turns true, then never
    std::atomic<bool> abandoned_{false};
    // The watchdog's rate window: when it began and the bytes moved by then (under mu_).
    int64_t window_start_micros_;
    uint64_t window_start_bytes_ = 0;
  };

  // `metrics` may be null; it must outlive the guard.
  TransferGuard(Options options, metrics::ServerMetrics* metrics);
  ~TransferGuard();
  TransferGuard(const TransferGuard&) = delete;
  TransferGuard& operator=(const TransferGuard&) = delete;

  // A ticket for a new stream from `peer` (for logs) of `client` (whom max_per_client
  // counts), or RESOURCE_EXHAUSTED when max_concurrent run already, or max_per_client of
  // `client`'s.
  absl::StatusOr<std::unique_ptr<Ticket>> Admit(Kind kind, std::string peer, std::string client,
                                                std::function<void(const absl::Status&)> abandon);

  size_t active() const;

 private:
  void Release(Ticket* ticket);
  void WatchLoop();
  // Why the watchdog ends `ticket` now, or "" (under mu_; advances its rate window).
  std::string ReasonToAbandon(Ticket& ticket, int64_t now_micros);

  const Options options_;
  metrics::ServerMetrics* const metrics_;
  // bloomsync::BlockingMutex for its condition variable (the watchdog's interruptible sleep).
  mutable bloomsync::BlockingMutex mu_;
  bloomsync::CondVar stop_;
  absl::flat_hash_set<Ticket*> tickets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, size_t> per_client_ ABSL_GUARDED_BY(mu_);  // no zero counts
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

}  // namespace service

#endif  // SERVICE_TRANSFER_GUARD_H_

// TransferGuard: bounds the Export and Import streams a server runs at once, and ends those
// that stop making progress.
//
// An Export to a client that never reads, or an Import that stalls after its first chunk,
// would otherwise hold buffers and (for an import) the memory reserved for the whole dump,
// forever. Each stream takes a Ticket for its lifetime, touches it whenever a chunk moves, and
// says how to abandon it:
//
//   absl::StatusOr<std::unique_ptr<TransferGuard::Ticket>> ticket = guard.Admit(
//       TransferGuard::Kind::kImport, context->peer(),
//       [this](const absl::Status& why) { Abandon(why); });
//   ... (*ticket)->Touch(); ...
//
// A watchdog thread calls `abandon` for every stream whose ticket was not touched for
// `idle_timeout` (once), with the status to end it with (ABORTED, saying why), while holding
// the guard's lock: `abandon` must not block, nor destroy a ticket.
//
// Thread-safety: every method is thread-safe. A ticket's owner must destroy it before whatever
// `abandon` touches.
#ifndef SERVICE_TRANSFER_GUARD_H_
#define SERVICE_TRANSFER_GUARD_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "metrics/metrics.h"

namespace service {

class TransferGuard {
 public:
  enum class Kind { kExport, kImport };

  struct Options {
    size_t max_concurrent = 16;                       // exports and imports together
    absl::Duration idle_timeout = absl::Seconds(30);  // zero: never
  };

  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

    // The stream moved a chunk: it is not idle.
    void Touch() { last_progress_micros_.store(absl::ToUnixMicros(absl::Now())); }
    // Whether the watchdog cancelled the stream for idling.
    bool abandoned() const { return abandoned_.load(); }
    // ABORTED, saying what was idle for how long and what was released.
    absl::Status AbandonedStatus() const;

   private:
    friend class TransferGuard;
    Ticket(TransferGuard* guard, Kind kind, std::string peer,
           std::function<void(const absl::Status&)> abandon);

    TransferGuard* const guard_;
    const Kind kind_;
    const std::string peer_;
    const std::function<void(const absl::Status&)> abandon_;
    std::atomic<int64_t> last_progress_micros_;
    std::atomic<bool> abandoned_{false};
  };

  // `metrics` may be null; it must outlive the guard.
  TransferGuard(Options options, metrics::ServerMetrics* metrics);
  ~TransferGuard();
  TransferGuard(const TransferGuard&) = delete;
  TransferGuard& operator=(const TransferGuard&) = delete;

  // A ticket for a new stream from `peer` (for logs), or RESOURCE_EXHAUSTED when
  // max_concurrent run already.
  absl::StatusOr<std::unique_ptr<Ticket>> Admit(Kind kind, std::string peer,
                                                std::function<void(const absl::Status&)> abandon);

  size_t active() const;

 private:
  void Release(Ticket* ticket);
  void WatchLoop();

  const Options options_;
  metrics::ServerMetrics* const metrics_;
  // std::mutex for its condition variable (the watchdog's interruptible sleep).
  mutable std::mutex mu_;
  std::condition_variable stop_;
  absl::flat_hash_set<Ticket*> tickets_;  // guarded by mu_
  bool stopping_ = false;                 // guarded by mu_
  std::thread watchdog_;
};

}  // namespace service

#endif  // SERVICE_TRANSFER_GUARD_H_

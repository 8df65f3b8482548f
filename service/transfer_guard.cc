#include "service/transfer_guard.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace service {
namespace {

const char* KindName(TransferGuard::Kind kind) {
  return kind == TransferGuard::Kind::kExport ? "export" : "import";
}

}  // namespace

TransferGuard::Ticket::Ticket(TransferGuard* guard, Kind kind, std::string peer,
                              std::function<void(const absl::Status&)> abandon)
    : guard_(guard),
      kind_(kind),
      peer_(std::move(peer)),
      abandon_(std::move(abandon)),
      last_progress_micros_(absl::ToUnixMicros(absl::Now())) {}

TransferGuard::Ticket::~Ticket() { guard_->Release(this); }

absl::Status TransferGuard::Ticket::AbandonedStatus() const {
  const std::string timeout = absl::FormatDuration(guard_->options_.idle_timeout);
  if (kind_ == Kind::kImport) {
    return absl::AbortedError(absl::StrCat(
        "the import sent no chunk for ", timeout,
        " (--transfer_idle_timeout): abandoned, and the memory reserved for it released"));
  }
  return absl::AbortedError(absl::StrCat("the export could send nothing for ", timeout,
                                         " (--transfer_idle_timeout; the client stopped "
                                         "reading): abandoned, and its buffers released"));
}

TransferGuard::TransferGuard(Options options, metrics::ServerMetrics* metrics)
    : options_(options), metrics_(metrics) {
  if (options_.idle_timeout > absl::ZeroDuration()) {
    watchdog_ = std::thread([this] { WatchLoop(); });
  }
}

TransferGuard::~TransferGuard() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

absl::StatusOr<std::unique_ptr<TransferGuard::Ticket>> TransferGuard::Admit(
    Kind kind, std::string peer, std::function<void(const absl::Status&)> abandon) {
  std::unique_ptr<Ticket> ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tickets_.size() >= options_.max_concurrent) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server runs ", options_.max_concurrent,
                       " exports and imports already (--max_transfers); retry later"));
    }
    ticket.reset(new Ticket(this, kind, std::move(peer), std::move(abandon)));
    tickets_.insert(ticket.get());
  }
  if (metrics_ != nullptr) metrics_->RecordTransferStart(kind == Kind::kImport);
  return ticket;
}

void TransferGuard::Release(Ticket* ticket) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tickets_.erase(ticket);
  }
  if (metrics_ != nullptr) {
    metrics_->RecordTransferEnd(ticket->kind_ == Kind::kImport, ticket->abandoned());
  }
}

size_t TransferGuard::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tickets_.size();
}

void TransferGuard::WatchLoop() {
  // Check often enough that a stream is abandoned at most a quarter late.
  const absl::Duration period =
      std::min(absl::Seconds(1), std::max(absl::Milliseconds(10), options_.idle_timeout / 4));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_.wait_for(lock, absl::ToChronoMilliseconds(period), [this] { return stopping_; })) {
    const int64_t idle_since = absl::ToUnixMicros(absl::Now() - options_.idle_timeout);
    for (Ticket* ticket : tickets_) {
      if (ticket->abandoned() || ticket->last_progress_micros_.load() > idle_since) continue;
      ticket->abandoned_.store(true);
      bloomlog::LogWarning(
          absl::StrCat("abandoned an ", KindName(ticket->kind_), " that made no progress for ",
                       absl::FormatDuration(options_.idle_timeout), " (peer ", ticket->peer_, ")"));
      // Under mu_: the ticket, and what its abandon touches, cannot go away meanwhile.
      ticket->abandon_(ticket->AbandonedStatus());
    }
  }
}

}  // namespace service

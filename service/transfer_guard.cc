#include "service/transfer_guard.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace service {
namespace {

const char* KindName(TransferGuard::Kind kind) {
  switch (kind) {
    case TransferGuard::Kind::kExport:
      return "export";
    case TransferGuard::Kind::kImport:
      return "import";
    case TransferGuard::Kind::kSnapshot:
      return "snapshot";
  }
  return "transfer";
}

}  // namespace

TransferGuard::Ticket::Ticket(TransferGuard* guard, Kind kind, std::string peer, std::string client,
                              std::function<void(const absl::Status&)> abandon)
    : guard_(guard),
      kind_(kind),
      peer_(std::move(peer)),
      client_(std::move(client)),
      abandon_(std::move(abandon)),
      last_progress_micros_(absl::ToUnixMicros(absl::Now())),
      window_start_micros_(last_progress_micros_.load()) {}

TransferGuard::Ticket::~Ticket() { guard_->Release(this); }

absl::Status TransferGuard::Ticket::AbandonedStatus() const {
  return absl::AbortedError(absl::StrCat(why_abandoned_, ": abandoned, and ",
                                         kind_ == Kind::kImport
                                             ? "the memory charged for it released"
                                         : kind_ == Kind::kSnapshot ? "its checkpoint removed"
                                                                    : "its buffers released"));
}

TransferGuard::TransferGuard(Options options, metrics::ServerMetrics* metrics)
    : options_(options), metrics_(metrics) {
  if (options_.idle_timeout > absl::ZeroDuration()) {
    watchdog_ = std::thread([this] { WatchLoop(); });
  }
}

TransferGuard::~TransferGuard() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stopping_ = true;
  }
  stop_.NotifyAll();
  if (watchdog_.joinable()) watchdog_.join();
}

absl::StatusOr<std::unique_ptr<TransferGuard::Ticket>> TransferGuard::Admit(
    Kind kind, std::string peer, std::string client,
    std::function<void(const absl::Status&)> abandon) {
  std::unique_ptr<Ticket> ticket;
  {
    bloomsync::BlockingLock lock(&mu_);
    if (tickets_.size() >= options_.max_concurrent) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the server runs ", options_.max_concurrent,
                       " exports and imports already (--max_transfers); retry later"));
    }
    size_t& mine = per_client_[client];
    if (mine >= options_.max_per_client) {
      if (mine == 0) per_client_.erase(client);
      return absl::ResourceExhaustedError(
          absl::StrCat(client, " runs ", options_.max_per_client,
                       " exports and imports already (--max_transfers_per_client); retry later"));
    }
    ++mine;
    ticket.reset(new Ticket(this, kind, std::move(peer), std::move(client), std::move(abandon)));
    tickets_.insert(ticket.get());
  }
  if (metrics_ != nullptr) metrics_->RecordTransferStart(kind == Kind::kImport);
  return ticket;
}

void TransferGuard::Release(Ticket* ticket) {
  {
    bloomsync::BlockingLock lock(&mu_);
    tickets_.erase(ticket);
    auto mine = per_client_.find(ticket->client_);
    if (mine != per_client_.end() && --mine->second == 0) per_client_.erase(mine);
  }
  if (metrics_ != nullptr) {
    metrics_->RecordTransferEnd(ticket->kind_ == Kind::kImport, ticket->abandoned());
  }
}

size_t TransferGuard::active() const {
  bloomsync::BlockingLock lock(&mu_);
  return tickets_.size();
}

void TransferGuard::WatchLoop() {
  // Check often enough that a stream is abandoned at most a quarter late.
  const absl::Duration period =
      std::min(absl::Seconds(1), std::max(absl::Milliseconds(10), options_.idle_timeout / 4));
  bloomsync::BlockingLock lock(&mu_);
  while (!stop_.WaitFor(lock, absl::ToChronoMilliseconds(period),
                        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; })) {
    const int64_t now = absl::ToUnixMicros(absl::Now());
    for (Ticket* ticket : tickets_) {
      if (ticket->abandoned()) continue;
      std::string why = ReasonToAbandon(*ticket, now);
      if (why.empty()) continue;
      bloomlog::LogWarning(
          absl::StrCat("abandoned ", ticket->kind_ == Kind::kSnapshot ? "a " : "an ",
                       KindName(ticket->kind_), ": ", why, " (peer ", ticket->peer_, ")"));
      ticket->why_abandoned_ = std::move(why);
      ticket->abandoned_.store(true);
      // Under mu_: the ticket, and what its abandon touches, cannot go away meanwhile.
      ticket->abandon_(ticket->AbandonedStatus());
    }
  }
}

std::string TransferGuard::ReasonToAbandon(Ticket& ticket, int64_t now_micros) {
  const int64_t interval = absl::ToInt64Microseconds(options_.idle_timeout);
  const std::string timeout = absl::FormatDuration(options_.idle_timeout);
  if (ticket.last_progress_micros_.load() <= now_micros - interval) {
    switch (ticket.kind_) {
      case Kind::kImport:
        return absl::StrCat("the import sent no chunk for ", timeout, " (--transfer_idle_timeout)");
      case Kind::kExport:
        return absl::StrCat("the export could send nothing for ", timeout,
                            " (--transfer_idle_timeout; the client stopped reading)");
      case Kind::kSnapshot:
        return absl::StrCat("the snapshot could send nothing for ", timeout,
                            " (the follower stopped reading)");
    }
  }
  if (now_micros - ticket.window_start_micros_ < interval) return "";
  // A full window: did it move enough?
  const uint64_t moved = ticket.bytes_moved_.load(std::memory_order_relaxed);
  const uint64_t in_window = moved - ticket.window_start_bytes_;
  const auto wanted = static_cast<uint64_t>(static_cast<double>(options_.min_bytes_per_second) *
                                            absl::ToDoubleSeconds(options_.idle_timeout));
  if (in_window < wanted) {
    return absl::StrCat("the ", KindName(ticket.kind_), " moved ", in_window, " bytes in ", timeout,
                        ", under --transfer_min_rate (", options_.min_bytes_per_second,
                        " bytes a second)");
  }
  ticket.window_start_micros_ = now_micros;
  ticket.window_start_bytes_ = moved;
  return "";
}

}  // namespace service

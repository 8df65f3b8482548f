#include "service/transfers.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "service/bloom_service.h"
#include "service/convert.h"
#include "storage/filter_store.h"

namespace service {
namespace {

using bloom::v1::ExportChunk;
using bloom::v1::ImportChunk;
using bloom::v1::ImportResponse;

absl::Status ShuttingDown() {
  return absl::UnavailableError("the server is shutting down; retry another replica");
}

class ExportReactor final : public grpc::ServerWriteReactor<ExportChunk> {
 public:
  ExportReactor(BloomService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context), start_(absl::Now()) {}

  // Runs in the method handler: every path ends in a write or Finish (perhaps later, in Open).
  void Begin(const bloom::v1::ExportRequest& request) {
    absl::StatusOr<Caller> caller = service_->AdmitStream(context_, rpcs::Rpc::kExport);
    if (!caller.ok()) {
      counted_ = true;  // AdmitStream counted the refusal
      return End(caller.status());
    }
    absl::StatusOr<std::unique_ptr<TransferGuard::Ticket>> ticket = service_->transfers().Admit(
        TransferGuard::Kind::kExport, context_->peer(), ClientKey(*caller, context_->peer()),
        [context = context_](const absl::Status& /*why*/) {
          // A client that reads nothing would never see a status.
          context->TryCancel();
        });
    if (!ticket.ok()) return End(ticket.status());
    ticket_ = *std::move(ticket);
    // A follower may call back later, from the thread that sees the sequence applied (nothing
    // else touches the reactor before then: no write is started).
    service_->WhenApplied(request.min_sequence(), context_,
                          [this, name = request.name(), min_sequence = request.min_sequence()](
                              bool applied) { Open(name, min_sequence, applied); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      return End(ticket_->abandoned() ? ticket_->AbandonedStatus()
                                      : absl::CancelledError("the client went away"));
    }
    ticket_->Touch(chunk_.data().size());
    WriteNext();
  }

  void OnDone() override {
    if (!counted_ && service_->hooks().metrics != nullptr) {
      service_->hooks().metrics->RecordRpc(rpcs::Rpc::kExport, status_.code(), absl::Now() - start_,
                                           0);
    }
    delete this;  // the ticket first leaves the guard, waiting out a running abandon
  }

 private:
  // Starts the export once this pod has applied the caller's `min_sequence` (`applied`).
  void Open(const std::string& name, uint64_t min_sequence, bool applied) {
    if (!applied) {
      return End(absl::UnavailableError(
          absl::StrCat("this follower has not applied sequence ", min_sequence,
                       " yet; retry, or export from the primary at ",
                       service_->hooks().forwarder->primary_address())));
    }
    if (absl::Status owned = service_->CheckOwnedHere(name, "Export", rpcs::Rpc::kExport, context_);
        !owned.ok()) {
      return End(owned);
    }
    absl::StatusOr<std::unique_ptr<storage::ExportCursor>> cursor =
        service_->store()->OpenExport(name);
    if (!cursor.ok()) return End(cursor.status());
    cursor_ = *std::move(cursor);
    WriteNext();
  }

  // One write in flight at a time: the next chunk is made when the previous one was taken.
  void WriteNext() {
    if (service_->draining()) return End(ShuttingDown());
    if (!cursor_->Next(*chunk_.mutable_data())) return End(absl::OkStatus());
    StartWrite(&chunk_);
  }
  void End(absl::Status status) {
    status_ = std::move(status);
    // Free the cursor (its pinned buffers, and the filter, which an eviction could not free
    // while it was held) and the slot before the client hears the status, so its next
    // transfer finds them free; OnDone comes later, after gRPC's own clean-up.
    cursor_.reset();
    ticket_.reset();
    Finish(ToGrpcStatus(status_));
  }

  BloomService* const service_;
  grpc::CallbackServerContext* const context_;
  const absl::Time start_;
  bool counted_ = false;
  // Reactions of one export never overlap (one write at a time), so no lock is needed.
  std::unique_ptr<TransferGuard::Ticket> ticket_;
  std::unique_ptr<storage::ExportCursor> cursor_;
  ExportChunk chunk_;
  absl::Status status_;
};

class ImportReactor final : public grpc::ServerReadReactor<ImportChunk> {
 public:
  ImportReactor(BloomService* service, grpc::CallbackServerContext* context,
                ImportResponse* response)
      : service_(service), context_(context), response_(response), start_(absl::Now()) {}

  void Begin() {
    absl::StatusOr<Caller> caller = service_->AdmitStream(context_, rpcs::Rpc::kImport);
    if (!caller.ok()) {
      counted_ = true;
      return FinishOnce(caller.status());
    }
    absl::StatusOr<std::unique_ptr<TransferGuard::Ticket>> ticket = service_->transfers().Admit(
        TransferGuard::Kind::kImport, context_->peer(), ClientKey(*caller, context_->peer()),
        [this](const absl::Status& why) { Abandon(why); });
    if (!ticket.ok()) return FinishOnce(ticket.status());
    ticket_ = *std::move(ticket);
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Commit();
    absl::Status status = Take();
    if (status.ok()) {
      StartRead(&chunk_);
      return;
    }
    FinishOnce(std::move(status));
  }

  void OnDone() override {
    if (!counted_ && service_->hooks().metrics != nullptr) {
      service_->hooks().metrics->RecordRpc(rpcs::Rpc::kImport, status_.code(), absl::Now() - start_,
                                           0);
    }
    delete this;
  }

 private:
  // A chunk arrived: the first names the filter and starts the import; each is appended.
  absl::Status Take() {
    bloomsync::MutexLock lock(&mu_);
    if (finished_) return absl::CancelledError("abandoned");  // FinishOnce ignores it
    if (service_->draining()) return ShuttingDown();
    // FinishOnce, which resets the ticket, runs only after this reaction.
    ticket_->Touch(chunk_.name().size() + chunk_.data().size());
    if (ShardRouter* router = service_->hooks().router;
        router != nullptr && ShardRouter::MoverCall(context_)) {
      router->CountMoveCopy(chunk_.data().size());
    }
    if (import_ == nullptr) {
      RETURN_IF_ERROR(
          service_->CheckOwnedHere(chunk_.name(), "Import", rpcs::Rpc::kImport, context_));
      absl::StatusOr<std::unique_ptr<storage::PendingImport>> import =
          service_->store()->BeginImport(chunk_.name(), chunk_.merge_into_existing());
      if (!import.ok()) return import.status();
      import_ = *std::move(import);
    }
    return import_->Append(chunk_.data());
  }

  // The stream ended: a complete dump if the client half-closed, else a cancellation. Finishes
  // the stream: at once, or once the followers hold the new filter (--min_replica_acks), from
  // the thread that hears so (no thread waits for them).
  void Commit() {
    std::unique_ptr<storage::PendingImport> import;
    absl::Status refused;
    {
      bloomsync::MutexLock lock(&mu_);
      if (finished_) return;  // abandoned: finished already
      if (context_->IsCancelled()) {
        refused = absl::CancelledError("the import was cancelled");
      } else if (import_ == nullptr) {
        refused =
            absl::InvalidArgumentError("Import needs at least one chunk, the first with a name");
      } else {
        // Committing writes the whole filter to RocksDB; it is not idle meanwhile.
        committing_ = true;
        import = std::move(import_);
      }
    }
    if (!refused.ok()) return FinishOnce(std::move(refused));
    absl::StatusOr<storage::FilterInfo> info =
        service_->store()->CommitImport(*import, /*defer_ack=*/true);
    if (!info.ok()) return FinishOnce(info.status());
    // In a sharded deployment the slot may have begun moving meanwhile (SettleWrite).
    absl::Status settled;
    if (const ShardRouter* router = service_->hooks().router) {
      const absl::string_view names[] = {import->name()};
      settled = router->SettleWrite(names, context_);
    }
    service_->store()->WhenReplicated(
        [this, info = *std::move(info), settled](absl::Status acknowledged) {
          if (acknowledged.ok()) acknowledged = settled;
          if (acknowledged.ok()) {
            ToProto(info, response_->mutable_stats());
            response_->set_sequence(service_->store()->LatestSequence());
          }
          FinishOnce(acknowledged);
        });
  }

  // The watchdog's: no chunk for the idle timeout. Under the guard's lock; must not block.
  void Abandon(const absl::Status& why) {
    {
      bloomsync::MutexLock lock(&mu_);
      if (finished_ || committing_) return;
      finished_ = true;
      import_.reset();  // releases the memory reserved for the dump now
      status_ = why;
    }
    Finish(ToGrpcStatus(status_));  // the pending read then completes with ok = false
  }

  // Finishes with `status` unless the stream was finished already (by Abandon). From the
  // reactions, or the commit's acknowledgement (no read is pending then), never from the
  // watchdog.
  void FinishOnce(absl::Status status) {
    {
      bloomsync::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
      import_.reset();
      status_ = std::move(status);
    }
    // Free the slot before the client hears the status, so its next transfer finds it free.
    // Not under mu_: the watchdog takes the guard's lock, then mu_ (in Abandon).
    ticket_.reset();
    Finish(ToGrpcStatus(status_));
  }

  BloomService* const service_;
  grpc::CallbackServerContext* const context_;
  ImportResponse* const response_;
  const absl::Time start_;
  bool counted_ = false;
  std::unique_ptr<TransferGuard::Ticket> ticket_;  // set before the first read
  ImportChunk chunk_;  // only the one pending read and its OnReadDone touch it
  bloomsync::Mutex mu_;
  std::unique_ptr<storage::PendingImport> import_ ABSL_GUARDED_BY(mu_);
  bool committing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_;  // written once, by whoever set finished_; read by OnDone
};

}  // namespace

grpc::ServerWriteReactor<ExportChunk>* StartExport(BloomService* service,
                                                   grpc::CallbackServerContext* context,
                                                   const bloom::v1::ExportRequest& request) {
  auto* reactor = new ExportReactor(service, context);
  reactor->Begin(request);
  return reactor;
}

grpc::ServerReadReactor<ImportChunk>* StartImport(BloomService* service,
                                                  grpc::CallbackServerContext* context,
                                                  ImportResponse* response) {
  auto* reactor = new ImportReactor(service, context, response);
  reactor->Begin();
  return reactor;
}

}  // namespace service

// FilterStore's Export and Import (filter_transfer.h).
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "common/status_macros.h"
#include "storage/filter_store.h"
#include "storage/filter_transfer.h"

namespace storage {

PendingImport::PendingImport(std::string name, bool merge_into_existing, MemoryBudget* budget,
                             const bloomtime::Clock* clock)
    : name_(std::move(name)),
      merge_into_existing_(merge_into_existing),
      budget_(budget),
      parser_(
          [this](uint64_t bytes, uint64_t total) {
            if (bytes == 0) {  // the header: could the whole filter fit?
              RETURN_IF_ERROR(CheckResidentCharge(total, name_));
              return budget_->CheckPinnedFits(total,
                                              absl::StrCat("importing filter '", name_, "'"));
            }
            RETURN_IF_ERROR(
                budget_->ChargePinned(bytes, absl::StrCat("importing filter '", name_, "'")));
            charged_ += bytes;
            return absl::OkStatus();
          },
          clock) {}

PendingImport::~PendingImport() {
  if (charged_ > 0) budget_->ReleasePinned(charged_);
}

absl::StatusOr<StoredFilter::CuckooSnapshot> FilterStore::SnapshotForExport(
    const StoredFilter& filter, uint64_t& charged) {
  // Charged before the copy is made, at the chain's size now (a table opened meanwhile is not
  // in the copy's record... nor charged: the copy has only what it lists).
  charged = filter.cuckoo()->Stats().size_bytes;
  RETURN_IF_ERROR(budget_.ChargePinned(
      charged, absl::StrCat("copying cuckoo filter '", filter.name(), "' to export it")));
  absl::StatusOr<StoredFilter::CuckooSnapshot> snapshot = filter.SnapshotCuckoo();
  if (!snapshot.ok()) {
    budget_.ReleasePinned(charged);
    charged = 0;
  }
  return snapshot;
}

absl::Status FilterStore::Export(absl::string_view name,
                                 const std::function<absl::Status(absl::string_view)>& sink) {
  std::shared_ptr<StoredFilter> filter;
  FilterRecord record;
  absl::optional<StoredFilter::CuckooSnapshot> snapshot;  // a CUCKOO filter's
  uint64_t charged = 0;
  {
    bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
    RETURN_IF_ERROR(CheckOpen());
    ASSIGN_OR_RETURN(filter, FindUsable(name));
    if (filter->kind().exports_a_copy()) {
      ASSIGN_OR_RETURN(snapshot, SnapshotForExport(*filter, charged));
    } else {
      ASSIGN_OR_RETURN(record, filter->PinChain());
    }
  }
  if (snapshot.has_value()) {
    absl::Status written = WriteDump(snapshot->record, std::move(snapshot->copy), sink);
    budget_.ReleasePinned(charged);
    return written;
  }
  // The bits are read without holding the store: a slow reader must not block Close(); the
  // shared_ptr keeps the filter's memory alive even if it is deleted meanwhile.
  absl::Status written = WriteDump(record, *filter->filter(), sink);
  filter->UnpinChain();
  return written;
}

absl::StatusOr<std::unique_ptr<ExportCursor>> FilterStore::OpenExport(absl::string_view name) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, FindUsable(name));
  RETURN_IF_ERROR(budget_.ChargePinned(ExportCursor::kChargedBytes,
                                       absl::StrCat("exporting filter '", name, "'")));
  if (filter->kind().exports_a_copy()) {
    uint64_t charged = 0;
    absl::StatusOr<StoredFilter::CuckooSnapshot> snapshot = SnapshotForExport(*filter, charged);
    if (!snapshot.ok()) {
      budget_.ReleasePinned(ExportCursor::kChargedBytes);
      return snapshot.status();
    }
    const FilterRecord snapshot_record = snapshot->record;
    return std::unique_ptr<ExportCursor>(new ExportCursor(
        std::move(filter), snapshot_record, std::move(snapshot->copy), charged, &budget_));
  }
  absl::StatusOr<FilterRecord> record = filter->PinChain();
  if (!record.ok()) {
    budget_.ReleasePinned(ExportCursor::kChargedBytes);
    return record.status();
  }
  return std::unique_ptr<ExportCursor>(new ExportCursor(std::move(filter), *record, &budget_));
}

absl::StatusOr<std::unique_ptr<PendingImport>> FilterStore::BeginImport(absl::string_view name,
                                                                        bool merge_into_existing) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  RETURN_IF_ERROR(CheckWritable());
  RETURN_IF_ERROR(ValidateFilterName(name));
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> existing, Acquire(name));
  if (existing != nullptr && !merge_into_existing) {
    return absl::AlreadyExistsError(absl::StrCat("filter '", name, "' already exists"));
  }
  return std::unique_ptr<PendingImport>(new PendingImport(
      static_cast<std::string>(name), merge_into_existing, &budget_, options_.clock));
}

absl::StatusOr<FilterInfo> FilterStore::CommitImport(PendingImport& import, bool defer_ack) {
  absl::StatusOr<FilterInfo> info = CommitImportLocked(import);
  if (info.ok() && !defer_ack) RETURN_IF_ERROR(WaitReplicated());  // holding no lock
  return info;
}

absl::StatusOr<FilterInfo> FilterStore::CommitImportLocked(PendingImport& import) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  RETURN_IF_ERROR(CheckWritable());
  ASSIGN_OR_RETURN(DumpParser::Result dump, import.parser_.Finish());
  const std::string& name = import.name();
  bloomsync::MutexLock name_lock(&NameLock(name));
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> existing, AcquireLocked(name));
  if (dump.cuckoo != nullptr && existing != nullptr) {
    return !import.merge_into_existing_
               ? absl::AlreadyExistsError(absl::StrCat("filter '", name, "' already exists"))
               : absl::FailedPreconditionError(
                     absl::StrCat("the dump holds a CUCKOO filter, which is not merged into '",
                                  name, "': Merge takes BLOOM filters only"));
  }
  if (existing != nullptr && import.merge_into_existing_) {
    // The dump's filter is read like a Merge source; its pinned charge is released with the
    // import. The name's lock keeps the target from being evicted meanwhile.
    const StoredFilter::MergeSource dump_source{"the imported dump", dump.filter.get()};
    RETURN_IF_ERROR(existing->Merge({&dump_source, 1}, options_.sync));
    journal_holds_.Release(existing->generation());  // as Merge: not in the journal
    return existing->Info();
  }
  if (existing != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("filter '", name, "' already exists"));
  }
  FilterRecord record = std::move(dump.record);
  ASSIGN_OR_RETURN(record.generation, AllocateGeneration());
  record.checkpoint_seq = 0;
  record.created_at_micros = absl::ToUnixMicros(options_.clock->Now());
  // The generation is below the synced ceiling (AllocateGeneration): if we crash while writing
  // pages, they belong to a generation nobody will reuse.
  std::shared_ptr<StoredFilter> stored =
      StoredFilter::Make(name, record, BuiltFilter{std::move(dump.filter), std::move(dump.cuckoo)},
                         &context_, import.charged_);
  budget_.Unpin(import.charged_);  // the StoredFilter owns the charge now: evictable bits
  import.charged_ = 0;
  stored->MarkAllPagesDirty();

  // A checkpoint writes every page and then the metadata that makes the filter exist.
  RETURN_IF_ERROR(stored->Checkpoint(options_.sync));
  Insert(stored);
  creations_.Record(name, options_.clock->Now());
  return stored->Info();
}

}  // namespace storage

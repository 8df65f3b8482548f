#include "storage/write/operation_batch.h"

#include <optional>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/filter_store.h"

namespace storage {
namespace {

// An operation's item hashes: most per-user operations carry a key or a few, which then need
// no allocation of their own.
using ItemHashes = absl::InlinedVector<uint64_t, 8>;

}  // namespace

OperationBatch::OperationBatch(FilterStore* store, bool sync) ABSL_NO_THREAD_SAFETY_ANALYSIS
    : store_(store),
      sync_(sync) {
  store_->lifecycle_mu_.ReaderLock();
}

OperationBatch::~OperationBatch() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  Flush();
  store_->lifecycle_mu_.ReaderUnlock();
}

// The batch holds the store's lifecycle lock (shared) from its constructor to its destructor,
// which the analysis cannot follow across the object's life.
absl::Status OperationBatch::CheckStoreOpen() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return store_->CheckOpen();
}

OperationBatch::Ticket OperationBatch::Add(absl::string_view name,
                                           absl::Span<const absl::string_view> items,
                                           const bloom::FilterParams* create_if_missing) {
  const Ticket ticket = operations_.size();
  Operation& operation = operations_.emplace_back();
  operation.status = Prepare(name, items, {}, create_if_missing, operation);
  return ticket;
}

OperationBatch::Ticket OperationBatch::AddHashed(absl::string_view name,
                                                 absl::Span<const uint64_t> hashes) {
  const Ticket ticket = operations_.size();
  Operation& operation = operations_.emplace_back();
  operation.status = Prepare(name, {}, hashes, nullptr, operation);
  return ticket;
}

absl::Status OperationBatch::Prepare(absl::string_view name,
                                     absl::Span<const absl::string_view> items,
                                     absl::Span<const uint64_t> hashes,
                                     const bloom::FilterParams* create_if_missing,
                                     Operation& operation) {
  RETURN_IF_ERROR(CheckStoreOpen());
  RETURN_IF_ERROR(ValidateFilterName(name));
  std::optional<bloom::FilterParams> spec;
  if (create_if_missing != nullptr) {
    ASSIGN_OR_RETURN(spec, bloom::NormalizeSpec(*create_if_missing, "create_if_missing"));
  }
  const size_t count = hashes.empty() ? items.size() : hashes.size();
  operation.items = count;
  operation.added.reset(new bool[count]);
  // As FilterStore::Add: a Delete racing a create_if_missing add makes it look again.
  for (int attempt = 0; attempt < FilterStore::kDeleteRaceRetries; ++attempt) {
    bool created = false;
    std::shared_ptr<StoredFilter> filter;
    if (spec.has_value()) {
      ASSIGN_OR_RETURN(filter, store_->AcquireOrCreate(name, *spec, created, [this] { Flush(); }));
    } else {
      ASSIGN_OR_RETURN(filter, store_->Acquire(name, [this] { Flush(); }));
      if (filter == nullptr) {
        return absl::NotFoundError(absl::StrCat("filter '", name, "' not found"));
      }
    }
    // A second add to one filter in one write would need its own seen-set and reservations
    // on top of the first's: simpler and as cheap to write the first now.
    if (held_.contains(filter.get()) || held_.size() >= kMaxFiltersPerWrite) Flush();
    GroupedAdd grouped;
    // The add that created the filter takes it alone when nobody else has yet (it never
    // waits for that), so its write can be the filter's first checkpoint (stored_filter.h).
    grouped.exclusive = created && filter->TryLockForCreation();
    if (!grouped.exclusive && !filter->TryLockForGroup()) {
      Flush();
      filter->LockForGroup();
    }
    // An unreadable filter has no bits to hash for (DATA_LOSS), a deleted one is looked up
    // again below.
    absl::Status status = filter->Usable();
    if (status.ok()) {
      ItemHashes hashed(hashes.begin(), hashes.end());
      if (hashes.empty()) {
        hashed.resize(items.size());
        for (size_t i = 0; i < items.size(); ++i) hashed[i] = filter->Hash(items[i]);
      }
      // A cuckoo filter's add is its own write (its kind's Add), made under its chain's lock;
      // it never waits for this batch's.
      status = filter->Add(hashed, operation.added.get(), sync_, write_, grouped);
    }
    if (status.ok() && grouped.needs_write) {
      held_.insert(filter.get());
      pending_.push_back({std::move(filter), std::move(grouped), &operation});
      return absl::OkStatus();
    }
    filter->UnlockForGroup(grouped.exclusive);
    if (StoredFilter::IsEvicted(status)) continue;  // nothing was prepared: use the reloaded one
    if (status.ok() || !absl::IsNotFound(status) || !spec.has_value()) return status;
  }
  return FilterStore::DeleteRaceError(name);
}

absl::Status OperationBatch::MightContainInto(absl::string_view name,
                                              absl::Span<const absl::string_view> items,
                                              bool* present) {
  RETURN_IF_ERROR(CheckStoreOpen());
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter,
                   store_->FindUsable(name, [this] { Flush(); }));
  if (held_.contains(filter.get())) Flush();  // the check must see the add queued before it
  ItemHashes hashes(items.size());
  for (size_t i = 0; i < items.size(); ++i) hashes[i] = filter->Hash(items[i]);
  return filter->MightContain(hashes, present);
}

absl::StatusOr<std::vector<uint32_t>> OperationBatch::Count(
    absl::string_view name, absl::Span<const absl::string_view> items) {
  RETURN_IF_ERROR(CheckStoreOpen());
  RETURN_IF_ERROR(ValidateFilterName(name));
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter,
                   store_->FindUsable(name, [this] { Flush(); }));
  RETURN_IF_ERROR(filter->RequireCuckoo("Count"));
  if (held_.contains(filter.get())) Flush();  // the count must see the add queued before it
  ItemHashes hashes(items.size());
  for (size_t i = 0; i < items.size(); ++i) hashes[i] = filter->Hash(items[i]);
  return filter->CuckooCount(hashes);
}

absl::StatusOr<std::vector<bool>> OperationBatch::RemoveItems(
    absl::string_view name, absl::Span<const absl::string_view> items) {
  std::vector<bool> removed;
  RETURN_IF_ERROR(WriteAlone(name, [&](StoredFilter& filter) -> absl::Status {
    RETURN_IF_ERROR(filter.RequireCuckoo("Remove"));
    ItemHashes hashes(items.size());
    for (size_t i = 0; i < items.size(); ++i) hashes[i] = filter.Hash(items[i]);
    ASSIGN_OR_RETURN(removed, filter.CuckooRemove(hashes, sync_));
    return absl::OkStatus();
  }));
  return removed;
}

absl::StatusOr<size_t> OperationBatch::CatchUp(absl::string_view name,
                                               absl::Span<const absl::string_view> records) {
  size_t written = 0;
  RETURN_IF_ERROR(WriteAlone(name, [&](StoredFilter& filter) -> absl::Status {
    ASSIGN_OR_RETURN(written, filter.CatchUp(records, sync_));
    return absl::OkStatus();
  }));
  return written;
}

absl::Status OperationBatch::WriteAlone(
    absl::string_view name, absl::FunctionRef<absl::Status(StoredFilter& filter)> write) {
  RETURN_IF_ERROR(CheckStoreOpen());
  RETURN_IF_ERROR(store_->CheckWritable());
  RETURN_IF_ERROR(ValidateFilterName(name));
  // An evicted filter answers EvictedError: look it up again, which loads it.
  for (int attempt = 0; attempt < FilterStore::kDeleteRaceRetries; ++attempt) {
    ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter,
                     store_->FindUsable(name, [this] { Flush(); }));
    absl::Status written = write(*filter);
    if (!StoredFilter::IsEvicted(written)) return written;
  }
  return FilterStore::DeleteRaceError(name);
}

void OperationBatch::Flush() {
  if (pending_.empty()) return;
  const absl::Status written = store_->db_->Write(write_, sync_, "journaling a batch of adds");
  ++writes_;
  for (Pending& pending : pending_) {
    pending.filter->FinishGroupAdd(pending.grouped, written.ok());
    pending.filter->UnlockForGroup(pending.grouped.exclusive);
    if (!written.ok()) pending.operation->status = written;
  }
  pending_.clear();
  held_.clear();
  write_.Clear();
}

absl::StatusOr<std::vector<bool>> OperationBatch::TakeResult(Ticket ticket) {
  const size_t items = ticket < operations_.size() ? operations_[ticket].items : 0;
  absl::StatusOr<std::unique_ptr<bool[]>> added = TakeAnswers(ticket);
  if (!added.ok()) return added.status();
  return std::vector<bool>(added->get(), added->get() + items);
}

absl::StatusOr<std::unique_ptr<bool[]>> OperationBatch::TakeAnswers(Ticket ticket) {
  if (ticket >= operations_.size() || operations_[ticket].taken) {
    return absl::InternalError(absl::StrCat("OperationBatch: no result for ticket ", ticket));
  }
  Flush();
  Operation& operation = operations_[ticket];
  operation.taken = true;
  if (!operation.status.ok()) return operation.status;
  return std::move(operation.added);
}

}  // namespace storage

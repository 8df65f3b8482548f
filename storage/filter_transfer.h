// Moving a whole filter in and out of a FilterStore as a dump (storage/format/dump.h): an
// ExportCursor reads one out chunk by chunk, a PendingImport takes one in.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ExportCursor> out, store.OpenExport("users"));
//   std::string chunk;
//   while (out->Next(chunk)) Send(chunk);
//
//   ASSIGN_OR_RETURN(std::unique_ptr<PendingImport> in, store.BeginImport("users-copy"));
//   for (const std::string& chunk : received) RETURN_IF_ERROR(in->Append(chunk));
//   ASSIGN_OR_RETURN(FilterInfo info, store.CommitImport(*in));
//
// Both charge the memory they hold to the store's MemoryBudget as pinned memory (never
// evicted): an export its chunk buffers, an import the filter's bits as they arrive, so that
// transfers cannot take more memory than --memory_limit allows. The FilterStore methods that
// make and finish them are implemented in filter_store_transfer.cc.
#ifndef STORAGE_FILTER_TRANSFER_H_
#define STORAGE_FILTER_TRANSFER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "storage/filter/stored_filter.h"
#include "storage/format/dump.h"
#include "storage/memory/memory_budget.h"

namespace storage {

class FilterStore;

// An Import in progress: feed it the dump's chunks, then FilterStore::CommitImport(). Memory
// for the filter is charged (pinned) as its bits arrive (DumpParser), and released if it is
// never committed. Not thread-safe; must not outlive its FilterStore.
class PendingImport {
 public:
  ~PendingImport();
  PendingImport(const PendingImport&) = delete;
  PendingImport& operator=(const PendingImport&) = delete;

  // INVALID_ARGUMENT / DATA_LOSS / RESOURCE_EXHAUSTED as in DumpParser; sticky.
  absl::Status Append(absl::string_view data) { return parser_.Append(data); }
  const std::string& name() const { return name_; }

 private:
  friend class FilterStore;
  PendingImport(std::string name, bool merge_into_existing, MemoryBudget* budget,
                const bloomtime::Clock* clock);

  const std::string name_;
  const bool merge_into_existing_;
  MemoryBudget* const budget_;
  uint64_t charged_ = 0;
  DumpParser parser_;
};

// An Export in progress: a filter's dump, chunk by chunk (DumpWriter). It keeps the filter's
// memory alive even if the filter is deleted meanwhile, and charges its chunk buffers to the
// memory budget. Not thread-safe; must not outlive its FilterStore.
class ExportCursor {
 public:
  // Bytes an export charges to the memory budget: its chunk, and the message gRPC is sending.
  static constexpr uint64_t kChargedBytes = 2 * kMaxDumpChunkBytes;

  ~ExportCursor() {
    if (pinned_) filter_->UnpinChain();
    budget_->ReleasePinned(kChargedBytes + snapshot_bytes_);
  }
  ExportCursor(const ExportCursor&) = delete;
  ExportCursor& operator=(const ExportCursor&) = delete;

  // See DumpWriter::Next. The filter's chain is pinned (StoredFilter::PinChain) until the
  // cursor is destroyed.
  bool Next(std::string& chunk) { return writer_.Next(chunk); }

 private:
  friend class FilterStore;
  ExportCursor(std::shared_ptr<StoredFilter> filter, const FilterRecord& record,
               MemoryBudget* budget)
      : filter_(std::move(filter)), budget_(budget), writer_(record, *filter_->filter()) {}
  // A CUCKOO filter's: from its copy (StoredFilter::SnapshotCuckoo), whose `snapshot_bytes`
  // are charged (pinned) too; nothing is pinned in the filter.
  ExportCursor(std::shared_ptr<StoredFilter> filter, const FilterRecord& record,
               std::unique_ptr<bloom::CuckooFilter> snapshot, uint64_t snapshot_bytes,
               MemoryBudget* budget)
      : filter_(std::move(filter)),
        budget_(budget),
        pinned_(false),
        snapshot_bytes_(snapshot_bytes),
        writer_(record, std::move(snapshot)) {}

  const std::shared_ptr<StoredFilter> filter_;
  MemoryBudget* const budget_;
  const bool pinned_ = true;
  const uint64_t snapshot_bytes_ = 0;
  DumpWriter writer_;
};

}  // namespace storage

#endif  // STORAGE_FILTER_TRANSFER_H_

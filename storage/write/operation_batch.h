// OperationBatch: adds and checks served together, the adds to every filter persisted by one
// RocksDB write (group commit: one journal write, and with --sync one fsync, however many
// filters the adds touch).
//
// Why: a Pipeline read often brings many small operations, each for another filter (one filter
// per user). Written one by one they cost a RocksDB write each (and an fsync each with --sync),
// and the writers queue in RocksDB's write group, switching threads for every one.
//
//   absl::StatusOr<std::unique_ptr<OperationBatch>> batch = store.StartBatch();
//   OperationBatch::Ticket a = (*batch)->Add("user:1", items, &spec);
//   OperationBatch::Ticket b = (*batch)->Add("user:2", items, &spec);
//   (*batch)->MightContainInto("user:3", items, present);  // answered now
//   (*batch)->Flush();                                      // one write for both adds
//   absl::StatusOr<std::vector<bool>> added = (*batch)->TakeResult(a);
//
// Meaning: an add's result is what FilterStore::Add would answer, and once it is OK the add
// is as durable as an acknowledged FilterStore::Add. Add() prepares at once (which items are
// new, room reserved, the journal record put into the pending write) and Flush() writes and
// then sets the bits, so until Flush() no reader sees the add. A check sees every add queued
// before it: a pending add to its filter is flushed first; so is a pending add to the filter of
// a new add. If the write fails, every add in it fails with that error and none was added.
//
// Locks: a prepared add holds its filter's apply lock (shared; stored_filter.h) until Flush(),
// and the batch holds the store's lifecycle lock (shared) for its whole life, so Close() waits
// for it. It never waits for a lock while holding an apply lock: when one it needs is busy (a
// checkpoint or Delete wants it, or a Reserve or Delete holds the name's lock), it flushes
// first, then waits. Keep a batch short-lived, and call no other FilterStore method from its
// thread while it lives.
//
// Thread-safety: not thread-safe; one batch per thread at a time. Must not outlive its store.
#ifndef STORAGE_WRITE_OPERATION_BATCH_H_
#define STORAGE_WRITE_OPERATION_BATCH_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bloom/cuckoo_table.h"
#include "bloom/scalable_filter.h"
#include "rocksdb/write_batch.h"
#include "storage/filter/stored_filter.h"

namespace storage {

class FilterStore;

class OperationBatch {
 public:
  using Ticket = size_t;
  // Adds to at most this many filters share a write: it bounds the apply locks one thread holds
  // (ThreadSanitizer's deadlock detector aborts beyond 64), at the cost of one more write per 32
  // filters.
  static constexpr size_t kMaxFiltersPerWrite = 32;

  // Flush()es what is pending and releases the store.
  ~OperationBatch();
  OperationBatch(const OperationBatch&) = delete;
  OperationBatch& operator=(const OperationBatch&) = delete;

  // Queues an add (arguments as FilterStore::Add; `items` need not outlive the call). Its
  // result is ready after Flush().
  Ticket Add(absl::string_view name, absl::Span<const absl::string_view> items,
             const bloom::FilterParams* create_if_missing);
  // As Add, of items given by their hashes (FilterStore::AddHashes): no create_if_missing.
  Ticket AddHashed(absl::string_view name, absl::Span<const uint64_t> hashes);
  // As FilterStore::MightContainInto, answered now.
  absl::Status MightContainInto(absl::string_view name, absl::Span<const absl::string_view> items,
                                bool* present);
  // As FilterStore::RemoveItems (CUCKOO filters), answered now, in its own write (adds pending
  // for other filters are flushed first only when the lookup must wait).
  absl::StatusOr<std::vector<bool>> RemoveItems(absl::string_view name,
                                                absl::Span<const absl::string_view> items);
  // As FilterStore::ApplyJournalRecords (a slot move's catch-up of a copy from the owner's
  // journal records), answered now, in its own write like RemoveItems.
  absl::StatusOr<size_t> CatchUp(absl::string_view name,
                                 absl::Span<const absl::string_view> records);
  // As FilterStore::Count (CUCKOO filters), answered now; like a check, it sees every add
  // queued before it.
  absl::StatusOr<std::vector<uint32_t>> Count(absl::string_view name,
                                              absl::Span<const absl::string_view> items);
  // Writes the pending adds (one RocksDB write) and applies them. A no-op when none is pending.
  void Flush();
  // The result of Add `ticket`, as FilterStore::Add would answer it; flushes first if needed.
  // Once per ticket.
  absl::StatusOr<std::vector<bool>> TakeResult(Ticket ticket);
  // The same as the batch holds it, one bool per item (no copy): for servers that answer from
  // it (1,000 answers copied out of a std::vector<bool> cost about 1% of a served add).
  absl::StatusOr<std::unique_ptr<bool[]>> TakeAnswers(Ticket ticket);

  // Adds prepared and not yet written.
  size_t pending_adds() const { return pending_.size(); }
  // RocksDB writes this batch made for its adds (for tests and metrics).
  size_t writes() const { return writes_; }

 private:
  // FilterStore::CheckOpen under the lifecycle lock the batch holds for its life.
  absl::Status CheckStoreOpen() const;
  friend class FilterStore;
  // `sync`: whether its writes of adds wait for the WAL's fsync (FilterStore::StartBatch).
  OperationBatch(FilterStore* store, bool sync);

  struct Operation {
    absl::Status status;
    std::unique_ptr<bool[]> added;
    size_t items = 0;
    bool taken = false;
  };
  struct Pending {
    std::shared_ptr<StoredFilter> filter;
    GroupedAdd grouped;
    Operation* operation;
  };

  // A write of its own (RemoveItems, CatchUp): `write` on the filter `name`,
  // looked up again when eviction raced it.
  absl::Status WriteAlone(absl::string_view name,
                          absl::FunctionRef<absl::Status(StoredFilter& filter)> write);
  // `hashes`, when not empty, are the items' hashes (and `items` is empty).
  absl::Status Prepare(absl::string_view name, absl::Span<const absl::string_view> items,
                       absl::Span<const uint64_t> hashes,
                       const bloom::FilterParams* create_if_missing, Operation& operation);

  FilterStore* const store_;
  const bool sync_;
  std::deque<Operation> operations_;  // by ticket; a deque keeps references stable
  std::vector<Pending> pending_;
  absl::flat_hash_set<const StoredFilter*> held_;  // filters of pending_
  rocksdb::WriteBatch write_;
  size_t writes_ = 0;
};

}  // namespace storage

#endif  // STORAGE_WRITE_OPERATION_BATCH_H_

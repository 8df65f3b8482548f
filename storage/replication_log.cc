#include "storage/replication_log.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "rocksdb/transaction_log.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "storage/rocksdb_status.h"

namespace storage {
namespace {

absl::Status LogGone(uint64_t start, absl::string_view why) {
  return absl::OutOfRangeError(
      absl::StrCat("the write-ahead log no longer holds sequence ", start, " (", why,
                   "): copy a snapshot"));
}

}  // namespace

absl::StatusOr<LogRead> ReadLogSince(const Database& db, uint64_t start, size_t max_bytes) {
  LogRead read;
  read.next = start;
  if (db.db() == nullptr) return absl::UnavailableError("the database is closed");
  const uint64_t latest = db.db()->GetLatestSequenceNumber();
  if (start > latest + 1) {
    return absl::OutOfRangeError(absl::StrCat("sequence ", start, " is beyond this server's ",
                                              latest, ": the follower has writes the primary "
                                              "does not; copy a snapshot"));
  }
  if (start == latest + 1) return read;
  std::unique_ptr<rocksdb::TransactionLogIterator> it;
  rocksdb::Status status = db.db()->GetUpdatesSince(start, &it);
  if (status.IsNotFound()) return LogGone(start, status.ToString());
  if (!status.ok()) return FromRocksDb(status, "reading the write-ahead log");
  size_t bytes = 0;
  for (; it->Valid(); it->Next()) {
    rocksdb::BatchResult result = it->GetBatch();
    const uint64_t count = static_cast<uint64_t>(result.writeBatchPtr->Count());
    if (result.sequence + count <= read.next) continue;  // wholly before the asked sequence
    if (result.sequence != read.next) {
      // The log skips the asked sequence, or the asked sequence falls inside a batch (which a
      // follower, applying whole batches, never asks for).
      return LogGone(read.next, absl::StrCat("the log has sequence ", result.sequence, " next"));
    }
    LogBatch& batch = read.batches.emplace_back();
    batch.sequence = result.sequence;
    batch.count = static_cast<uint32_t>(count);
    batch.data = result.writeBatchPtr->Data();
    read.next = result.sequence + count;
    bytes += batch.data.size();
    if (bytes >= max_bytes) break;
  }
  // The iterator stops at the end of what is written (TryAgain while RocksDB writes more);
  // only an error reading the log is one.
  if (!it->status().ok() && !it->status().IsTryAgain() && read.batches.empty()) {
    if (it->status().IsNotFound() || it->status().IsCorruption()) {
      return LogGone(start, it->status().ToString());
    }
    return FromRocksDb(it->status(), "reading the write-ahead log");
  }
  return read;
}

absl::StatusOr<uint64_t> CreateSnapshot(const Database& db, const std::string& dir) {
  if (db.db() == nullptr) return absl::UnavailableError("the database is closed");
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status status = rocksdb::Checkpoint::Create(db.db(), &raw);
  if (!status.ok()) return FromRocksDb(status, "starting a checkpoint");
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  uint64_t sequence = 0;
  // log_size_for_flush 0: flush the memtables first, so the checkpoint is SST files (hard
  // links) and a small MANIFEST, not a copy of the write-ahead log.
  status = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0, &sequence);
  if (!status.ok()) return FromRocksDb(status, absl::StrCat("making a checkpoint in ", dir));
  return sequence;
}

absl::StatusOr<uint32_t> BatchCount(const std::string& data) {
  // A WriteBatch's header: an 8-byte sequence and a 4-byte count, then its records.
  if (data.size() < 12) {
    return absl::InvalidArgumentError(
        absl::StrCat("a write batch of ", data.size(), " bytes is shorter than its header"));
  }
  rocksdb::WriteBatch batch(data);
  return static_cast<uint32_t>(batch.Count());
}

}  // namespace storage

#include "storage/replica/replication_log.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/transaction_log.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "storage/db/rocksdb_status.h"

namespace storage {
namespace {

absl::Status LogGone(uint64_t start, absl::string_view why) {
  return absl::OutOfRangeError(absl::StrCat("the write-ahead log no longer holds sequence ", start,
                                            " (", why, "): copy a snapshot"));
}

}  // namespace

absl::Status LogReader::Reopen() {
  it_.reset();
  rocksdb::Status status = db_.db()->GetUpdatesSince(next_, &it_);
  if (status.IsNotFound()) return LogGone(next_, status.ToString());
  if (!status.ok()) {
    it_.reset();
    return FromRocksDb(status, "reading the write-ahead log");
  }
  return absl::OkStatus();
}

absl::StatusOr<LogRead> LogReader::Read(size_t max_bytes) {
  LogRead read;
  read.next = next_;
  if (db_.db() == nullptr) return absl::UnavailableError("the database is closed");
  // Writes reach the log before their sequence is published: all up to `latest` are there.
  const uint64_t latest = db_.db()->GetLatestSequenceNumber();
  if (next_ > latest + 1) {
    return absl::OutOfRangeError(absl::StrCat("sequence ", next_, " is beyond this server's ",
                                              latest,
                                              ": the follower has writes the primary "
                                              "does not; copy a snapshot"));
  }
  if (next_ == latest + 1) return read;
  if (it_ != nullptr && it_->Valid()) it_->Next();  // past the batch returned last
  if (it_ == nullptr || !it_->Valid()) {
    // Never opened, or it reached the end of the log files it knew (RocksDB asks for a new
    // iterator to see a newer file), or an error: open one at next_.
    RETURN_IF_ERROR(Reopen());
  }
  size_t bytes = 0;
  while (it_->Valid()) {
    rocksdb::BatchResult result = it_->GetBatch();
    const auto count = static_cast<uint64_t>(result.writeBatchPtr->Count());
    if (result.sequence + count <= next_) {  // wholly before the asked sequence
      it_->Next();
      continue;
    }
    if (result.sequence != next_) {
      // The log skips the asked sequence, or it falls inside a batch (which a follower,
      // applying whole batches, never asks for).
      it_.reset();
      return LogGone(next_, absl::StrCat("the log has sequence ", result.sequence, " next"));
    }
    LogBatch& batch = read.batches.emplace_back();
    batch.sequence = result.sequence;
    batch.count = static_cast<uint32_t>(count);
    batch.data = result.writeBatchPtr->Data();
    next_ = result.sequence + count;
    bytes += batch.data.size();
    // Stay at this batch when it is the last one written (a Next() now would end the
    // iterator) or the response is full.
    if (bytes >= max_bytes || next_ > latest) break;
    it_->Next();
  }
  read.next = next_;
  if (read.batches.empty() && it_ != nullptr && !it_->Valid()) {
    const rocksdb::Status status = it_->status();
    it_.reset();
    // TryAgain: the end of the files this iterator knew; the next call opens a new one.
    if (!status.ok() && !status.IsTryAgain()) {
      if (status.IsNotFound() || status.IsCorruption()) return LogGone(next_, status.ToString());
      return FromRocksDb(status, "reading the write-ahead log");
    }
  }
  return read;
}

absl::StatusOr<LogRead> ReadLogSince(const Database& db, uint64_t start, size_t max_bytes) {
  LogReader reader(db, start);
  return reader.Read(max_bytes);
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

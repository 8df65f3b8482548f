// What a primary gives its followers, read from its own RocksDB: a consistent snapshot (a
// RocksDB checkpoint) and the write-ahead log from a sequence number on.
//
// Followers write these batches into their own RocksDB exactly as they came, so their
// sequence numbers are the primary's (a batch of n keys takes n numbers). The log is RocksDB's
// own write-ahead log, kept for followers within Database's LogRetention; there is no second
// log of ours.
//
//   absl::StatusOr<LogRead> read = ReadLogSince(db, next, 4 << 20);
//   // OUT_OF_RANGE: `next` is no longer in the log; the follower takes a snapshot instead.
//
// Thread-safety: the functions may be called from any thread; Database is thread-safe.
#ifndef STORAGE_REPLICA_REPLICATION_LOG_H_
#define STORAGE_REPLICA_REPLICATION_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rocksdb/transaction_log.h"
#include "storage/db/database.h"

namespace storage {

// One RocksDB write as it is in the log.
struct LogBatch {
  uint64_t sequence = 0;  // of its first key
  uint32_t count = 0;     // keys (sequence numbers) it takes
  std::string data;       // rocksdb::WriteBatch::Data()
};

struct LogRead {
  std::vector<LogBatch> batches;  // consecutive, the first at the asked sequence
  uint64_t next = 0;              // the sequence after the last batch (the asked one if none)
};

// Reads the log on from a sequence, call after call, as it grows. It keeps RocksDB's log
// iterator between calls (positioned at the last batch it returned), because a new iterator
// reads its log file from the file's start up to the asked sequence: tens of MB for each call
// of a follower that tails the end of a busy log.
//
// Thread-safety: one thread at a time.
class LogReader {
 public:
  LogReader(const Database& db, uint64_t start) : db_(db), next_(start) {}

  // The batches from next() on, as many as fit in about `max_bytes` (at least one). None when
  // next() is past the latest write. OUT_OF_RANGE when the log no longer reaches back to
  // next() (or it falls inside a batch, or beyond the next sequence this DB will write).
  absl::StatusOr<LogRead> Read(size_t max_bytes);
  uint64_t next() const { return next_; }

 private:
  absl::Status Reopen();

  const Database& db_;
  uint64_t next_;
  std::unique_ptr<rocksdb::TransactionLogIterator> it_;  // at the last batch returned, if any
};

// One LogReader::Read from `start`.
absl::StatusOr<LogRead> ReadLogSince(const Database& db, uint64_t start, size_t max_bytes);

// Makes a RocksDB checkpoint of `db` in `dir` (which must not exist; on the same file system,
// its SST files are hard links) and returns the sequence number it holds every write up to.
absl::StatusOr<uint64_t> CreateSnapshot(const Database& db, const std::string& dir);

// The number of keys of a batch received from the primary; INVALID_ARGUMENT when it is too
// short to be one.
absl::StatusOr<uint32_t> BatchCount(const std::string& data);

}  // namespace storage

#endif  // STORAGE_REPLICA_REPLICATION_LOG_H_

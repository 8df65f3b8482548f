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
#ifndef STORAGE_REPLICATION_LOG_H_
#define STORAGE_REPLICATION_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/database.h"

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

// The batches from `start` on, as many as fit in about `max_bytes` (at least one). None when
// `start` is past the latest write. OUT_OF_RANGE when the log no longer reaches back to `start`
// (or `start` falls inside a batch, or beyond the next sequence the primary will write).
absl::StatusOr<LogRead> ReadLogSince(const Database& db, uint64_t start, size_t max_bytes);

// Makes a RocksDB checkpoint of `db` in `dir` (which must not exist; on the same file system,
// its SST files are hard links) and returns the sequence number it holds every write up to.
absl::StatusOr<uint64_t> CreateSnapshot(const Database& db, const std::string& dir);

// The number of keys of a batch received from the primary; INVALID_ARGUMENT when it is too
// short to be one.
absl::StatusOr<uint32_t> BatchCount(const std::string& data);

}  // namespace storage

#endif  // STORAGE_REPLICATION_LOG_H_

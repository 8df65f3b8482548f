// The RocksDB instance behind a FilterStore: one DB with the column families of encoding.h.
//
// Thread-safety: all methods are safe to call concurrently (RocksDB's DB is); the destructor
// must not race with other calls.
#ifndef STORAGE_DATABASE_H_
#define STORAGE_DATABASE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocksdb/db.h"
#include "rocksdb/statistics.h"
#include "rocksdb/write_batch.h"

namespace storage {

class Database {
 public:
  // Opens or creates the DB in `dir`. FailedPrecondition when another process holds the
  // directory's lock or the data has a newer format; otherwise the RocksDB error.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& dir);

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Closes RocksDB (flushing nothing: the WAL already holds every write). Idempotent.
  absl::Status Close();

  rocksdb::DB* db() const { return db_.get(); }
  rocksdb::ColumnFamilyHandle* filters() const { return handles_[1]; }
  rocksdb::ColumnFamilyHandle* blocks() const { return handles_[2]; }
  rocksdb::ColumnFamilyHandle* journal() const { return handles_[3]; }
  rocksdb::Statistics* statistics() const { return statistics_.get(); }

  // Applies `batch` atomically. With `sync`, the WAL is fsynced before returning (concurrent
  // writers share one fsync: RocksDB's write group); without, the WAL is in the OS page cache,
  // which survives a process crash but not a power loss.
  absl::Status Write(rocksdb::WriteBatch& batch, bool sync, absl::string_view context);

  // A full scan of one column family, without polluting the block cache.
  std::unique_ptr<rocksdb::Iterator> Scan(rocksdb::ColumnFamilyHandle* family) const;

 private:
  Database() = default;

  std::shared_ptr<rocksdb::Statistics> statistics_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // default, filters, blocks, journal
};

}  // namespace storage

#endif  // STORAGE_DATABASE_H_

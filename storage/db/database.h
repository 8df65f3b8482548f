// The RocksDB instance behind a FilterStore: one DB with the column families of encoding.h.
//
// Thread-safety: all methods are safe to call concurrently (RocksDB's DB is); the destructor
// must not race with other calls.
#ifndef STORAGE_DB_DATABASE_H_
#define STORAGE_DB_DATABASE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "common/mutex.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/statistics.h"
#include "rocksdb/write_batch.h"
#include "storage/store_figures.h"

namespace storage {

// The bytes of a RocksDB key or value, as the string_view the storage layer parses.
inline absl::string_view ViewOf(const rocksdb::Slice& slice) {
  return {slice.data(), slice.size()};
}

// How long RocksDB keeps write-ahead log files it no longer needs, so that followers can tail
// the log (storage/replica/replication_log.h): a file is deleted once it is older than `ttl` or the
// kept files pass `size_limit_bytes`, whichever comes first. Zeros: deleted at once.
struct LogRetention {
  absl::Duration ttl = absl::ZeroDuration();
  uint64_t size_limit_bytes = 0;
};

class WalArchive;

class Database {
 public:
  // Opens or creates the DB in `dir`, on `env` (nullptr: the default, real file system).
  // RESOURCE_EXHAUSTED, before RocksDB is touched, when the volume lacks the room to replay
  // and flush the write-ahead log (RocksDB would abort on a failed recovery write).
  // FailedPrecondition when another process holds the directory's lock or the data has a newer
  // format; otherwise the RocksDB error.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& dir,
                                                        rocksdb::Env* env = nullptr,
                                                        LogRetention retention = {});

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
  // After an I/O error (e.g. disk full) RocksDB refuses writes until it recovers: the next
  // Write() calls DB::Resume() first, and every refusal names the original error. If RocksDB
  // gives up on recovering (it escalates a disk-full error to fatal when its own retry fails
  // while the disk is still full), NeedsReopen() turns true.
  absl::Status Write(rocksdb::WriteBatch& batch, bool sync, absl::string_view context);
  // Asked before every Write(): an error refuses the write with it. For a primary elected
  // through etcd that stopped writing (StoreOptions::may_acknowledge): nothing more may enter
  // its log, which must stay a prefix of the next primary's. Set once, before any Write()
  // that may run concurrently with it.
  void SetWriteGate(std::function<absl::Status()> gate) { write_gate_ = std::move(gate); }
  // Makes every write that finished before this call durable (an fsync of the write-ahead
  // log), for writes made with sync=false (storage/write/wal_sync.h). An I/O error is handled as a
  // failed write's is.
  absl::Status SyncWal();

  // The sequence number of the latest write (0 for a closed DB). Writes take consecutive numbers,
  // one per key of their batch.
  uint64_t LatestSequence() const;
  // Waits until a write with a sequence number above `sequence` has finished, or `timeout`
  // passed; returns whether one has. For the replication stream (replication_log.h): writers
  // pay for the wake-up only while someone waits.
  // `woken` (may be null): the wait also ends once it reads true after WakeWriteWaiters().
  bool WaitForWriteAfter(uint64_t sequence, absl::Duration timeout,
                         const std::atomic<bool>* woken = nullptr);
  // Wakes the WaitForWriteAfter calls, which return if their `woken` flag is set.
  void WakeWriteWaiters();

  // Whether RocksDB must be closed and opened again before it accepts writes.
  bool NeedsReopen() const { return needs_reopen_.load(); }
  // Closes and reopens RocksDB (same directory and Env). The caller must ensure nothing else
  // uses this Database meanwhile (FilterStore holds its lifecycle lock exclusively). On error
  // the Database stays closed: writes and scans answer UNAVAILABLE until a Reopen() succeeds.
  absl::Status Reopen();

  // Someone reads the write-ahead log for replication (a follower's Tail, or a Snapshot it
  // will tail from): archived log files are kept for the retention's TTL from now
  // (wal_archive.h). Without a retention, nothing.
  void NoteLogReader() const;

  // Reads RocksDB's properties; zeros for a closed DB. Must not race with Reopen() or Close().
  RocksDbFigures Figures() const;

  // A full scan of one column family in key order, without polluting the block cache.
  std::unique_ptr<rocksdb::Iterator> Scan(rocksdb::ColumnFamilyHandle* family) const;
  // RocksDB's iterator, or one that answers ABORTED while the DB is being reopened.
  std::unique_ptr<rocksdb::Iterator> NewIterator(const rocksdb::ReadOptions& options,
                                                 rocksdb::ColumnFamilyHandle* family) const;

 private:
  Database(std::string dir, rocksdb::Env* env, LogRetention retention);
  absl::Status OpenRocksDb();
  // After a failed write or WAL sync: an I/O error makes the next Write() Resume() RocksDB
  // first, and is kept to explain the refusals until then.
  void NoteWriteError(const rocksdb::Status& status);
  absl::Status CloseRocksDb();

  const std::string dir_;
  rocksdb::Env* const env_;
  const LogRetention retention_;
  // Keeps the archive of log files within retention_ (null without one); outlives Reopen().
  std::unique_ptr<WalArchive> archive_;
  // WaitForWriteAfter's waiters, woken by Write() while there are any.
  std::function<absl::Status()> write_gate_;  // set before concurrent writes
  std::atomic<int> write_waiters_{0};
  bloomsync::BlockingMutex write_wait_mu_;
  bloomsync::CondVar write_wait_cv_;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  std::shared_ptr<rocksdb::Cache> block_cache_;  // shared by every column family
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // default, filters, blocks, journal
  std::atomic<bool> needs_resume_{false};              // a write failed with an I/O error
  std::atomic<bool> needs_reopen_{false};              // Resume() failed for good
  mutable bloomsync::Mutex error_mu_;
  std::string last_write_error_ ABSL_GUARDED_BY(error_mu_);
};

// The keys of one filter generation in a family keyed by it (blocks, journal), in key order,
// positioned at the first. Use this, not a seek of Scan(), for one generation: it reads only
// that generation's bucket of the hashed memtables (the journal's and the pages').
class GenerationScan {
 public:
  GenerationScan(const Database& db, rocksdb::ColumnFamilyHandle* family, uint64_t generation);
  rocksdb::Iterator& operator*() { return *it_; }
  rocksdb::Iterator* operator->() { return it_.get(); }

 private:
  const std::string upper_;
  const rocksdb::Slice upper_slice_;  // refers to upper_; the iterator refers to it
  std::unique_ptr<rocksdb::Iterator> it_;
};

}  // namespace storage

#endif  // STORAGE_DB_DATABASE_H_

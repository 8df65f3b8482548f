// WalArchive: keeps RocksDB's archive of old write-ahead log files (<data dir>/archive), which
// followers tail (replication_log.h), within the replication log's bounds at all times.
//
// RocksDB moves a log file to the archive once no memtable needs it and, with both a TTL and a
// size limit set, looks at the archive's size only every ten minutes: under steady writes it
// grew to three times a 32 MiB limit within seconds. This purges it itself, oldest file first,
// on its own thread every `interval`, and at once (and again shortly after) when Wake() says a
// flush finished, which is when RocksDB archives a log file:
// - down to `size_limit_bytes` (so the archive holds more than the limit only for the moment
//   between a log file's archiving and the purge that follows: that file, at most
//   max_total_wal_size);
// - without files older than `ttl`;
// - and entirely while nobody has read the log for a `ttl` (NoteReader: a follower tailing, or
//   one that copied a snapshot and will tail from its sequence): a server without followers
//   keeps no archive. A follower away longer than the TTL copies a snapshot anyway. The time of
//   the last read is kept in a file beside the data (kReadersFile, written at most once a
//   minute), so that a primary restarted for an update keeps what its followers will resume
//   from, and one that never had followers keeps nothing from its start on.
// A reader that needed a purged file learns it as from RocksDB's own purge: OUT_OF_RANGE, and
// it copies a snapshot.
//
//   WalArchive archive(env, db_dir, retention, absl::Seconds(1));
//   archive.NoteReader();  // from the replication streams
//
// Thread-safety: thread-safe. Destroy it before closing the RocksDB it watches.
#ifndef STORAGE_REPLICA_WAL_ARCHIVE_H_
#define STORAGE_REPLICA_WAL_ARCHIVE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "rocksdb/env.h"
#include "storage/db/database.h"

namespace storage {

class WalArchive {
 public:
  // `env` (not null) is the Env RocksDB runs on; `interval` zero: no thread (Purge() only).
  WalArchive(rocksdb::Env* env, std::string db_dir, LogRetention retention,
             absl::Duration interval);
  ~WalArchive();  // joins the thread
  WalArchive(const WalArchive&) = delete;
  WalArchive& operator=(const WalArchive&) = delete;

  // A flush finished (RocksDB archives the log files it no longer needs right after): purge now,
  // and again a moment later.
  void Wake();

  // Someone reads (or is about to read) the log: archived files are kept for a TTL from now.
  void NoteReader() { last_reader_micros_.store(absl::ToUnixMicros(absl::Now())); }

  // Deletes the archived files the bounds do not keep, as of `now`; returns the bytes kept.
  // An error names the file that could not be listed or deleted (the next round retries).
  absl::StatusOr<uint64_t> Purge(absl::Time now);

 private:
  void Loop();
  // Writes the time of the last read into kReadersFile if it moved on by a minute.
  void PersistLastReader() ABSL_EXCLUSIVE_LOCKS_REQUIRED(purge_mu_);

  rocksdb::Env* const env_;
  const std::string db_dir_;
  const std::string dir_;  // the archive directory
  const LogRetention retention_;
  const absl::Duration interval_;
  std::atomic<int64_t> last_reader_micros_;
  int64_t persisted_reader_micros_ ABSL_GUARDED_BY(purge_mu_) = 0;
  bloomsync::BlockingMutex purge_mu_;  // one purge at a time
  bloomsync::BlockingMutex mu_;
  bloomsync::CondVar stop_cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace storage

#endif  // STORAGE_REPLICA_WAL_ARCHIVE_H_

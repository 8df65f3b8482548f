// What the store reports for monitoring, and the narrow interface through which metrics/ reads
// it (FiguresSource): the metrics layer needs these figures, not FilterStore's API.
//
// Thread-safety: the structs are plain values; FiguresSource::Figures() is thread-safe in every
// implementation (FilterStore's takes its own locks).
#ifndef STORAGE_STORE_FIGURES_H_
#define STORAGE_STORE_FIGURES_H_

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace storage {

// RocksDB's own figures, summed over the column families (for monitoring).
struct RocksDbFigures {
  uint64_t live_sst_bytes = 0;
  uint64_t pending_compaction_bytes = 0;  // RocksDB's estimate
  uint64_t memtable_bytes = 0;
  uint64_t table_reader_bytes = 0;  // open SST files' memory outside the block cache
  uint64_t block_cache_bytes = 0;   // data, index and filter blocks cached
  bool write_stopped = false;       // writes are stalled right now
  uint64_t delayed_write_rate = 0;  // bytes/s while writes are slowed down, else 0
  uint64_t write_stall_micros = 0;  // total time writes waited in stalls, since open
};

// Figures for monitoring (FiguresSource::Figures()).
struct StoreFigures {
  size_t filters = 0;
  // Of those, filters that answer DATA_LOSS (their stored data is unreadable) and filters left
  // on disk at start-up because they did not fit the memory limit (RESOURCE_EXHAUSTED).
  size_t unreadable_filters = 0;
  size_t unloaded_filters = 0;
  // Filters in memory, and filters on disk only (evicted, or cold since start-up).
  size_t resident_filters = 0;
  size_t cold_filters = 0;
  uint64_t evictions = 0;    // since start
  uint64_t loads = 0;        // cold filters loaded on use, since start
  absl::Duration load_time;  // spent in those loads
  // Pages and journal records of no filter that start-up deleted.
  uint64_t orphans_deleted_at_start = 0;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_limit_bytes = 0;  // 0: no limit
  // Journal written since the filters' last checkpoints: what a restart would replay.
  uint64_t journal_pending_bytes = 0;
  // Since the last checkpoint of the filter that has waited longest with unpersisted changes;
  // zero when every change is checkpointed.
  absl::Duration checkpoint_lag;
  uint64_t checkpoints = 0;  // by the background checkpointer, since start
  uint64_t checkpoint_failures = 0;
  uint64_t filters_expired = 0;  // deleted for their idle_ttl, since start
  uint64_t slices_retired = 0;   // expired time slices of windowed filters freed, since start
  // With --sync: group fsyncs of the write-ahead log for deferred adds, and the requests
  // (calls and Pipeline batches) they answered.
  uint64_t wal_syncs = 0;
  uint64_t wal_sync_requests = 0;
  // Batches the group committer served, and the jobs (Add calls, Pipeline batches with adds)
  // in them.
  uint64_t group_commits = 0;
  uint64_t group_commit_jobs = 0;
  RocksDbFigures rocksdb;
  // The file system holding the data dir: its size, and the bytes free to this process
  // (statvfs: f_blocks and f_bavail); both 0 if it could not be read.
  uint64_t disk_size_bytes = 0;
  uint64_t disk_free_bytes = 0;
  // Resident filters whose journal a slot move holds (journal_holds.h), and the journal
  // records written to them since the mover last read them: what its next catch-up reads.
  uint64_t journal_held_filters = 0;
  uint64_t journal_hold_lag_records = 0;
};

// Where the figures come from: FilterStore, or a test's stand-in.
class FiguresSource {
 public:
  virtual ~FiguresSource() = default;
  virtual StoreFigures Figures() const = 0;
};

}  // namespace storage

#endif  // STORAGE_STORE_FIGURES_H_

// What a FilterStore is opened with (StoreOptions) and what it reports: at start-up
// (LoadReport) and for monitoring (StoreFigures).
//
// Thread-safety: plain values.
#ifndef STORAGE_STORE_OPTIONS_H_
#define STORAGE_STORE_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "bloom/window.h"
#include "rocksdb/env.h"
#include "storage/db/database.h"
#include "storage/store_figures.h"

namespace storage {

struct StoreOptions {
  std::string data_dir;
  // fsync the WAL before acknowledging an Add (survives power loss, not only crashes).
  bool sync = false;
  // Bytes of filter bits (and Export/Import buffers) the store keeps in memory; 0 means no
  // limit. Filter bits are a cache under it: past the limit, the least recently used filters
  // are written out and freed, and loaded again on their next use (filter_store_residency.cc).
  uint64_t memory_limit_bytes = 0;
  // A filter with unpersisted changes is checkpointed at least this often.
  absl::Duration checkpoint_interval = absl::Seconds(30);
  // The background checkpointer writes the pages of a large checkpoint at most this fast
  // (write_pacer.h): a steady stream instead of a burst, for the disk, for the adds waiting in
  // RocksDB's write queue, and for followers, which receive every page through the log. 0: as
  // fast as RocksDB takes them. A checkpoint of under 1 MiB of pages is never held back.
  uint64_t checkpoint_write_bytes_per_second = 64 << 20;
  // Wall-clock time for windows, idle expiry and creation times; tests inject a ManualClock.
  // Must outlive the store.
  const bloomtime::Clock* clock = bloomtime::Clock::Real();
  // What the store's waits are measured on: the checkpoint pacer's (tests step a ManualClock
  // to know a paced checkpoint is waiting, and to end its wait). Must outlive the store.
  const bloomtime::Clock* wait_clock = bloomtime::Clock::Real();
  // Run the background checkpointer (tests turn it off to control checkpoints).
  bool background_checkpoints = true;
  // With a memory limit, run the background evictor, which a charge past the limit wakes.
  // Without it nothing is evicted until EvictToBudget is called: tests that assert which
  // filters a round evicts turn it off, because a background round can start while a Reserve
  // holds its name's lock stripe and pass over a candidate that shares the stripe.
  bool background_eviction = true;
  // Start without reading any filter: only the journal is scanned (to know which filters have
  // adds to replay), and every filter loads on first use. Start-up time then does not depend on
  // the number of filters; what an eager start-up also does (report unreadable filters, delete
  // orphaned pages) is left out. The first start of a data dir written before
  // kGenerationCeilingKey existed is eager.
  bool lazy_start = false;
  // The RocksDB Env (file system) to run on; null: the real one. Tests inject faults with it.
  // Must outlive the store.
  rocksdb::Env* env = nullptr;

  // Replication (filter_store_replica.cc, replication_log.h). A replica is a follower's store: it
  // takes writes only from the primary's log (ApplyReplicated), never writes RocksDB itself
  // (no checkpoints, no idle expiry, evictions only drop memory), and refuses the write calls.
  bool replica = false;
  // How long the write-ahead log is kept for followers that tail it.
  LogRetention log_retention;
  // On a primary: writes are acknowledged only once this many followers hold them durably
  // (ReplicaAcks), or fail UNAVAILABLE after replica_ack_timeout.
  int min_replica_acks = 0;
  absl::Duration replica_ack_timeout = absl::Seconds(5);
  // On a primary elected through etcd (coordination/cluster_member.h): asked before each write
  // is applied, and again right before it is acknowledged (after its fsync and followers'
  // acknowledgements, if any). False fails the write UNAVAILABLE: this pod can no longer be
  // sure it is the primary (another may already have taken over), or it is handing over.
  // Null: always acknowledge. Must be cheap and thread-safe.
  std::function<bool()> may_acknowledge;
  // With may_acknowledge: called with a sequence covering the write, after the fence said yes
  // and before the write is answered OK (--ack_log). Must be thread-safe.
  std::function<void(uint64_t sequence)> on_acknowledged;
};

struct LoadReport {
  size_t filters = 0;
  size_t unreadable = 0;
  // Filters larger than the whole memory limit, left on disk (RESOURCE_EXHAUSTED on use).
  size_t not_loaded = 0;
  // Filters left on disk because the memory limit was full; loaded on first use.
  size_t cold = 0;
  // Pages and journal records that belonged to no filter, deleted (see filter_store_recovery.cc).
  uint64_t orphans_deleted = 0;
  uint64_t pages = 0;
  uint64_t journal_records = 0;
  absl::Duration elapsed;
};

}  // namespace storage

#endif  // STORAGE_STORE_OPTIONS_H_

// ReplicatedStore: what replication (replication/: the primary's tail streams, a follower)
// needs of a store, and no more: its sequence numbers, a replica's only writes, the idle
// touches a replica sends its primary, the followers' acknowledgements, and the database whose
// log is tailed. FilterStore implements it (filter_store_replica.cc); replication/ sees the
// store through it, as metrics/ sees it through FiguresSource.
//
// Thread-safety: every method is thread-safe.
#ifndef STORAGE_REPLICA_REPLICATED_STORE_H_
#define STORAGE_REPLICA_REPLICATED_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "storage/db/database.h"
#include "storage/filter/creation_log.h"
#include "storage/replica/replica_acks.h"
#include "storage/replica/replication_log.h"

namespace storage {

// A slot move's position in a filter's journal, and what was added after one
// (FilterStore::StartJournal and ReadJournal).
struct JournalPosition {
  uint64_t generation = 0;
  uint64_t seq = 0;  // every add up to this journal sequence is in the bits
};
struct JournalDelta {
  JournalPosition to;            // the position the hashes (or records) reach
  std::vector<uint64_t> hashes;  // of the items added after `from`, in order
  // A CUCKOO filter's or a windowed BLOOM filter's instead: its journal records after `from`,
  // in order, as stored (storage/format/cuckoo_journal.h: the table values its adds and
  // removes wrote; storage/format/encoding.h: the hashes each add set and the slices they
  // went to), which a copy applies (FilterStore::ApplyJournalRecords).
  std::vector<std::string> records;
  bool more = false;  // max_hashes reached: read again from `to`
};
// What a journal record of `bytes` counts against a read's (or an apply's) bound on hashes:
// one per 8 bytes (a cuckoo record's two slot changes, a windowed record's one hash), so
// answers are bounded alike.
inline size_t JournalRecordCost(size_t bytes) { return (bytes + 7) / 8; }

class ReplicatedStore {
 public:
  virtual ~ReplicatedStore() = default;

  // The sequence number of the latest write: what a write answers (bloom.v1 `sequence`) and
  // what a follower has applied.
  virtual uint64_t LatestSequence() const = 0;
  // What reads see: on a replica, the last sequence whose batch is in RocksDB *and* in the
  // filters in memory (LatestSequence() moves first, when the batch is written); on a primary,
  // LatestSequence(). Read-your-writes waits for this one.
  virtual uint64_t VisibleSequence() const = 0;
  virtual bool is_replica() const = 0;
  // A replica's only writes: the primary's batches, which must follow on from
  // LatestSequence(); with `sync`, fsynced before it returns. The filters they change in
  // memory follow (journal records replayed into resident filters; a changed metadata record
  // makes its filter load again on its next use). FAILED_PRECONDITION on a primary,
  // DATA_LOSS when a batch does not follow on.
  virtual absl::Status ApplyReplicated(absl::Span<const LogBatch> batches, bool sync) = 0;
  // A replica's filters with an idle_ttl used since the last call (idle_touches.h), for its
  // primary; and on the primary, those names counted as used now (a cold one is loaded).
  virtual std::vector<std::string> TakeIdleTouches() = 0;
  virtual void TouchIdle(absl::Span<const std::string> names) = 0;
  // The followers' acknowledgements on a primary with min_replica_acks; null otherwise.
  virtual ReplicaAcks* replica_acks() const = 0;
  // The database whose write-ahead log the primary's tail streams read.
  virtual Database& database() = 0;
  // Slot moves, on a primary (bloom.replication.v1 ReadJournal and ApplyJournal): a copy of a
  // filter caught up from its journal (FilterStore::StartJournal, ReadJournal, AddHashes,
  // ApplyJournalRecords).
  virtual absl::StatusOr<JournalPosition> StartJournal(absl::string_view name,
                                                       absl::Duration hold) = 0;
  virtual absl::StatusOr<JournalDelta> ReadJournal(absl::string_view name, JournalPosition from,
                                                   size_t max_hashes, absl::Duration hold) = 0;
  virtual absl::StatusOr<size_t> AddHashes(absl::string_view name,
                                           absl::Span<const uint64_t> hashes) = 0;
  virtual absl::StatusOr<size_t> ApplyJournalRecords(
      absl::string_view name, absl::Span<const absl::string_view> records) = 0;
  // Slot moves, on a primary (bloom.replication.v1 ListMade): the filters made while a mover
  // watches (FilterStore::WatchCreations, CreationsSince).
  virtual CreationLog::Position WatchCreations(absl::Duration hold) = 0;
  virtual absl::optional<CreationLog::Made> CreationsSince(CreationLog::Position from,
                                                           absl::Duration hold) = 0;
};

}  // namespace storage

#endif  // STORAGE_REPLICA_REPLICATED_STORE_H_

// FilterStore: named filters (scalable Bloom filters, and CUCKOO filters that can forget), in
// memory for speed, persisted in RocksDB.
//
// Example:
//   absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open({.data_dir = dir});
//   (*store)->Reserve("users", {.capacity = 1'000'000, .error_rate = 0.01});
//   std::vector<absl::string_view> items = {"alice", "bob"};
//   absl::StatusOr<std::vector<bool>> added = (*store)->Add("users", items, nullptr);
//   absl::StatusOr<std::vector<bool>> present = (*store)->MightContain("users", items);
//   (*store)->Close();
//
// Durability: when Add returns OK, its items are in RocksDB's WAL (fsynced too with
// `sync`), and after a crash and Open they read as present. An Add is atomic: on error none of
// its items was added. See stored_filter.h for the journal and checkpoint design.
//
// Errors (absl codes, which are gRPC's): INVALID_ARGUMENT for a bad name or spec (the message
// names the field); NOT_FOUND for a missing filter; ALREADY_EXISTS for a Reserve that
// conflicts with an existing spec; RESOURCE_EXHAUSTED for a full non-scaling filter or the
// memory limit; DATA_LOSS for a filter whose stored data is unreadable (the others still
// work); UNAVAILABLE when RocksDB cannot write (e.g. disk full); FAILED_PRECONDITION after
// Close.
//
// Thread-safety: every method is thread-safe. Operations on one filter run in parallel without
// a global lock; Reserve/Delete of one name are serialised (by a lock striped over names).
#ifndef STORAGE_FILTER_STORE_H_
#define STORAGE_FILTER_STORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "bloom/scalable_filter.h"
#include "common/mutex.h"
#include "storage/checkpoint/checkpoint_schedule.h"
#include "storage/checkpoint/checkpointer.h"
#include "storage/db/database.h"
#include "storage/filter/creation_log.h"
#include "storage/filter/journal_holds.h"
#include "storage/filter/stored_filter.h"
#include "storage/filter_registry.h"
#include "storage/filter_transfer.h"
#include "storage/memory/memory_budget.h"
#include "storage/memory/residency.h"
#include "storage/replica/replica_acks.h"
#include "storage/replica/replica_index.h"
#include "storage/replica/replicated_store.h"
#include "storage/replica/replication_log.h"
#include "storage/store_options.h"
#include "storage/write/group_commit.h"
#include "storage/write/operation_batch.h"
#include "storage/write/wal_sync.h"
#include "storage/write/write_pacer.h"

namespace storage {

// Names are 1-255 characters of [A-Za-z0-9_.:/-]. InvalidArgument naming `field` otherwise.
absl::Status ValidateFilterName(absl::string_view name, absl::string_view field = "name");

class FilterStore final : public FiguresSource, public ReplicatedStore {
 public:
  // Opens (or creates) the store and loads every filter: checkpointed pages, then the journal.
  static absl::StatusOr<std::unique_ptr<FilterStore>> Open(const StoreOptions& options);

  FilterStore(const FilterStore&) = delete;
  FilterStore& operator=(const FilterStore&) = delete;
  // Calls Close() if it was not called.
  ~FilterStore() override;

  // Stops the checkpointer, checkpoints every filter, closes RocksDB. Later calls on the store
  // answer FAILED_PRECONDITION. Idempotent.
  absl::Status Close();

  struct ReserveResult {
    bool created = false;
    FilterInfo info;
  };
  // Reserve, ReserveLike, Merge, Delete and CommitImport answer once the followers hold the
  // write (options.min_replica_acks) and the fence allows it (options.may_acknowledge), waiting
  // on the caller's thread; with `defer_ack` they answer as soon as it is written, and the
  // caller acknowledges it only once a WhenReplicated() made after it calls back OK (a server
  // does so: no thread of its waits for a slow follower).
  //
  // Creates `name` with `spec`. If it exists with the same (normalized) spec: created=false;
  // with another spec: ALREADY_EXISTS.
  absl::StatusOr<ReserveResult> Reserve(absl::string_view name, const bloom::FilterParams& spec,
                                        bool defer_ack = false);
  // Creates `name` empty, like `like`: its spec and its seed, so that the two can be merged
  // (filter_store_merge.cc). If `name` exists with that spec and seed: created=false; otherwise
  // ALREADY_EXISTS. NOT_FOUND when `like` does not exist.
  absl::StatusOr<ReserveResult> ReserveLike(absl::string_view name, absl::string_view like,
                                            bool defer_ack = false);
  // As ReserveLike, with the model given by its record (spec and seed: DumpHeaderReader's, from
  // the dump of a filter another server holds).
  absl::StatusOr<ReserveResult> ReserveLikeRecord(absl::string_view name, const FilterRecord& like,
                                                  absl::string_view like_name,
                                                  bool defer_ack = false);
  // ORs the bits of `sources` into `target` (StoredFilter::Merge): afterwards the target
  // answers "maybe" for every item any of them had, and the union is durable (one RocksDB
  // write up to 64 MiB of changed pages, bounded batches beyond; followers have it before this
  // answers, as for any write). Answers the target's stats. INVALID_ARGUMENT for no sources or
  // more than kMaxMergeSources, bad names, a source named twice, or the target among them;
  // NOT_FOUND for a missing filter; FAILED_PRECONDITION for filters not made alike (naming the
  // mismatch), windowed ones, or CUCKOO ones.
  absl::StatusOr<FilterInfo> Merge(absl::string_view target, absl::Span<const std::string> sources,
                                   bool defer_ack = false);
  // Sources one Merge reads (each pinned and looked up: bounded work per call).
  static constexpr size_t kMaxMergeSources = 64;

  // Slot moves (filter_store_journal.cc): a copy of a filter, made at another store, caught
  // up from this one's journal instead of copied again.
  //
  //   JournalPosition at = StartJournal(name, hold);   // then copy the filter (Export)
  //   JournalDelta delta = ReadJournal(name, at, max_hashes, hold);  // at the copy:
  //   AddHashes(name, delta.hashes);                   // or, for a CUCKOO or windowed filter,
  //   ApplyJournalRecords(name, delta.records);        // and then
  //   at = delta.to;                                   // again
  // Holds `name`'s journal (journal_holds.h: checkpoints keep its later records) for `hold`,
  // and answers the position every add so far is at: a copy of its bits made after this holds
  // every add up to it, and ReadJournal from it gives every later one. NOT_FOUND.
  absl::StatusOr<JournalPosition> StartJournal(absl::string_view name, absl::Duration hold) final;
  // The hashes of the items added to `name` after `from` (whole journal records, up to about
  // `max_hashes`), or a CUCKOO or windowed filter's records (each counted as a hash per 8
  // bytes), and the position they reach; renews the hold. FAILED_PRECONDITION (copy it whole,
  // then StartJournal again) when the filter is not `from`'s generation any more (it was
  // deleted and reserved again), or its records after `from` were not held throughout (the
  // hold lapsed: a checkpoint may have trimmed them, or a merge wrote pages); NOT_FOUND when
  // it is gone.
  absl::StatusOr<JournalDelta> ReadJournal(absl::string_view name, JournalPosition from,
                                           size_t max_hashes, absl::Duration hold) final;
  // Starts or renews, for `hold`, the log of the filters this store makes (creation_log.h:
  // a mover's rounds ask which were made since the last instead of listing every filter),
  // and answers the position now.
  CreationLog::Position WatchCreations(absl::Duration hold) final;
  // The names of the filters made after `from` (Reserve, an add creating its filter,
  // Import), renewing the watch; nullopt if the log cannot say them all (list every filter).
  absl::optional<CreationLog::Made> CreationsSince(CreationLog::Position from,
                                                   absl::Duration hold) final;
  // Adds to `name` the items of `hashes` (ReadJournal's, from a filter made alike: the same
  // seed), as Add adds items: durable and acknowledged as Add, NOT_FOUND if missing. Answers
  // how many were new.
  absl::StatusOr<size_t> AddHashes(absl::string_view name, absl::Span<const uint64_t> hashes) final;
  // Applies to the copy `name` the journal `records` (ReadJournal's, from the filter this one
  // was copied from), in order, as one change (StoredFilter::CatchUp): durable and
  // acknowledged as an add. Answers how many changes it wrote (a CUCKOO filter's slot
  // changes, a windowed filter's hashes it lacked). NOT_FOUND if missing; DATA_LOSS for a
  // record that does not decode; FAILED_PRECONDITION (nothing written: copy it whole) for
  // records of another kind, or naming a table or slice the copy lacks (the original grew a
  // table, or opened a slice, since).
  absl::StatusOr<size_t> ApplyJournalRecords(absl::string_view name,
                                             absl::Span<const absl::string_view> records) final;

  // Adds items; result[i] tells whether items[i] was new. Missing filter: NOT_FOUND, unless
  // `create_if_missing` is given, then it is created with that spec (even when many callers
  // race). An existing filter keeps its own spec.
  //
  // With `defer_sync` (and options.sync), the add does not wait for the fsync of the
  // write-ahead log: it is written and visible at once, and durable once a WhenDurable() call
  // made after it calls back; the caller acknowledges it then. Without options.sync it changes
  // nothing (WhenDurable calls back at once).
  absl::StatusOr<std::vector<bool>> Add(absl::string_view name,
                                        absl::Span<const absl::string_view> items,
                                        const bloom::FilterParams* create_if_missing,
                                        bool defer_sync = false);
  // Calls `done` once every add that returned before this call is durable: at once (OK)
  // without options.sync, else after a group fsync of the write-ahead log
  // (storage/write/wal_sync.h), on the syncer's thread, with its status. `done` must not block.
  // Call it for every deferred add or batch, also one that found all its items present: their bits
  // may come from an add that is not durable yet.
  void WhenDurable(WalSyncer::Done done);
  // Calls `done` once every write that returned before this call is acknowledged: held by
  // options.min_replica_acks followers and allowed by the fence (at once, OK, without either),
  // from the thread that acknowledges it. For writes made with `defer_ack`; as WhenDurable
  // without the WAL's fsync (those writes made their own).
  void WhenReplicated(WalSyncer::Done done);
  // Whether adds with defer_sync need WhenDurable() to wait for anything: options.sync, or
  // followers' acknowledgements (options.min_replica_acks), or the fence
  // (options.may_acknowledge). With acknowledgements, WhenDurable
  // also waits for them, and Reserve, Delete and CommitImport answer only once they have them.
  bool syncs_adds() const {
    return options_.sync || acks_ != nullptr || options_.may_acknowledge != nullptr;
  }
  // fsyncs of the write-ahead log WhenDurable() made, and the requests they served.
  uint64_t wal_syncs() const { return wal_syncer_ ? wal_syncer_->syncs() : 0; }
  uint64_t wal_sync_requests() const { return wal_syncer_ ? wal_syncer_->requests() : 0; }
  // result[i] false means items[i] was never added.
  absl::StatusOr<std::vector<bool>> MightContain(absl::string_view name,
                                                 absl::Span<const absl::string_view> items);
  // As MightContain, writing present[i] for items[i] into `present` (items.size() bools):
  // for callers that answer from their own buffer (service/direct_parse.h).
  absl::Status MightContainInto(absl::string_view name, absl::Span<const absl::string_view> items,
                                bool* present);
  absl::StatusOr<FilterInfo> Stats(absl::string_view name);
  // CUCKOO filters only (filter_store_cuckoo.cc; FAILED_PRECONDITION for a BLOOM filter).
  // RemoveItems takes one copy of each item out; result[i] whether there was one. Durable and
  // atomic as Add (`defer_sync` too). Count: the copies held of each item.
  absl::StatusOr<std::vector<bool>> RemoveItems(absl::string_view name,
                                                absl::Span<const absl::string_view> items,
                                                bool defer_sync = false);
  absl::StatusOr<std::vector<uint32_t>> Count(absl::string_view name,
                                              absl::Span<const absl::string_view> items);
  // A batch of adds and checks whose adds share one RocksDB write (operation_batch.h).
  // FAILED_PRECONDITION after Close. `defer_sync`: as for Add (one WhenDurable() for the batch).
  absl::StatusOr<std::unique_ptr<OperationBatch>> StartBatch(bool defer_sync = false);
  // Serves the add-carrying batches of concurrent callers together, with defer_sync
  // (group_commit.h). Its jobs answer FAILED_PRECONDITION after Close.
  GroupCommitter& committer() { return committer_; }
  // Deletes `name`; it can be reserved again at once. NOT_FOUND if missing.
  absl::Status Delete(absl::string_view name, bool defer_ack = false);

  struct ListPage {
    std::vector<FilterInfo> filters;
    std::string next_page_token;  // empty on the last page
  };
  // Filters whose name starts with `prefix`, in name order, after `page_token` (the previous
  // page's next_page_token; empty for the first page). Unreadable filters are skipped.
  absl::StatusOr<ListPage> List(absl::string_view prefix, size_t page_size,
                                absl::string_view page_token);
  struct ListQuery {
    absl::string_view prefix;
    size_t page_size = 0;  // 0: the default (100)
    absl::string_view page_token;
    // Only names it accepts (null: every name): asked before a filter is looked up, so the
    // names it refuses cost the scan alone. A page holds page_size accepted filters.
    std::function<bool(absl::string_view name)> accept;
    // Only each FilterInfo's name is set: no statistics computed.
    bool names_only = false;
  };
  absl::StatusOr<ListPage> List(const ListQuery& query);

  // Streams the dump of `name` (dump.h) to `sink` in chunks of at most 1 MiB.
  absl::Status Export(absl::string_view name,
                      const std::function<absl::Status(absl::string_view)>& sink);
  // The dump of `name` as a cursor, for a stream that pulls chunks as its client reads them.
  // NOT_FOUND / DATA_LOSS as Stats; RESOURCE_EXHAUSTED when the memory budget cannot hold its
  // buffers (ExportCursor::kChargedBytes).
  absl::StatusOr<std::unique_ptr<ExportCursor>> OpenExport(absl::string_view name);
  // Starts importing a dump as the new filter `name`: INVALID_ARGUMENT for a bad name,
  // ALREADY_EXISTS if it is taken (unless `merge_into_existing`).
  absl::StatusOr<std::unique_ptr<PendingImport>> BeginImport(absl::string_view name,
                                                             bool merge_into_existing = false);
  // Creates the filter once the whole dump arrived: an identical filter (spec, seed, bits,
  // counters) under the new name. Nothing is created on error (ALREADY_EXISTS if the name was
  // taken meanwhile, or the dump's error). With merge_into_existing, an existing filter of that
  // name gets the dump ORed into it instead (StoredFilter::Merge, with its refusals).
  absl::StatusOr<FilterInfo> CommitImport(PendingImport& import, bool defer_ack = false);

  // Checkpoints every filter with changes now.
  absl::Status CheckpointAll();
  // One pass of the background checkpointer (storage/checkpoint/checkpointer.h), at real time
  // `now`: reopens RocksDB after a write error, deletes filters idle past their idle_ttl (by the
  // store's clock), checkpoints the filters whose checkpoint is due at `now`. Tests open the
  // store without background_checkpoints and call it at the moments they choose. False once
  // the store is closing.
  bool RunCheckpointPass(absl::Time now);

  // O(filters); for a metrics scrape, not for hot paths.
  StoreFigures Figures() const override;
  // What the checkpointer's next pass visits at least (storage/checkpoint/checkpoint_schedule.h).
  CheckpointSchedule::Sizes CheckpointScheduleSizes() const { return schedule_.sizes(); }

  // Evicts least recently used filters until the memory in use is under the limit's low
  // watermark (a no-op without a limit or under it). The evictor thread calls it whenever a
  // charge goes over the limit; tests call it to evict at a known moment. Returns after any
  // round in progress on another thread has finished.
  void EvictToBudget();

  // Replication (filter_store_replica.cc; replicated_store.h says what each does).
  uint64_t LatestSequence() const final;
  absl::Status ApplyReplicated(absl::Span<const LogBatch> batches, bool sync) final;
  uint64_t VisibleSequence() const final {
    return options_.replica ? replica_visible_.load(std::memory_order_acquire) : LatestSequence();
  }
  bool is_replica() const final { return options_.replica; }
  std::vector<std::string> TakeIdleTouches() final { return idle_touches_.Take(); }
  void TouchIdle(absl::Span<const std::string> names) final;
  ReplicaAcks* replica_acks() const final { return acks_.get(); }
  Database& database() final { return *db_; }

  const LoadReport& load_report() const { return load_report_; }
  size_t num_filters() const { return registry_.size(); }
  // Whether `name` is in memory now: no lookup on disk, and it does not count as a use.
  bool IsResident(absl::string_view name) const { return registry_.Find(name) != nullptr; }
  uint64_t memory_used() const { return budget_.used(); }

 private:
  FilterStore(const StoreOptions& options, std::unique_ptr<Database> db);

  absl::Status Load();  // filter_store_recovery.cc
  // Load() with options_.lazy_start, once the ceiling is known.
  absl::Status LoadLazily(uint64_t ceiling);
  // A fresh filter generation (below the persisted ceiling, raised first if needed).
  absl::StatusOr<uint64_t> AllocateGeneration();
  // Persists (synced) a ceiling above `generation` by kGenerationBlock.
  absl::Status RaiseCeiling(uint64_t generation);
  void RaiseCeilingAtStart(uint64_t next_generation);
  absl::Status DeleteOrphans(uint64_t orphans, const absl::btree_set<uint64_t>& generations);
  // The resident filter `name`, or null; no lookup on disk. See Acquire.
  std::shared_ptr<StoredFilter> Find(absl::string_view name) const { return registry_.Find(name); }
  // The filter `name`, loaded from RocksDB if it is cold; null if it does not exist. If the
  // name's lock is busy, `before_waiting` runs first (as in FindOrCreate).
  absl::StatusOr<std::shared_ptr<StoredFilter>> Acquire(
      absl::string_view name, absl::FunctionRef<void()> before_waiting = [] {});
  // As Acquire for an add with create_if_missing: a missing filter is created (`created`),
  // with its record written by its first write (FindOrCreate's defer_write). A name missing
  // from memory takes the name's lock once, for the lookup on disk and the creation together
  // (Acquire then FindOrCreate would take it twice and look a new name up in RocksDB twice).
  absl::StatusOr<std::shared_ptr<StoredFilter>> AcquireOrCreate(
      absl::string_view name, const bloom::FilterParams& spec, bool& created,
      absl::FunctionRef<void()> before_waiting);
  // The resident filter `name` when an operation may use it without the name's lock (not
  // evicted, not past its idle_ttl), touched; otherwise null, and `resident` says whether the
  // name was in memory at all. No lookup on disk.
  std::shared_ptr<StoredFilter> FindFresh(absl::string_view name, bool& resident) const;
  // As Acquire, with the name's lock held.
  absl::StatusOr<std::shared_ptr<StoredFilter>> AcquireLocked(absl::string_view name);
  // Acquire, with NOT_FOUND for a missing filter and the filter's Usable() error.
  absl::StatusOr<std::shared_ptr<StoredFilter>> FindUsable(
      absl::string_view name, absl::FunctionRef<void()> before_waiting = [] {});

  // Residency (filter_store_residency.cc). Loads the cold filter `name` (name lock held): null if
  // RocksDB has no such filter.
  absl::StatusOr<std::shared_ptr<StoredFilter>> LoadCold(absl::string_view name);
  // Deletes the cold filter `name` from RocksDB (name lock held); NOT_FOUND if there is none.
  absl::Status DeleteCold(absl::string_view name);
  void EvictLoop();
  // Idle expiry (filter_store_idle_expiry.cc). Whether `filter` is usable and past its idle_ttl at
  // `now`.
  bool IdleExpired(const StoredFilter& filter, absl::Time now) const;
  // Deletes an expired resident filter (name lock held).
  absl::Status ExpireLocked(const std::shared_ptr<StoredFilter>& filter);
  // Deletes the cold filter `name` with `record` if it is past its idle_ttl (name lock held);
  // true if it did.
  absl::StatusOr<bool> ExpireColdIfIdle(absl::string_view name, const FilterRecord& record);
  // The checkpointer's sweeps: one resident filter, and the next records of cold ones.
  void SweepIdleResident(const std::shared_ptr<StoredFilter>& filter);
  void SweepIdleCold();
  // ResidencyState::may_have_cold.
  bool MayHaveCold() const { return residency_.may_have_cold.load(std::memory_order_acquire); }
  // Called by a thread that just charged the budget, holding no filter's apply lock: waits
  // (bounded) while memory in use is far over the limit, so loads cannot outrun the evictor.
  void WaitForRoom();
  friend class OperationBatch;
  // How often Reserve and Add with create_if_missing look again for a filter that a racing
  // Delete removed under them before they give up with ABORTED (DeleteRaceError).
  static constexpr int kDeleteRaceRetries = 64;
  static absl::Status DeleteRaceError(absl::string_view name);

  // Creates `name` or returns the existing filter (`created` says which). Does not compare specs.
  // With `defer_write`, a new filter's record is written with its first write instead
  // (StoredFilter::DeferCreation). If the name's lock is busy, `before_waiting` runs before
  // waiting for it (an OperationBatch flushes, so it waits holding no filter's lock).
  absl::StatusOr<std::shared_ptr<StoredFilter>> FindOrCreate(
      absl::string_view name, const bloom::FilterParams& spec, bool& created, bool defer_write,
      absl::FunctionRef<void()> before_waiting = [] {},
      absl::optional<uint64_t> seed = absl::nullopt);
  absl::StatusOr<std::shared_ptr<StoredFilter>> FindOrCreateLocked(
      absl::string_view name, const bloom::FilterParams& spec, bool& created, bool defer_write,
      absl::optional<uint64_t> seed = absl::nullopt);
  // Reserve and ReserveLike up to the write, with lifecycle_mu_ held (they then wait for the
  // followers holding no lock): `seed` for a filter like another (nullopt: a random one), whose
  // name `like` is for messages.
  absl::StatusOr<ReserveResult> ReserveWith(absl::string_view name,
                                            const bloom::FilterParams& normalized,
                                            absl::optional<uint64_t> seed, absl::string_view like);
  // Merge up to the write, with lifecycle_mu_ held (Merge then waits for the followers
  // holding no lock).
  absl::StatusOr<FilterInfo> MergeLocked(absl::string_view target,
                                         absl::Span<const std::string> sources);
  // Registers a resident filter (replacing one of its name) and shows it to the schedule.
  void Insert(const std::shared_ptr<StoredFilter>& filter) {
    if (options_.replica) replica_index_.Note(filter);
    registry_.Insert(filter);
    schedule_.Watch(filter);
  }
  void Remove(absl::string_view name) {
    if (options_.replica) {
      if (std::shared_ptr<StoredFilter> filter = registry_.Find(name)) {
        replica_index_.Forget(filter);
      }
    }
    registry_.Remove(name);
  }
  // Replicas (filter_store_replica.cc): FAILED_PRECONDITION for a write call on a replica.
  absl::Status CheckWritable() const;
  // Applies what one replicated batch changes to the filters in memory (replica_mu_ held).
  void ApplyToResident(const rocksdb::WriteBatch& batch);
  // Waits for the followers' acknowledgement of every write so far (min_replica_acks), then
  // asks the fence (CheckMayAcknowledge): what a write answered on its own thread waits for.
  absl::Status WaitReplicated();
  // WhenDurable (`sync_wal`: after a group fsync of the WAL) and WhenReplicated.
  void AfterWrites(WalSyncer::Done done, bool sync_wal);
  // OK unless options.may_acknowledge says no (then UNAVAILABLE).
  absl::Status CheckMayAcknowledge() const;
  absl::StatusOr<FilterInfo> CommitImportLocked(PendingImport& import);  // filter_store_transfer.cc
  // A CUCKOO filter's copy to export, its bytes charged (pinned) as `charged`.
  absl::StatusOr<StoredFilter::CuckooSnapshot> SnapshotForExport(const StoredFilter& filter,
                                                                 uint64_t& charged);
  bloomsync::Mutex& NameLock(absl::string_view name) const { return registry_.NameLock(name); }
  // One of the checkpointer's visits (schedule_ chooses them): deletes the filter if idle past
  // its idle_ttl, else checkpoints it if due. False if the store is closing.
  bool VisitForCheckpoint(const std::shared_ptr<StoredFilter>& filter, absl::Time now);
  absl::Status CheckOpen() const ABSL_SHARED_LOCKS_REQUIRED(lifecycle_mu_);
  // Whether Close() began: a pass in progress stops early (asked once per filter of a pass).
  bool StopRequested() const { return closing_.load(std::memory_order_relaxed); }

  const StoreOptions options_;
  std::unique_ptr<Database> db_;
  MemoryBudget budget_;
  // The resident filters the checkpointer visits: changed, windowed, or due to idle out.
  CheckpointSchedule schedule_;
  IdleTouches idle_touches_;  // a replica's (filter_store_replica.cc)
  // The background checkpointer's page writes (Close() stops the pacing first).
  WritePacer pacer_{options_.checkpoint_write_bytes_per_second, options_.wait_clock};
  JournalHolds journal_holds_;  // filter_store_journal.cc's
  // The filters made while a mover watches: at most this many names between two rounds.
  static constexpr size_t kCreationLogCapacity = 100'000;
  CreationLog creations_;
  const StoreContext context_{
      db_.get(),      &budget_,      &slices_retired_,
      options_.clock, &schedule_,    options_.replica ? &idle_touches_ : nullptr,
      &pacer_,        options_.sync, &journal_holds_};
  std::atomic<uint64_t> next_generation_{1};
  std::atomic<uint64_t> generation_ceiling_{0};
  bloomsync::Mutex ceiling_mu_;  // serialises RaiseCeiling
  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> checkpoints_{0};
  std::atomic<uint64_t> checkpoint_failures_{0};
  std::atomic<uint64_t> filters_expired_{0};
  std::atomic<uint64_t> slices_retired_{0};
  std::string cold_sweep_cursor_;  // the checkpointer's only: where SweepIdleCold goes on
  LoadReport load_report_;
  FilterRegistry registry_;
  // Shared by every operation, exclusive for Close(): nothing touches RocksDB after it closed.
  mutable bloomsync::Mutex lifecycle_mu_;
  // Runs RunCheckpointPass each second; passes read closing_ (set first by Close), never it.
  std::unique_ptr<Checkpointer> checkpointer_;
  std::atomic<bool> closing_{false};
  // With options.sync: fsyncs the write-ahead log for deferred adds (WhenDurable).
  std::unique_ptr<WalSyncer> wal_syncer_;
  GroupCommitter committer_{this, options_.sync};
  // The log's latest sequence number when the last WAL sync started: a sync with nothing newer
  // to cover is skipped. Used by the syncer's thread only (or by callers after it stopped,
  // serialised by it).
  uint64_t synced_sequence_ = 0;

  // Replicas: exclusive while ApplyReplicated writes a batch and applies it to memory, shared
  // while a load reads a filter from RocksDB and makes it resident, so that every batch is in
  // a loaded filter exactly once (read with it, or replayed into it afterwards).
  mutable bloomsync::Mutex replica_mu_;
  ReplicaIndex replica_index_;  // a replica's resident filters by generation
  std::unique_ptr<ReplicaAcks> acks_;
  std::atomic<uint64_t> replica_visible_{0};  // VisibleSequence() of a replica

  // Memory as a cache (filter_store_residency.cc): its counters, the eviction queue and the
  // evictor's wake-ups.
  ResidencyState residency_;
  // Fills residency_.eviction_queue (its round_mu held) with the oldest resident filters:
  // enough to bring the memory in use from `used` to `target` about kRoundsPerScan times.
  void QueueEvictionCandidates(uint64_t used, uint64_t target)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(residency_.round_mu);
  std::thread evictor_;
};

}  // namespace storage

#endif  // STORAGE_FILTER_STORE_H_

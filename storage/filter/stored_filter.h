// One named filter: its in-memory ScalableFilter (or, for a CUCKOO filter, its CuckooFilter:
// stored_filter_cuckoo.cc) and how its changes reach RocksDB.
//
// Write path of an Add (see bloom/scalable_filter.h for the steps): reserve room, write one
// journal record (the new items' hashes and their sub-filters) in one RocksDB write, then set
// the bits. So every bit a reader can see is already in the WAL, and an acknowledged add
// survives a crash. Opening a sub-filter first persists the metadata record that lists it.
// The add that creates a small filter writes its pages instead of a journal record (see
// GroupedAdd): the same guarantee, and nothing left for a checkpoint to do.
//
// Checkpoint: under a brief exclusive lock, take the journal sequence S that every finished add
// is covered by, the item counters, and the set of dirty pages; then, with adds running again,
// write those pages and finally (one batch) the metadata with checkpoint_seq S and the counters,
// plus a range delete of the journal up to S. Pages copied after S may hold newer bits: harmless,
// since replaying a journal record onto bits that have it already changes nothing (OR is
// idempotent), while the counters are exact as of S. So the pages may also go out over seconds:
// the background checkpointer writes a large filter's pages in paced batches (write_pacer.h).
//
// Locks, always taken in this order:
//   checkpoint_mu_  serialises Checkpoint() and Delete() (a delete must not interleave with a
//                   checkpoint that is still writing pages of this generation);
//   apply_mu_       shared by every Add from its journal write to its bit update; exclusive for
//                   the checkpoint snapshot and for Delete, so neither sees a half-applied add;
//   growth_mu_      (inside ScalableFilter) serialises opening sub-filters;
//   meta_mu_        serialises writes of the metadata record and guards what the last
//                   checkpoint wrote (checkpointed_, storage/filter/checkpointed.h).
// MightContain and Info take no lock.
//
// Thread-safety: all public methods are thread-safe, except the recovery methods (marked),
// which run before the filter is shared.
//
// A CUCKOO filter (bloom/cuckoo_filter.h) is the same object with its cuckoo chain in Rare and
// no Bloom chain: the same name, generation, locks, schedule, eviction, idle expiry and Delete.
// What differs goes through its FilterKind (filter_kind.h, kind()); its writes journal the
// table values they set, so the checkpoint design above holds for it too
// (stored_filter_cuckoo.cc says why).
//
// This header is longer than the project's 300 lines on purpose: the private fields are part of
// the class's contract (one object per filter, millions of them, sized to one jemalloc size
// class by the static_assert in stored_filter.cc), so they stay here with the comments that
// say which lock guards each and why it has its width. What could leave it has: the kinds'
// differences and the add and checkpoint types (filter_kind.h), the state bits
// (change_flags.h), the store's shared context (store_context.h). The code is split by concern:
// stored_filter.cc (adds, reads, records), stored_filter_checkpoint.cc (checkpoints,
// eviction), stored_filter_merge.cc, stored_filter_cuckoo.cc.
#ifndef STORAGE_FILTER_STORED_FILTER_H_
#define STORAGE_FILTER_STORED_FILTER_H_

#include <atomic>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "bloom/cuckoo_filter.h"
#include "bloom/scalable_filter.h"
#include "common/mutex.h"
#include "common/short_string.h"
#include "storage/db/database.h"
#include "storage/filter/change_flags.h"
#include "storage/filter/checkpointed.h"
#include "storage/filter/filter_kind.h"
#include "storage/filter/store_context.h"
#include "storage/format/encoding.h"
#include "storage/format/filter_records.h"
#include "storage/memory/idle_touches.h"
#include "storage/memory/memory_budget.h"
#include "storage/memory/resident_charge.h"
#include "storage/write/write_pacer.h"

namespace storage {

class StoredFilter {
 public:
  // Builds the in-memory filter described by `record` (zeroed bits, counters from the record);
  // `clock` (which must outlive it) ages its window. With `drop_expired`, slices of a windowed
  // filter that expired meanwhile (a restart a week later) are not built at all: their pages
  // and journal runs are skipped on load and the first checkpoint range-deletes them.
  static absl::StatusOr<std::unique_ptr<bloom::ScalableFilter>> BuildFilter(
      const FilterRecord& record, const bloomtime::Clock* clock = bloomtime::Clock::Real(),
      bool drop_expired = false);

  // A readable filter; `charged_bytes` of the context's budget are released when it is
  // destroyed. `context` must outlive it.
  StoredFilter(absl::string_view name, const FilterRecord& record,
               std::unique_ptr<bloom::ScalableFilter> filter, const StoreContext* context,
               uint64_t charged_bytes);
  // An unusable one: every operation but Delete answers `error` (DATA_LOSS when unreadable,
  // RESOURCE_EXHAUSTED when it did not fit the memory limit at start-up). With its `generation`
  // known, Delete also deletes its pages and journal; without, they stay as orphans.
  StoredFilter(absl::string_view name, absl::Status error, const StoreContext* context,
               absl::optional<uint64_t> generation = absl::nullopt);
  ~StoredFilter();

  StoredFilter(const StoredFilter&) = delete;
  StoredFilter& operator=(const StoredFilter&) = delete;

  absl::string_view name() const { return name_.view(); }
  uint64_t generation() const { return generation_; }
  // Null for an unreadable filter.
  const bloom::ScalableFilter* filter() const { return chain(); }
  // The filter's spec, its idle_ttl included (which this object keeps, not filter()); that of
  // filter(), which must not be null.
  bloom::FilterParams spec() const;
  // OK, or why this filter cannot be used (NOT_FOUND once deleted, DATA_LOSS if unreadable).
  absl::Status Usable() const;
  // Usable().ok() without building a status: for passes over every resident filter.
  bool usable() const {
    return !flags_.Has(kDeleted, std::memory_order_acquire) &&
           (rare_ == nullptr || rare_->load_error.ok());
  }

  // present[i] (hashes.size() elements, any initial value) = might contain hashes[i].
  absl::Status MightContain(absl::Span<const uint64_t> hashes, bool* present);
  // O(bits): counts set bits.
  absl::StatusOr<FilterInfo> Info() const;
  // The metadata record with live counters (for Export).
  absl::StatusOr<FilterRecord> SnapshotRecord() const;
  // Export walks the chain over many calls: while pinned, checkpoints retire no slice of a
  // windowed filter. PinChain answers the record to export (SnapshotRecord) and pins on OK.
  // FAILED_PRECONDITION for a CUCKOO filter (Merge refuses it; Export copies it instead:
  // SnapshotCuckoo).
  absl::StatusOr<FilterRecord> PinChain();
  void UnpinChain() { chain_pins_.fetch_sub(1); }

  // The journal sequence every add so far is at or before, once each of them has set its bits
  // (it waits for adds between their journal write and their bits: apply_mu_, exclusively).
  // A copy of the bits read after this holds every add up to it.
  uint64_t AppliedJournalSeq();
  // The last journal sequence an add has taken, without waiting (its record may not be written
  // yet): nothing after it exists or is being written.
  uint64_t last_journal_seq() const { return next_seq_.load() - 1; }

  // Persists dirty pages and counters and trims the journal; retires the expired slices of a
  // windowed filter (one write: the record without them and a range delete of their pages)
  // and frees them. A no-op when nothing changed. `paced`: the pages go out in batches at the
  // store's WritePacer rate (the background checkpointer's; eviction and Close go at once).
  absl::Status Checkpoint(bool sync, bool paced = false);
  // Whether the checkpointer should call Checkpoint() now: a windowed filter has expired
  // slices, or there are unpersisted changes and either `interval` passed since the last
  // checkpoint or the journal grew as large as the bits.
  bool CheckpointDue(absl::Time now, absl::Duration interval) const;
  // Whether the journal has grown as large as the bits (and at least 1 MiB): a checkpoint is
  // due now, whatever the interval says, so that a restart does not replay more than the
  // filter itself. The first add that makes it so tells the schedule (Overdue).
  bool JournalOverdue() const;
  // Journal bytes written since the last checkpoint (what a restart would replay).
  uint64_t journal_bytes() const { return journal_bytes_.load(std::memory_order_relaxed); }
  // What the journal counter holds at most; larger amounts stay there (the count only decides
  // when a checkpoint is overdue).
  static constexpr uint64_t kMaxCountedJournalBytes = std::numeric_limits<uint32_t>::max();
  // A journal smaller than this is never overdue (JournalOverdue), however small the bits.
  static constexpr uint64_t kMinJournalBytesForEarlyCheckpoint = 1 << 20;
  // Whether a checkpoint has anything to write: adds journalled or checks counted since the
  // last one (a windowed filter's expired slices aside).
  bool HasUnpersistedChanges() const {
    return journal_bytes_.load() > 0 || flags_.Has(kChecksChanged);
  }
  // The checkpointer's schedule (storage/checkpoint/checkpoint_schedule.h). MarkChanged: this
  // filter has changes; the first call since it was last unscheduled tells the context's schedule
  // (every change calls it, after making the change visible; later calls are a load). Unschedule: a
  // pass found nothing to checkpoint and drops the filter; false if it may (nothing changed
  // meanwhile, or a change scheduled it anew), true if a change raced in and the pass must
  // keep it. The flag is cleared before the changes are read again, and a change is made
  // before the flag is read (all seq_cst), so no change is left unscheduled.
  void MarkChanged() {
    if (flags_.Has(kScheduled)) return;
    if (flags_.Set(kScheduled)) return;
    if (context_->schedule != nullptr) NotifySchedule();
  }
  bool Unschedule() {
    flags_.Clear(kScheduled);
    if (!HasUnpersistedChanges()) return false;
    return !flags_.Set(kScheduled);
  }
  // To the second (the checkpointer looks once a second).
  absl::Time last_checkpoint() const {
    return SecondsEpoch() + absl::Seconds(last_checkpoint_second_.load(std::memory_order_relaxed));
  }
  // Eviction (storage/filter_store_residency.cc): checkpoints everything and retires this object,
  // so the filter can be freed and loaded again from RocksDB. Afterwards adds answer EvictedError()
  // (the caller looks the filter up again, which loads it); checks and Info still answer from the
  // bits, which hold every add made before. FAILED_PRECONDITION without effect when the filter is
  // busy (an add holds its apply lock, or its creation is not written yet) or unusable, or the
  // checkpoint's error. Call with the name's lock held.
  absl::Status Evict(bool sync);
  bool evicted() const { return flags_.Has(kEvicted, std::memory_order_acquire); }
  // Recency for the evictor, in 32-bit ticks of 2^20 ns, about a millisecond (cheap on every
  // operation: the vDSO clock, and a store only when the tick changed). They wrap after 52
  // days: compare them as ages from one NowTicks(), TicksSince; a filter unused for longer
  // only looks younger than it is to the evictor.
  void Touch() {
    const uint32_t now = NowTicks();
    if (last_used_ticks_.load(std::memory_order_relaxed) != now) {
      last_used_ticks_.store(now, std::memory_order_relaxed);
    }
  }
  uint32_t last_used_ticks() const { return last_used_ticks_.load(std::memory_order_relaxed); }
  static uint32_t NowTicks() { return static_cast<uint32_t>(absl::GetCurrentTimeNanos() >> 20); }
  static uint32_t TicksSince(uint32_t tick, uint32_t now) { return now - tick; }
  // Idle expiry (filter_store_idle_expiry.cc), for filters with an idle_ttl: the last use by the
  // store's clock, kept to the second (a store only when the second changed) and persisted by
  // checkpoints, so reads do not become writes.
  void TouchIdle(absl::Time now) {
    const int64_t micros = absl::ToUnixMicros(now);
    if (micros - rare_->last_used_micros.load(std::memory_order_relaxed) >= 1'000'000) {
      rare_->last_used_micros.store(micros, std::memory_order_relaxed);
      // A replica's use counts on the primary, whose clock decides expiry.
      if (context_->idle_touches != nullptr) context_->idle_touches->Note(name());
    }
  }
  // Both kept in this object: the checkpointer's schedule asks each filter that becomes
  // resident, and the eviction scans' tests stay within this object.
  bool has_idle_ttl() const { return rare_ != nullptr && rare_->idle_ttl_micros != 0; }
  // An unreadable filter's empty chain has no window.
  bool windowed() const { return chain_.windowed(); }
  // Made by an add (create_if_missing) whose write, which creates it, is not done yet: that
  // first write stores pages, not a journal record.
  bool creation_pending() const { return flags_.Has(kCreationPending); }
  // Nullopt without an idle_ttl (or for an unusable filter).
  absl::optional<absl::Time> IdleExpiresAt() const;
  // What an add on an evicted object answers (see IsEvicted).
  absl::Status EvictedError() const;
  static bool IsEvicted(const absl::Status& status);

  // Deletes the filter's metadata, bits and journal (range deletes: O(1) here, space comes back
  // with compaction). Afterwards every operation answers NOT_FOUND.
  absl::Status Delete(bool sync);

  // Merge (stored_filter_merge.cc): ORs each source's bits into this filter, sub-filter by
  // sub-filter, first growing the chain to the longest source's, and persists the result as a
  // checkpoint written in one batch: on disk, all of the union or none of it (up to 64 MiB of
  // changed pages; larger unions are written in bounded batches). A source must
  // have this filter's seed and, wherever both have a sub-filter, its layout; otherwise
  // FAILED_PRECONDITION naming the source and the mismatch. Windowed filters are refused.
  // Each sub-filter's items_added grows by the sources' (an upper bound: an item in several
  // filters counts once in each). Adds wait while the bits are ORed; checks may see part of the
  // union until Merge returns. Sources are read without their locks, so adds racing the merge
  // may or may not be in it. Errors: Addable()'s (an evicted object: look the filter up again),
  // growth's (the memory limit), the write's; FAILED_PRECONDITION for a CUCKOO filter.
  struct MergeSource {
    absl::string_view name;
    const bloom::ScalableFilter* filter;
  };
  absl::Status Merge(absl::Span<const MergeSource> sources, bool sync);

  // Creation without a write of its own (Add with create_if_missing): until its creation record
  // is persisted, every write of this filter (its first journal record, a new sub-filter, a
  // checkpoint, EnsurePersisted) carries that record in the same batch. So creating a filter on its
  // first add costs one RocksDB write, not two, and a crash before that write leaves nothing
  // behind. Call before the filter is shared.
  void DeferCreation();
  // Writes the creation record if it is still pending (no-op otherwise): before a Reserve
  // answers, or when an add wrote no journal record.
  absl::Status EnsurePersisted(bool sync);

  // Adds, persisted by RocksDB writes that may carry the adds of other filters too (group
  // commit, storage/write/operation_batch.h). Per filter and add:
  //   1. LockForGroup() (or TryLockForGroup(), which does not wait): apply_mu_ shared, held
  //      until the add's bits are set, so no checkpoint or Delete sees it half done; or, by
  //      the add that just created the filter, TryLockForCreation(): apply_mu_ exclusive;
  //   2. Add(): reserves room and puts the journal record (and a pending creation
  //      record) into `batch`; on error nothing was put and nothing is reserved;
  //   3. if grouped.needs_write: the caller writes `batch`, then FinishGroupAdd() sets the
  //      bits (or gives the room back if the write failed);
  //   4. UnlockForGroup(grouped.exclusive).
  // The creating add, holding the filter alone, writes the creation record as a checkpoint
  // that already holds its items, and their pages, instead of a journal record: the filter is
  // then clean, and evicting it writes nothing (one memtable entry per new per-user filter
  // instead of four: record, journal, then at eviction page, record and trimmed journal).
  // Errors: see ScalableFilter::Add (a full non-scaling filter, a chain that cannot grow); a
  // failed write fails every add it carried, and none of them was added.
  void LockForGroup() ABSL_NO_THREAD_SAFETY_ANALYSIS { apply_mu_.ReaderLock(); }
  bool TryLockForGroup() ABSL_NO_THREAD_SAFETY_ANALYSIS { return apply_mu_.ReaderTryLock(); }
  bool TryLockForCreation() ABSL_NO_THREAD_SAFETY_ANALYSIS { return apply_mu_.TryLock(); }
  void UnlockForGroup(bool exclusive) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (exclusive) {
      apply_mu_.Unlock();
    } else {
      apply_mu_.ReaderUnlock();
    }
  }
  // Step 2 for either kind (FilterKind::Add): a CUCKOO filter's add is a write of its own, made
  // under its chain's lock (CuckooAdd), so it never sets grouped.needs_write.
  absl::Status Add(absl::Span<const uint64_t> hashes, bool* added, bool sync,
                   rocksdb::WriteBatch& batch, GroupedAdd& grouped) {
    return kind().Add(*this, hashes, added, sync, batch, grouped);
  }
  void FinishGroupAdd(const GroupedAdd& grouped, bool written);

  // What the filter's kind (filter_kind.h) is: every difference between the kinds goes through
  // it. An unreadable filter's is BLOOM's, over an empty chain.
  const FilterKind& kind() const {
    return FilterKind::Of(cuckoo() != nullptr ? bloom::FilterKind::kCuckoo
                                              : bloom::FilterKind::kBloom);
  }
  // Either kind, from its record: what FilterKind::Build made of it, and the StoredFilter
  // holding that.
  using Built = BuiltFilter;
  static absl::StatusOr<Built> Build(const FilterRecord& record,
                                     const bloomtime::Clock* clock = bloomtime::Clock::Real(),
                                     bool drop_expired = false) {
    return FilterKind::Of(record.spec).Build(record, clock, drop_expired);
  }
  static std::shared_ptr<StoredFilter> Make(absl::string_view name, const FilterRecord& record,
                                            Built built, const StoreContext* context,
                                            uint64_t charged_bytes);
  // Loading: one stored page of sub-filter (or cuckoo table) `sub`; `scratch` is reused.
  // Pages of slices a windowed filter retired are skipped; DATA_LOSS for one that fits nothing.
  absl::Status LoadStoredPage(uint32_t sub, uint32_t page, absl::string_view value,
                              std::string& scratch) {
    return kind().LoadPage(*this, sub, page, value, scratch);
  }

  // CUCKOO filters (stored_filter_cuckoo.cc). A stored cuckoo filter: `cuckoo` holds the
  // record's tables, empty (FilterKind::Build), for the caller to load.
  StoredFilter(absl::string_view name, const FilterRecord& record,
               std::unique_ptr<bloom::CuckooFilter> cuckoo, const StoreContext* context,
               uint64_t charged_bytes);
  // The filter's seed (either kind; not for an unreadable filter).
  uint64_t seed() const { return has_chain_ ? chain_.seed() : rare_->cuckoo->seed(); }
  // OK for a CUCKOO filter; FAILED_PRECONDITION naming `call` (Remove, Count) otherwise.
  absl::Status RequireCuckoo(absl::string_view call) const;
  // Null for a Bloom filter (and an unreadable one).
  bloom::CuckooFilter* cuckoo() const { return rare_ != nullptr ? rare_->cuckoo.get() : nullptr; }
  // The filter's seeded hash of `item`, which its calls take (either kind; not for an
  // unreadable filter).
  uint64_t Hash(absl::string_view item) const {
    return has_chain_ ? chain_.Hash(item) : rare_->cuckoo->Hash(item);
  }
  // One copy of each item (added[i] set true for all: a cuckoo filter counts copies), durable
  // as an add is: journalled in its own RocksDB write. The caller holds the apply lock
  // (LockForGroup, or TryLockForCreation for the add that created the filter). Errors: as
  // PrepareGroupAdd's; RESOURCE_EXHAUSTED when the batch does not fit (nothing added).
  absl::Status CuckooAdd(absl::Span<const uint64_t> hashes, bool* added, bool sync);
  // Removes one copy of each item; result[i] whether there was one. Durable like an add.
  absl::StatusOr<std::vector<bool>> CuckooRemove(absl::Span<const uint64_t> hashes, bool sync);
  // A slot move's catch-up of this copy from the journal records of the filter it was copied
  // from (a CUCKOO filter's, or a windowed BLOOM filter's: FilterKind::CatchUp), journalled
  // here as this filter's own change, durable like an add. Answers the changes written.
  // FAILED_PRECONDITION (nothing written) for records that do not apply to it (another kind,
  // a table or slice it lacks): copy the filter whole; DATA_LOSS for one that does not decode.
  absl::StatusOr<size_t> CatchUp(absl::Span<const absl::string_view> records, bool sync);
  // Copies held of each item.
  absl::StatusOr<std::vector<uint32_t>> CuckooCount(absl::Span<const uint64_t> hashes);
  // For Export: a copy of the cuckoo chain and the record describing it (live counters),
  // consistent with each other.
  struct CuckooSnapshot {
    FilterRecord record;
    std::unique_ptr<bloom::CuckooFilter> copy;
  };
  absl::StatusOr<CuckooSnapshot> SnapshotCuckoo() const;

  // Recovery, before the filter is shared.
  bloom::ScalableFilter* mutable_filter() { return chain(); }
  // Replays one journal record of this filter (either kind; DATA_LOSS for an unreadable one).
  absl::Status ReplayJournalRecord(absl::string_view bytes) { return kind().Replay(*this, bytes); }
  // Import: the first checkpoint writes every page.
  void MarkAllPagesDirty() { kind().MarkAllPagesDirty(*this); }
  // Whether it has a body to read and replay into (false for an unreadable filter).
  bool has_body() const { return has_chain_ || cuckoo() != nullptr; }
  uint64_t checkpoint_seq() const;
  void MarkUnreadable(const absl::Status& error);
  // `next_seq` follows the last replayed journal record; `replayed_bytes` of journal are
  // pending a checkpoint.
  void FinishRecovery(uint64_t next_seq, uint64_t replayed_bytes);

 private:
  // The kinds' halves of this class (filter_kind.h).
  friend class BloomKind;
  friend class CuckooKind;

  absl::Status PrepareGroupAdd(absl::Span<const uint64_t> hashes, bool* added, bool sync,
                               rocksdb::WriteBatch& batch, GroupedAdd& grouped);
  // What only some filters have, in a 24-byte object of their own, so that the others (most
  // per-user filters) carry only the pointer: an idle_ttl and the last use it ages from
  // (TouchIdle), and why the filter cannot be used (recovery's error, or the memory limit).
  struct Rare {
    int64_t idle_ttl_micros = 0;  // NormalizeSpec's unit; 0: none
    std::atomic<int64_t> last_used_micros{0};
    absl::Status load_error;
    // A CUCKOO filter's chain, and how many of its tables a metadata record lists (a write that
    // opens one raises it first, and lowers it again if the write fails).
    std::unique_ptr<bloom::CuckooFilter> cuckoo;
    std::atomic<int> cuckoo_tables{0};
  };
  // What the records keep as the last use: the filter's own for one with an idle_ttl, else its
  // creation (as the record made at its creation says).
  int64_t LastUsedMicros() const {
    return has_idle_ttl() ? rare_->last_used_micros.load(std::memory_order_relaxed)
                          : created_at_micros_;
  }

  // The record to write now over the last checkpoint's (a new sub-filter): its journal
  // sequence and chain counts, with the live counters. meta_mu_ held.
  PersistedState PersistedNow() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(meta_mu_);
  Database* db() const { return context_->db; }
  // The metadata record's key.
  rocksdb::Slice NameSlice() const { return {name_.view().data(), name_.size()}; }
  MemoryBudget* budget() const { return context_->budget; }
  // last_checkpoint_second_ counts whole seconds from here: the first filter's creation in
  // this process (4 bytes instead of 8 of Unix microseconds; 136 years of range).
  static absl::Time SecondsEpoch();
  static uint32_t SecondsSinceEpoch(absl::Time t);

  // The metadata record with live counters; apply_mu_ held (shared) by the caller.
  absl::StatusOr<FilterRecord> LiveRecord() const;
  // Checkpoint() without EnsurePersisted, with checkpoint_mu_ held; `evicting` checkpoints an
  // evicted object (which a plain checkpoint leaves alone).
  absl::Status CheckpointLocked(bool sync, bool evicting, PageWrites pages)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_) {
    return kind().CheckpointLocked(*this, sync, evicting, pages);
  }
  // CheckpointLocked of a Bloom filter (stored_filter_checkpoint.cc).
  absl::Status BloomCheckpointLocked(bool sync, bool evicting, PageWrites pages)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_);
  // A checkpoint's snapshot, apply_mu_ held exclusively: into `next` the journal sequence it
  // covers and the check counters; into `journal_bytes` the journal it takes over; whether
  // checks changed since the last one. RestoreCounters gives them back when its write fails, so
  // that the next checkpoint tries again (both kinds: stored_filter_checkpoint.cc).
  bool SnapshotCounters(PersistedState& next, uint64_t& journal_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  void RestoreCounters(uint64_t journal_bytes, bool checks_changed);
  // OK, or why an add must not apply here (Usable(), or EvictedError()).
  absl::Status Addable() const;
  absl::Status PersistNewSubFilter(const bloom::SubFilter& sub, bool sync);
  // MarkChanged's call into the schedule, out of line (the name's copy).
  void NotifySchedule() const;
  // After the journal grew: tells the schedule the first time JournalOverdue() holds since the
  // last checkpoint (kOverdue). A report racing a checkpoint may leave the flag set until the
  // next one: the filter is then checkpointed when its interval is up, as before the report.
  void ReportIfOverdue();
  // For the creating add holding apply_mu_ exclusively: puts the creation record as a
  // checkpoint that counts the prepared add, and the pages its bits make of the empty filter,
  // into `batch`. False, with nothing put, for an add this does not fit (items beyond the
  // first sub-filter, or a first sub-filter of more than kMaxCreationCheckpointBytes).
  bool PutCreationCheckpoint(GroupedAdd& grouped, rocksdb::WriteBatch& batch) const;
  // The bits a creating add copies to compute its pages: per-user filters (capacity 1000 at
  // 1% is 1,472 bytes) and filters up to a few pages; larger ones journal their first add.
  static constexpr uint64_t kMaxCreationCheckpointBytes = 64 << 10;
  // Checkpoints write pages in batches of about this size, so a 1 GB filter does not become one
  // 1 GB RocksDB write (a cuckoo table's checkpoint batches the same way). Earlier batches
  // landing without the final one is harmless: Bloom pages only gain bits, and the journal
  // after the old checkpoint_seq is still there to replay. Paced checkpoints write smaller
  // batches: each is a step of the pace, and what a follower receives, writes and fsyncs at
  // once.
  static constexpr size_t kPageBatchBytes = 8 << 20;
  static constexpr size_t kPacedPageBatchBytes = 1 << 20;
  // The metadata record for `state`, listing the body plus `extra` (a sub-filter being opened).
  FilterRecord MakeRecord(const PersistedState& state, const bloom::SubFilter* extra) const {
    return kind().MakeRecord(*this, state, extra);
  }
  // A Bloom filter's (stored_filter.cc).
  FilterRecord MakeBloomRecord(const PersistedState& state, const bloom::SubFilter* extra) const;
  // The fields of a metadata record besides its sub-filters, for `state` (either kind).
  FilterRecord RecordBase(const PersistedState& state) const;
  // A cuckoo filter's (stored_filter_cuckoo.cc): its first `tables` tables (-1:
  // Rare::cuckoo_tables).
  FilterRecord MakeCuckooRecord(const PersistedState& state, int tables = -1) const;
  // Journals one Add's or Remove's changes (CuckooFilter::Persist), with the record listing
  // tables the add opened and a pending creation record, in one RocksDB write.
  absl::Status PersistCuckooChanges(absl::Span<const bloom::CuckooChange> changes,
                                    int tables_before, int tables_after, bool sync);
  // CheckpointLocked of a cuckoo filter.
  absl::Status CuckooCheckpointLocked(bool sync, bool evicting, PageWrites pages)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_);
  // Writes the creation record if it is pending (the caller holds the apply lock).
  absl::Status PersistPendingCreation(bool sync);
  // Journals `record` as this filter's next change, with a pending creation record, in one
  // RocksDB write (a catch-up's: FilterKind::CatchUp; the caller holds the apply lock).
  absl::Status PersistJournalRecord(const std::string& record, bool sync);
  // Adds the pending creation record, if any, to `batch`; true if it did.
  bool AddPendingCreation(rocksdb::WriteBatch& batch) const;
  // Deletes the journal records after `from_seq` up to `to_seq` (a checkpoint covers them).
  void TrimJournal(uint64_t from_seq, uint64_t to_seq, rocksdb::WriteBatch& batch) const;
  // Dirty pages per sub-filter index.
  using DirtyPages = std::vector<std::pair<int, std::vector<uint64_t>>>;
  // Writes the dirty pages as `pages` says, leaving the last batch in `batch` for the caller to
  // write (with the metadata record).
  absl::Status WritePages(const DirtyPages& dirty, bool sync, PageWrites pages,
                          rocksdb::WriteBatch& batch);

  // The chain, or null for an unreadable filter (has_chain_).
  bloom::ScalableFilter* chain() const { return has_chain_ ? &chain_ : nullptr; }
  // The budget's charge is kept in kChargeUnitBytes units (every charge is a multiple of it:
  // bits come in 64-byte blocks, and the bookkeeping charges are multiples), in 32 bits.
  uint64_t charged_bytes() const { return charged_units_.load() * kChargeUnitBytes; }
  // Adds to the journal counter, saturating at kMaxCountedJournalBytes; returns the new count.
  uint64_t CountJournalBytes(uint64_t bytes);

  // Ordered so that the small fields share 8-byte words: with its shared_ptr's count the
  // object fits jemalloc's 160-byte size class (the static_assert in stored_filter.cc), for
  // millions of small filters. Counters are 32 bits where that suffices, flags are bits of
  // flags_, and what only some filters have lives in Rare.
  const ShortString name_;  // 24 bytes, up to 23 inline (std::string: 32, 15 inline)
  const uint64_t generation_;
  const int64_t created_at_micros_;
  const StoreContext* const context_;
  std::atomic<uint64_t> next_seq_{1};
  std::atomic<uint64_t> checks_{0};
  std::atomic<uint64_t> check_hits_{0};
  // Null for most filters; set at construction or, by MarkUnreadable, before it is shared.
  std::unique_ptr<Rare> rare_;
  // 24 bytes, inside this object. Mutable: a const call (MightContain) counts through it.
  mutable bloom::ScalableFilter chain_;
  std::atomic<uint32_t> charged_units_;  // charged_bytes() / kChargeUnitBytes
  std::atomic<uint32_t> last_used_ticks_{NowTicks()};
  std::atomic<uint32_t> journal_bytes_{0};        // journalled since the last checkpoint
  std::atomic<uint32_t> last_checkpoint_second_;  // SecondsSinceEpoch

  bloomsync::Mutex checkpoint_mu_ ABSL_ACQUIRED_BEFORE(apply_mu_);
  mutable bloomsync::Mutex apply_mu_ ABSL_ACQUIRED_BEFORE(meta_mu_);
  mutable bloomsync::Mutex meta_mu_;
  // Its state bits (change_flags.h), one byte; `using` keeps their names short here.
  using Bit = ChangeFlags::Bit;
  static constexpr Bit kChecksChanged = ChangeFlags::kChecksChanged;
  static constexpr Bit kScheduled = ChangeFlags::kScheduled;
  static constexpr Bit kOverdue = ChangeFlags::kOverdue;
  static constexpr Bit kDeleted = ChangeFlags::kDeleted;
  static constexpr Bit kEvicted = ChangeFlags::kEvicted;
  static constexpr Bit kCreationPending = ChangeFlags::kCreationPending;
  static constexpr Bit kRetirePending = ChangeFlags::kRetirePending;
  ChangeFlags flags_;
  // One byte for the two, beside the flags and the pins below (the object's size).
  const bool generation_known_ : 1 = true;  // false for an unreadable metadata record
  const bool has_chain_ : 1 = false;
  // PinChain: one per Export of this filter in progress (--max_transfers bounds them, and
  // each charges its buffers to the memory budget: far below 32,767).
  std::atomic<int16_t> chain_pins_{0};
  Checkpointed checkpointed_ ABSL_GUARDED_BY(meta_mu_);
};

}  // namespace storage

#endif  // STORAGE_FILTER_STORED_FILTER_H_

// What differs between the kinds of filter, behind one interface: a BLOOM filter (a chain of
// blocked Bloom filters, bloom/scalable_filter.h) and a CUCKOO filter (a chain of cuckoo tables,
// bloom/cuckoo_filter.h). The store, the write path, the formats and StoredFilter ask a filter's
// FilterKind instead of testing which kind it is: a third kind is a third implementation of this
// class, not a new branch in each of them.
//
// One stateless instance per kind (FilterKind::Of), as a Redis module registers one table of
// type methods per data type. The methods come in two groups:
//   - its records: what a new filter's record lists, which layouts a stored record may hold,
//     what its bits take in memory, the statistics expected from a record alone, its dump
//     version. Pure functions of records, for the on-disk format and for filters not in memory;
//   - one stored filter in memory (storage/filter/stored_filter.h): building its body from its
//     record, reads, adds, loading pages and replaying the journal, records and checkpoints.
//     These act on the StoredFilter passed in, whose state they are the kind-specific half of
//     (bloom_kind.cc, cuckoo_kind.cc); they keep its locking rules.
//
//   const FilterKind& kind = FilterKind::Of(record.spec);
//   ASSIGN_OR_RETURN(BuiltFilter built, kind.Build(record, clock, /*drop_expired=*/true));
//
// Thread-safety: the instances are immutable and shared; the StoredFilter methods are as
// thread-safe as the StoredFilter calls that use them (stored_filter.h).
#ifndef STORAGE_FILTER_FILTER_KIND_H_
#define STORAGE_FILTER_FILTER_KIND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bloom/cuckoo_filter.h"
#include "bloom/filter_params.h"
#include "bloom/scalable_filter.h"
#include "common/clock.h"
#include "storage/format/encoding.h"

namespace rocksdb {
class WriteBatch;
}  // namespace rocksdb

namespace storage {

class StoredFilter;

// A filter's body in memory, as built from its record: a Bloom chain or a cuckoo chain.
struct BuiltFilter {
  std::unique_ptr<bloom::ScalableFilter> chain;
  std::unique_ptr<bloom::CuckooFilter> cuckoo;
  // Its charge in memory (ResidentCharge of what was built).
  uint64_t charge() const;
  void reset() {
    chain.reset();
    cuckoo.reset();
  }
};

// What a metadata record says besides the spec and the chain's shapes (StoredFilter's records).
struct PersistedState {
  uint64_t checkpoint_seq = 0;
  uint64_t checks = 0;
  uint64_t check_hits = 0;
  uint32_t first_index = 0;  // of the record's first sub-filter
  int64_t last_used_micros = 0;
  // Per sub-filter from first_index, as of checkpoint_seq; inline for the usual single one.
  absl::InlinedVector<uint64_t, 1> items_added;
};

// How a checkpoint writes its pages: in batches of about 8 MiB (the last with the metadata
// record), in smaller batches at the store's WritePacer rate, or all in the one batch with the
// record (a merge: on disk, all of it or none; up to 64 MiB of pages, beyond which it is written
// in batches: stored_filter_checkpoint.cc).
enum class PageWrites { kBatches, kPaced, kOneBatch };

// One add's state between StoredFilter's PrepareAdd and FinishGroupAdd (stored_filter.h).
struct GroupedAdd {
  bloom::ScalableFilter::PreparedAdd prepared;
  uint64_t journal_bytes = 0;
  bool exclusive = false;    // set by the caller: it holds TryLockForCreation()
  bool creating = false;     // the batch carries the creation record
  bool wrote_pages = false;  // ... as a checkpoint with the add's pages, no journal record
  bool needs_write = false;  // the caller writes the batch, then calls FinishGroupAdd
};

class FilterKind;
namespace filter_kind_internal {
const FilterKind& Bloom();   // bloom_kind.cc
const FilterKind& Cuckoo();  // cuckoo_kind.cc
}  // namespace filter_kind_internal

class FilterKind {
 public:
  // The instance for `kind` (or for a spec's or record's kind).
  static const FilterKind& Of(bloom::FilterKind kind) {
    return kind == bloom::FilterKind::kCuckoo ? filter_kind_internal::Cuckoo()
                                              : filter_kind_internal::Bloom();
  }
  static const FilterKind& Of(const bloom::FilterParams& spec) { return Of(spec.kind); }

  virtual ~FilterKind() = default;

  // As the API names it: "BLOOM", "CUCKOO".
  virtual absl::string_view name() const = 0;
  // Whether Merge takes it (a Bloom filter's bits OR together; cuckoo tables do not).
  virtual bool mergeable() const = 0;
  // Whether Export copies the filter first (a cuckoo add moves fingerprints, so live tables
  // read over many calls would not be one state), rather than reading its pinned live bits.
  virtual bool exports_a_copy() const = 0;

  // --- Its records ---

  // The record of sub-filter (cuckoo table) `index` of a new, empty filter of normalized
  // `spec`, created at `now` (where a windowed filter's slice starts).
  virtual absl::StatusOr<SubFilterRecord> NewSubFilterRecord(const bloom::FilterParams& spec,
                                                             int index, absl::Time now) const = 0;
  // Whether a decoded record's sub-filter has a layout this kind can build; a record holding
  // another is corrupt.
  virtual bool ValidLayout(const SubFilterRecord& sub) const = 0;
  // The bytes the record's bits take in memory (resident_charge.h's RecordBitsBytes).
  virtual uint64_t BitsBytes(const FilterRecord& record) const = 0;
  // Fill and error rate expected from the record's counts, for a filter not in memory; slices
  // of a windowed filter expired at `now` left out.
  virtual bloom::ScalableFilterStats ExpectedStats(const FilterRecord& record,
                                                   absl::Time now) const = 0;
  // The version its dumps carry (storage/format/dump.h).
  virtual uint16_t dump_version() const = 0;

  // --- One stored filter in memory ---

  // The body `record` describes, its bits zeroed for loading. With `drop_expired`, slices of a
  // windowed filter expired at `clock`'s now are not built.
  virtual absl::StatusOr<BuiltFilter> Build(const FilterRecord& record,
                                            const bloomtime::Clock* clock,
                                            bool drop_expired) const = 0;
  // present[i] = might contain hashes[i] (all false on entry).
  virtual void MightContain(const StoredFilter& filter, absl::Span<const uint64_t> hashes,
                            bool* present) const = 0;
  virtual bloom::ScalableFilterStats Stats(const StoredFilter& filter) const = 0;
  // The body's spec (without the idle_ttl, which StoredFilter keeps).
  virtual bloom::FilterParams Spec(const StoredFilter& filter) const = 0;
  // Its bits' bytes, read without locks (how large a journal may grow before a checkpoint is
  // overdue).
  virtual uint64_t BitsInMemory(const StoredFilter& filter) const = 0;
  // An add of one copy of each item, with the apply lock held as StoredFilter's add protocol
  // says. Either puts its journal record into `batch` and sets grouped.needs_write (the caller
  // writes the batch, then calls FinishGroupAdd), or makes a write of its own, synced as
  // `sync` (the batch's) says. A Bloom add writes only into the batch, apart from a new
  // sub-filter's record, which syncs as the store does (StoreContext::sync).
  virtual absl::Status Add(StoredFilter& filter, absl::Span<const uint64_t> hashes, bool* added,
                           bool sync, rocksdb::WriteBatch& batch, GroupedAdd& grouped) const = 0;
  // Loading: one stored page of sub-filter (table) `sub`; `scratch` is reused.
  virtual absl::Status LoadPage(StoredFilter& filter, uint32_t sub, uint32_t page,
                                absl::string_view value, std::string& scratch) const = 0;
  // Recovery: one journal record of the filter.
  virtual absl::Status Replay(StoredFilter& filter, absl::string_view bytes) const = 0;
  // A slot move's catch-up of a copy (StoredFilter::CatchUp, the apply lock held exclusively):
  // the journal records of the filter it was copied from, since the copy's position, written
  // in order as one change of its own, durable like an add (synced as `sync` says). Answers
  // how many changes it wrote. FAILED_PRECONDITION, with nothing written, for records it
  // cannot take (copy the filter whole).
  virtual absl::StatusOr<size_t> CatchUp(StoredFilter& filter,
                                         absl::Span<const absl::string_view> records,
                                         bool sync) const = 0;
  // Import: every page is to be written by the first checkpoint.
  virtual void MarkAllPagesDirty(StoredFilter& filter) const = 0;
  // The metadata record for `state`, listing the body (and `extra`, a Bloom sub-filter being
  // opened).
  virtual FilterRecord MakeRecord(const StoredFilter& filter, const PersistedState& state,
                                  const bloom::SubFilter* extra) const = 0;
  // StoredFilter::Checkpoint with its checkpoint lock held; `evicting` checkpoints an evicted
  // object (which a plain checkpoint leaves alone).
  virtual absl::Status CheckpointLocked(StoredFilter& filter, bool sync, bool evicting,
                                        PageWrites pages) const = 0;
};

}  // namespace storage

#endif  // STORAGE_FILTER_FILTER_KIND_H_

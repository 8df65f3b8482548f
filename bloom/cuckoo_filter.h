// CuckooFilter: a filter that can forget. A scalable chain of cuckoo tables (cuckoo_table.h),
// as ScalableFilter is a chain of Bloom filters: table i holds capacity * expansion^i items at
// error_rate * (1-r) * r^i (ChainTargetFor), so the chain's FPR stays under error_rate however
// far it grows; each step down in error rate costs one more fingerprint bit. A non-scaling
// filter is one table at the full error rate.
//
//   ASSIGN_OR_RETURN(auto filter, CuckooFilter::Create(spec, seed));
//   RETURN_IF_ERROR(filter->Add(items));          // one copy of each item
//   std::vector<bool> gone = filter->Remove({"user:42"});
//   std::vector<uint32_t> copies = filter->Count(items);
//
// Adds go to the newest table until it holds its capacity (its load is then at most
// kCuckooMaxLoad, the load its fingerprints were sized for) or an insert's relocation walk
// fails; the next table opens then. An Add batch is all or nothing: when a non-scaling filter
// is full, or the chain cannot grow (kMaxSubFilters, or fingerprints past 32 bits), every
// change it made is undone, to the byte, and it answers RESOURCE_EXHAUSTED.
//
// Persistence (the storage layer): Add and Remove record each slot they write (CuckooChange)
// and hand the list to a Persist callback before releasing the lock, so nobody sees a change
// that is not persisted; a failed persist is undone to the byte as well. Replay() writes
// recorded changes back, for loading and for followers.
//
// Count is the number of copies held of the item's fingerprint in its buckets, over every
// table: at least the number of adds not yet removed, more when another item's fingerprint
// collides. Remove takes one copy from the newest table that holds one. The hazard every cuckoo
// filter has: removing an item that was never added can remove a colliding item's copy, and
// that item then reads absent (a false negative). A grown chain adds a smaller one: an added
// item's probe in a table newer than its own can match another item's copy (a false positive
// of that table), and Remove takes that copy (measured: 2% of the error rate per removal,
// CuckooRemoveTest). In one table, removing added items is exact.
//
// Each table's item hash is the item's seeded hash (hash.h) remixed with the table's index, and
// its relocation key derives from the seed, so tables are independent and nobody who lacks the
// seed can choose colliding items.
//
// Thread-safety: thread-safe. Lookups (MightContain, Count, Stats) share a lock; Add and Remove
// take it exclusively: a relocation walk moves fingerprints between buckets, and a lookup
// between two of its steps could miss the one in transit.
#ifndef BLOOM_CUCKOO_FILTER_H_
#define BLOOM_CUCKOO_FILTER_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bloom/cuckoo_table.h"
#include "bloom/filter_params.h"
#include "bloom/filter_stats.h"
#include "common/mutex.h"

namespace bloom {

struct CuckooTableStats {
  uint64_t capacity = 0;
  double error_rate = 0;  // the table's target
  uint64_t buckets = 0;
  uint32_t fingerprint_bits = 0;
  uint64_t items = 0;  // copies held
  double load_factor = 0;
  double estimated_error_rate = 0;  // at its load now
};

struct CuckooFilterStats {
  uint64_t capacity = 0;  // sum over tables
  uint64_t size_bytes = 0;
  uint64_t items = 0;
  uint64_t buckets = 0;
  double load_factor = 0;           // copies held / slots, over every table
  double estimated_error_rate = 0;  // 1 - prod_i (1 - estimated_error_rate_i)
  std::vector<CuckooTableStats> tables;
};

// A table's figures expected from its shape and the copies it holds (for a filter not in
// memory: its metadata record's counts).
CuckooTableStats ExpectedCuckooTableStats(const ChainTarget& target, const CuckooLayout& layout,
                                          uint64_t items);
// The chain's figures over `tables` (CuckooFilter::Stats sums them so).
CuckooFilterStats CombineCuckooTableStats(std::vector<CuckooTableStats> tables);
// The figures in the form every filter's Stats take (bloom::ScalableFilterStats): per table,
// bits = fingerprint bits, items_added = copies held, fill_ratio = load, and estimated
// cardinality = copies held.
ScalableFilterStats AsFilterStats(const CuckooFilterStats& stats);

class CuckooFilter {
 public:
  // `spec` must be normalized and have no window (InvalidArgument otherwise). Creates table 0.
  static absl::StatusOr<std::unique_ptr<CuckooFilter>> Create(const FilterParams& spec,
                                                              uint64_t seed);
  // For loading a stored filter: no table yet; AppendTable() the stored ones in order.
  static absl::StatusOr<std::unique_ptr<CuckooFilter>> CreateEmpty(const FilterParams& spec,
                                                                   uint64_t seed);
  CuckooFilter(const CuckooFilter&) = delete;
  CuckooFilter& operator=(const CuckooFilter&) = delete;

  const FilterParams& spec() const { return spec_; }
  uint64_t seed() const { return seed_; }

  // Persisting a change before anybody sees it (the storage layer): Add and Remove call it
  // holding the lock exclusively, with every change they made to the tables' bytes, in order,
  // and the chain's length before and after (an add may open tables). Its error undoes the
  // changes exactly (the bytes as they were) and is the call's answer.
  using Persist = absl::FunctionRef<absl::Status(absl::Span<const CuckooChange> changes,
                                                 int tables_before, int tables_after)>;

  // Adds one copy of each item (an item twice in `items` gets two). All or nothing:
  // RESOURCE_EXHAUSTED, changing nothing, when they do not all fit.
  absl::Status Add(absl::Span<const absl::string_view> items) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Add(absl::Span<const absl::string_view> items, Persist persist)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The item hashes every call takes (Hash()): the storage layer hashes once per request.
  uint64_t Hash(absl::string_view item) const;
  absl::Status AddHashes(absl::Span<const uint64_t> hashes, Persist persist)
      ABSL_LOCKS_EXCLUDED(mu_);
  // present[i] (hashes.size() elements) = might contain hashes[i].
  void MightContainHashes(absl::Span<const uint64_t> hashes, bool* present) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<uint32_t> CountHashes(absl::Span<const uint64_t> hashes) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<bool>> RemoveHashes(absl::Span<const uint64_t> hashes, Persist persist)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<bool> MightContain(absl::Span<const absl::string_view> items) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<uint32_t> Count(absl::Span<const absl::string_view> items) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Per item, in order, whether a copy was removed.
  std::vector<bool> Remove(absl::Span<const absl::string_view> items) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<bool>> Remove(absl::Span<const absl::string_view> items,
                                           Persist persist) ABSL_LOCKS_EXCLUDED(mu_);
  // Loading and following: writes the changes' `after` values, in order (journal replay).
  // InvalidArgument, with the changes before it applied, for one naming a table the chain
  // lacks or a slot past its table.
  absl::Status Replay(absl::Span<const CuckooChange> changes) ABSL_LOCKS_EXCLUDED(mu_);
  // Catching up a copy (a slot move's target, from its owner's journal): the same writes,
  // persisted first. Every change is checked before anything is persisted or written, so a
  // change that does not fit this chain (one naming a table the owner grew since the copy)
  // changes nothing: FAILED_PRECONDITION, copy the filter whole. `persist`'s error changes
  // nothing either and is the answer.
  absl::Status ReplayPersisted(absl::Span<const CuckooChange> changes, Persist persist)
      ABSL_LOCKS_EXCLUDED(mu_);

  CuckooFilterStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  int num_tables() const ABSL_LOCKS_EXCLUDED(mu_);
  // The layout and key table `index` has (or will have, for the next one). ResourceExhausted
  // past the chain's end.
  absl::StatusOr<CuckooLayout> LayoutOf(int index) const;
  uint64_t KeyOf(int index) const;
  // Loading: the next table, of LayoutOf(num_tables()) and KeyOf(num_tables()) (its pages
  // loaded by the caller). InvalidArgument for a table of another layout or key.
  absl::Status AppendTable(std::unique_ptr<CuckooTable> table) ABSL_LOCKS_EXCLUDED(mu_);
  // Persistence: calls `visit(index, table)` for each table, holding the lock shared (the
  // tables do not change during the visit; TakeDirtyPages needs the exclusive form).
  void ForEachTable(absl::FunctionRef<void(int, const CuckooTable&)> visit) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The dirty pages of each table since the last call: (table, page) pairs, ascending.
  std::vector<std::pair<int, uint64_t>> TakeDirtyPages() ABSL_LOCKS_EXCLUDED(mu_);
  // A copy of the chain as it is now (its pages dirty), e.g. for a consistent dump while adds
  // go on. ResourceExhausted when the memory cannot be had.
  absl::StatusOr<std::unique_ptr<CuckooFilter>> Clone() const ABSL_LOCKS_EXCLUDED(mu_);
  // Every page of every table dirty (an imported filter's first checkpoint writes them all).
  void MarkAllPagesDirty() ABSL_LOCKS_EXCLUDED(mu_);
  // Pages of table `index` (0 past the chain).
  uint64_t NumPages(int index) const ABSL_LOCKS_EXCLUDED(mu_);
  // A page taken by TakeDirtyPages that could not be written: dirty again.
  void MarkPageDirty(int table, uint64_t page) ABSL_LOCKS_EXCLUDED(mu_);
  // Loading: replaces a page of table `table` (CuckooTable::LoadPage's errors; InvalidArgument
  // past the chain).
  absl::Status LoadPage(int table, uint64_t page, absl::string_view data) ABSL_LOCKS_EXCLUDED(mu_);
  // A copy of one page of table `table` (empty past the chain or the table).
  std::string ReadPage(int table, uint64_t page) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  CuckooFilter(const FilterParams& spec, uint64_t seed) : spec_(spec), seed_(seed) {}

  // What table `index` must hold, and its layout.
  struct TableShape {
    ChainTarget target;
    CuckooLayout layout;
  };
  absl::StatusOr<TableShape> ShapeOf(int index) const;
  // The item hash table `index` uses, from the item's seeded hash.
  static uint64_t TableHash(uint64_t item_hash, int index);
  // TableHash of each of `item_hashes`: the hashes themselves for table 0, else written into
  // `remixed`.
  static const uint64_t* TableHashes(absl::Span<const uint64_t> item_hashes, int index,
                                     std::vector<uint64_t>& remixed);
  // Opens the next table (ResourceExhausted when the chain cannot grow).
  absl::Status GrowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the newest table takes the item (its capacity not reached, its walk succeeded).
  bool InsertLocked(uint64_t item_hash) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts (or, with null, stops) recording every table's changes into `changes`.
  void RecordLocked(CuckooChangeLog* changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts the bytes back as they were before `changes` and drops tables past `tables_before`.
  void UndoLocked(absl::Span<const CuckooChange> changes, size_t tables_before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FilterParams spec_;
  const uint64_t seed_;
  mutable bloomsync::Mutex mu_;
  std::vector<std::unique_ptr<CuckooTable>> tables_ ABSL_GUARDED_BY(mu_);
  std::vector<ChainTarget> targets_ ABSL_GUARDED_BY(mu_);      // each table's capacity and rate
  CuckooChangeLog* recording_ ABSL_GUARDED_BY(mu_) = nullptr;  // RecordLocked
};

}  // namespace bloom

#endif  // BLOOM_CUCKOO_FILTER_H_

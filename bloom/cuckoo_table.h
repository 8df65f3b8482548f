// CuckooTable: one cuckoo filter (Fan, Andersen, Kaminsky, Mitzenmacher, "Cuckoo Filter:
// Practically Better Than Bloom", CoNEXT 2014): buckets of kCuckooBucketSlots fingerprints, an
// item's fingerprint in one of its two buckets. Unlike a Bloom filter it can forget an item
// (Remove) and count its copies (Count). The link of a scalable cuckoo chain (cuckoo_filter.h).
//
// Sizing. A lookup compares the item's fingerprint with the 2 * 4 slots of its two buckets, each
// holding a fingerprint with probability `load`, and fingerprints are uniform over
// [1, 2^f - 1] (0 marks an empty slot), so
//   FPR = 1 - (1 - 1 / (2^f - 1))^(8 * load)  <=  8 * load / (2^f - 1).
// ChooseCuckooLayout takes the fewest fingerprint bits f whose FPR at kCuckooMaxLoad meets the
// error rate, and the fewest buckets that hold `capacity` at that load. At 1% that is 10 bits
// per fingerprint, 10.5 bits per item; at 0.1%, 13 and 13.7; at 3%, 8 and 8.4 (our blocked
// Bloom filter needs 9.9, 15.5 and 7.4: cuckoo_benchmark's BM_BitsPerItem prints both). Below
// about 0.5% the cuckoo filter is the smaller.
//
// Hashing. Everything derives from the item's seeded 64-bit hash (hash.h) and the table's key
// (drawn from the filter's seed): bucket1 = fastrange(hash, n), the fingerprint from the hash
// remixed, and bucket2 = (T(fp) - bucket1) mod n with T(fp) = fastrange(mix(fp ^ key), n). The
// map bucket -> other bucket is its own inverse for any n (so the table needs no power-of-two
// size, which would waste up to half its memory), and T is keyed, so a client who knows the
// algorithm but not the seed cannot choose items whose fingerprints crowd one bucket pair.
//
// Insertion relocates fingerprints along a walk of at most kMaxKicks steps. Each step first looks
// one step ahead: a fingerprint of the full bucket whose other bucket has room moves there, and
// the walk ends (near full load most walks end so, after a few cache misses instead of many
// kicks); otherwise it kicks a slot. The walk's choices come from the table's contents, the
// item's hash and the step, not from a random generator: the same inserts in the
// same order give the same bytes, so a follower that replays a primary's log holds the
// primary's table exactly. A walk that finds no free slot is undone, and the item goes to the
// stash (below) if it has room; otherwise Insert fails and changes nothing.
//
// Memory: the fingerprints are bit-packed, bucket after bucket, and addressed as pages of
// kPageBytes, the unit the storage layer persists (as BlockedBloomFilter's bits).
//
// Thread-safety: none. The owner serialises writers against readers (CuckooFilter's lock).
#ifndef BLOOM_CUCKOO_TABLE_H_
#define BLOOM_CUCKOO_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bloom {

inline constexpr int kCuckooBucketSlots = 4;
// The load a table is sized for: the paper finds buckets of 4 reach 95% before an insert fails.
inline constexpr double kCuckooMaxLoad = 0.95;
inline constexpr uint32_t kMinFingerprintBits = 4;
inline constexpr uint32_t kMaxFingerprintBits = 32;
// The longest relocation walk before an insert gives up (the paper's choice).
inline constexpr int kMaxKicks = 500;
// Bucket indexes are 64-bit, but a table's bytes must be allocatable: 2^36 buckets of 4 32-bit
// fingerprints are 1 TiB.
inline constexpr uint64_t kMaxCuckooBuckets = uint64_t{1} << 36;
// The stash: fingerprints whose walk found no free slot, each with its bucket pair (Kirsch,
// Mitzenmacher, Wieder, "More robust hashing: cuckoo hashing with a stash"). Small tables near
// their capacity have a few over-full bucket pairs that no walk can relieve; a handful of stash
// entries takes those items instead of failing. An entry is 12 bytes: the pair's lower bucket
// and the fingerprint (0: empty).
inline constexpr int kStashEntries = 4;
inline constexpr uint64_t kStashEntryBytes = 12;

// One change to a table's bytes: a slot's fingerprint, or a stash entry (with the lower bucket
// of its pair). The storage layer journals the values written (`after`), which are absolute:
// replaying a table's changes in their order onto a copy of its pages taken at any moment
// since the first of them gives the same bytes (a slot ends as its last change left it).
// `before` is for undoing a change that could not be persisted. 32 bytes: an add records one
// or more for each item.
struct CuckooChange {
  uint32_t table = 0;  // the table's index in its chain (set by CuckooFilter)
  uint32_t before = 0;
  uint32_t after = 0;
  bool stash = false;     // a stash entry, not a slot
  uint64_t position = 0;  // slot index (bucket * kCuckooBucketSlots + slot), or slots() + entry
  // Stash entries only: the entry's bucket, that of whichever of `before` and `after` is a
  // fingerprint (a table fills an empty entry and empties a full one, never both at once).
  uint64_t stash_bucket = 0;
};

// Where a recording table (CuckooTable::RecordChanges) writes its changes, in the order made;
// the tables of one chain share one. An append is a store and a compare on the insert path
// (a std::vector's push_back is a call there: GCC keeps it out of line); the buffer grows out
// of line and keeps its size from one use to the next (Clear).
//
// Thread-safety: none (the filter's lock).
class CuckooChangeLog {
 public:
  void Clear() { size_ = 0; }
  // Room for `changes` more without growing.
  void Reserve(size_t changes) {
    if (size_ + changes > buffer_.size()) buffer_.resize(size_ + changes);
  }
  void Append(const CuckooChange& change) {
    if (size_ == buffer_.size()) [[unlikely]] {
      Grow();
    }
    buffer_[size_++] = change;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The bytes it holds whatever its size (what a thread that keeps a log keeps).
  size_t capacity_bytes() const { return buffer_.size() * sizeof(CuckooChange); }
  const CuckooChange* data() const { return buffer_.data(); }

 private:
  void Grow();

  std::vector<CuckooChange> buffer_;  // its size() is the log's capacity
  size_t size_ = 0;
};

struct CuckooLayout {
  uint64_t num_buckets = 0;       // >= 1
  uint32_t fingerprint_bits = 0;  // in [kMinFingerprintBits, kMaxFingerprintBits]

  uint64_t slots() const { return num_buckets * kCuckooBucketSlots; }
  // The bit-packed buckets, then the stash.
  uint64_t bucket_bytes() const { return (slots() * fingerprint_bits + 7) / 8; }
  uint64_t bytes() const { return bucket_bytes() + kStashEntries * kStashEntryBytes; }
  friend bool operator==(const CuckooLayout&, const CuckooLayout&) = default;
};

// The expected FPR of one lookup in a table of `fingerprint_bits` at `load` (occupied slots /
// slots).
double CuckooFalsePositiveRate(double load, uint32_t fingerprint_bits);

// The smallest layout holding `capacity` items at kCuckooMaxLoad with FPR <= `error_rate`.
// InvalidArgument for capacity 0 or an error rate outside (0, 1); ResourceExhausted when it
// needs more than kMaxFingerprintBits bits (error rates below about 2e-9) or kMaxCuckooBuckets.
absl::StatusOr<CuckooLayout> ChooseCuckooLayout(uint64_t capacity, double error_rate);

class CuckooTable {
 public:
  static constexpr uint32_t kPageBytes = 16 * 1024;

  // Where an item goes: computed once, used for every question about it.
  struct Probe {
    uint64_t hash = 0;  // the item's seeded hash (drives the relocation walk)
    uint64_t bucket1 = 0;
    uint64_t bucket2 = 0;
    uint32_t fingerprint = 0;  // never 0
  };

  // Zeroed (empty) for `layout`, keyed by `key`. ResourceExhausted when the memory cannot be
  // had; InvalidArgument for a layout outside the limits above.
  static absl::StatusOr<std::unique_ptr<CuckooTable>> Create(CuckooLayout layout, uint64_t key);
  CuckooTable(const CuckooTable&) = delete;
  CuckooTable& operator=(const CuckooTable&) = delete;

  const CuckooLayout& layout() const { return layout_; }
  uint64_t key() const { return key_; }
  // Occupied slots: the copies this table holds.
  uint64_t occupied() const { return occupied_; }
  double load() const { return static_cast<double>(occupied_) / layout_.slots(); }

  Probe ProbeFor(uint64_t hash) const;
  bool Contains(const Probe& probe) const;
  // For each i with !present[i]: present[i] = Contains(ProbeFor(hashes[i])). Loads the buckets
  // of items a few ahead while it checks one (two cache misses per item, overlapped).
  void ContainsMany(const uint64_t* hashes, size_t n, bool* present) const;
  // Copies of the probe's fingerprint in its two buckets (each counted once when they are the
  // same bucket).
  int Count(const Probe& probe) const;
  // counts[i] += Count(ProbeFor(hashes[i])) for each i, loading the buckets of items a few
  // ahead (as ContainsMany).
  void CountMany(const uint64_t* hashes, size_t n, uint32_t* counts) const;
  // Adds a copy. False, changing nothing, when no walk of kMaxKicks steps finds a free slot
  // and the stash is full.
  bool Insert(const Probe& probe);
  // Inserts the items of `hashes` (this table's hashes, as ProbeFor takes) in order while
  // occupied() < `limit`, loading each one's buckets a few items ahead: the number inserted.
  // Fewer than `n` when the limit was reached or Insert failed for hashes[returned] (which
  // changed nothing).
  size_t InsertMany(const uint64_t* hashes, size_t n, uint64_t limit);
  // Removes one copy of the probe's fingerprint; false when neither bucket holds one.
  bool Remove(const Probe& probe);
  // For each i with !removed[i]: removed[i] = Remove(ProbeFor(hashes[i])), in order, loading the
  // buckets of items a few ahead (as ContainsMany).
  void RemoveMany(const uint64_t* hashes, size_t n, bool* removed);

  // Persistence: the bytes as pages (the last one short), and the pages changed since the last
  // TakeDirtyPages (ascending).
  uint64_t num_pages() const { return (layout_.bytes() + kPageBytes - 1) / kPageBytes; }
  std::string ReadPage(uint64_t page) const;
  // Replaces a page (loading a stored table); recounts occupied(). InvalidArgument when `page`
  // is out of range or `data` is not the page's size.
  absl::Status LoadPage(uint64_t page, absl::string_view data);
  std::vector<uint64_t> TakeDirtyPages();
  void MarkPageDirty(uint64_t page);

  // Change recording: while set, every write of a slot or stash entry (Insert's walk and its
  // undo, Remove) appends a CuckooChange tagged `table_index` to `changes`; null stops it.
  void RecordChanges(CuckooChangeLog* changes, uint32_t table_index) {
    changes_ = changes;
    table_index_ = table_index;
  }
  // Writes `change.after` (or, with `undo`, `change.before`) at its position, keeping
  // occupied() exact whatever the slot held. InvalidArgument for a position past the table.
  absl::Status Apply(const CuckooChange& change, bool undo = false);
  // Whether Apply(change) would succeed: the position is in the table and the value fits.
  absl::Status CheckFits(const CuckooChange& change, bool undo = false) const;

 private:
  CuckooTable(CuckooLayout layout, uint64_t key);

  // ProbeFor, Insert, Contains and Remove as the batch loops inline them, and the prefetches
  // of a probe's buckets (`write`: for an insert or a remove).
  Probe ProbeOf(uint64_t hash) const;
  void PrefetchBuckets(const Probe& probe, bool write) const;
  void PrefetchBucket(uint64_t bucket, bool write) const;
  bool InsertProbe(const Probe& probe);
  bool ContainsProbe(const Probe& probe) const;
  bool RemoveProbe(const Probe& probe);
  // The batch loops' shared shape (cuckoo_table.cc): visits each item's probe in order, computed
  // a few items ahead with its buckets loaded meanwhile when `wanted(i)`; stops at the first i
  // whose visit returns false and answers it (n if none). `visit` may change the table (the
  // loops that do are not const; the probes depend only on the hashes).
  template <typename Wanted, typename Visit>
  size_t VisitProbes(const uint64_t* hashes, size_t n, bool write, Wanted wanted,
                     Visit visit) const;
  uint64_t AltBucket(uint64_t bucket, uint32_t fingerprint) const;
  uint32_t Slot(uint64_t bucket, int slot) const;
  void SetSlot(uint64_t bucket, int slot, uint32_t fingerprint);
  // The first empty slot of `bucket`, or -1.
  int FreeSlot(uint64_t bucket) const;
  int CountIn(uint64_t bucket, uint32_t fingerprint) const;
  // Whether `bucket` holds `fingerprint`: for fingerprints of up to kWordLaneBits bits, the
  // bucket's four slots are one 64-bit load compared at once (SWAR), else CountIn.
  bool BucketHas(uint64_t bucket, uint32_t fingerprint) const;
  static constexpr uint32_t kWordLaneBits = 14;  // 4 * 14 + 7 (the load's bit offset) <= 64
  // For fingerprints of up to kWordLaneBits bits: the bucket's four slots, lane i in bits
  // [i * bits, (i + 1) * bits).
  uint64_t BucketWord(uint64_t bucket) const;
  // The high bit of the lowest zero lane of `word` is set in the result (and perhaps higher
  // lanes' above a zero lane, by the borrow); zero when no lane is zero (SWAR: exact for "some
  // lane is zero" and for which lane is the lowest).
  uint64_t ZeroLanes(uint64_t word) const { return (word - lane_lows_) & ~word & lane_highs_; }
  uint64_t CountOccupied(uint64_t first_byte, uint64_t end_byte) const;

  struct StashEntry {
    uint64_t bucket = 0;  // the lower of the pair
    uint32_t fingerprint = 0;
  };
  StashEntry StashAt(int entry) const;
  void SetStash(int entry, StashEntry value);
  int CountInStash(const Probe& probe) const;
  // The stash entry holding the probe's fingerprint for its pair, or -1.
  int FindInStash(const Probe& probe) const;
  int CountStashed() const;

  const CuckooLayout layout_;
  const uint64_t key_;
  const uint32_t mask_;  // fingerprint_bits ones
  // BucketHas: a one in the lowest and in the highest bit of each of the four lanes.
  const uint64_t lane_lows_;
  const uint64_t lane_highs_;
  uint64_t occupied_ = 0;
  int stashed_ = 0;  // stash entries in use: lookups skip an empty stash
  // layout_.bytes() and 8 bytes of slack, so that every slot reads as one 8-byte load; zero
  // pages that cost nothing until written: from calloc, or for a table of 2 MiB or more from
  // MapBits (bloom/mapped_bits.h), in huge pages as the Bloom filters' bits are (a lookup
  // touches two random buckets: with 4 KiB pages, a 10M-item table would miss the TLB on most).
  struct FreeBytes {
    // Not a default member initializer: a nested class's is not usable before the enclosing
    // class is complete, and bytes_ below default-constructs this inside it.
    FreeBytes() : mapped_bytes(0) {}
    uint64_t mapped_bytes;  // NOLINT(modernize-use-default-member-init) 0: from calloc
    void operator()(uint8_t* bytes) const;
  };
  std::unique_ptr<uint8_t[], FreeBytes> bytes_;
  std::vector<uint64_t> dirty_;  // one bit per page
  CuckooChangeLog* changes_ = nullptr;
  uint32_t table_index_ = 0;
};

}  // namespace bloom

#endif  // BLOOM_CUCKOO_TABLE_H_

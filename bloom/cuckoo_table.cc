// CuckooTable (cuckoo_table.h): sizing, bit-packed buckets, the relocation walk and its undo.
#include "bloom/cuckoo_table.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bloom/hash.h"
#include "bloom/mapped_bits.h"

namespace bloom {
namespace {

static_assert(std::endian::native == std::endian::little,
              "pages are persisted as little-endian fingerprints");
static_assert(sizeof(CuckooChange) == 32, "an add records one or more changes per item");

// The helpers of an insert and a lookup, inlined into their loops (GCC otherwise keeps some of
// them out of line: a call each on the hottest path).
#define BLOOM_HOT_INLINE [[gnu::always_inline]] inline

// Tables this large are mapped in huge pages (FreeBytes), as blocked_filter.cc's bits are.
constexpr uint64_t kMapBytes = 2 << 20;

}  // namespace

void CuckooChangeLog::Grow() { buffer_.resize(std::max<size_t>(64, 2 * buffer_.size())); }

void CuckooTable::FreeBytes::operator()(uint8_t* bytes) const {
  if (mapped_bytes > 0) {
    UnmapBits(bytes, mapped_bytes);
  } else {
    std::free(bytes);
  }
}

double CuckooFalsePositiveRate(double load, uint32_t fingerprint_bits) {
  const double values = std::ldexp(1.0, static_cast<int>(fingerprint_bits)) - 1;
  const double compared = 2.0 * kCuckooBucketSlots * std::clamp(load, 0.0, 1.0);
  return -std::expm1(compared * std::log1p(-1.0 / values));
}

absl::StatusOr<CuckooLayout> ChooseCuckooLayout(uint64_t capacity, double error_rate) {
  if (capacity == 0) return absl::InvalidArgumentError("capacity must be at least 1");
  if (!(error_rate > 0 && error_rate < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("error_rate must be greater than 0 and less than 1, got ", error_rate));
  }
  CuckooLayout layout;
  for (uint32_t bits = kMinFingerprintBits; bits <= kMaxFingerprintBits; ++bits) {
    if (CuckooFalsePositiveRate(kCuckooMaxLoad, bits) <= error_rate) {
      layout.fingerprint_bits = bits;
      break;
    }
  }
  if (layout.fingerprint_bits == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a cuckoo filter's fingerprints have at most ", kMaxFingerprintBits,
        " bits, which cannot reach an error rate of ", error_rate, " (the lowest is ",
        CuckooFalsePositiveRate(kCuckooMaxLoad, kMaxFingerprintBits),
        "); ask for a higher error_rate, or a larger capacity so that the chain grows less"));
  }
  const double buckets =
      std::ceil(static_cast<double>(capacity) / (kCuckooBucketSlots * kCuckooMaxLoad));
  if (buckets > static_cast<double>(kMaxCuckooBuckets)) {
    return absl::ResourceExhaustedError(absl::StrCat("a cuckoo filter of capacity ", capacity,
                                                     " would need more than ", kMaxCuckooBuckets,
                                                     " buckets"));
  }
  // One bucket more than the load needs: small tables near their load have a few over-full
  // bucket pairs, and this bucket with the stash lets every table hold its capacity
  // (cuckoo_filter_test's EveryNonScalingFilterHoldsItsCapacity samples them).
  layout.num_buckets = static_cast<uint64_t>(buckets) + 1;
  return layout;
}

absl::StatusOr<std::unique_ptr<CuckooTable>> CuckooTable::Create(CuckooLayout layout,
                                                                 uint64_t key) {
  if (layout.num_buckets == 0 || layout.num_buckets > kMaxCuckooBuckets ||
      layout.fingerprint_bits < kMinFingerprintBits ||
      layout.fingerprint_bits > kMaxFingerprintBits) {
    return absl::InvalidArgumentError(absl::StrCat("no cuckoo table has ", layout.num_buckets,
                                                   " buckets of ", layout.fingerprint_bits,
                                                   "-bit fingerprints"));
  }
  std::unique_ptr<CuckooTable> table(new CuckooTable(layout, key));
  const uint64_t bytes = layout.bytes() + 8;
  if (bytes >= kMapBytes) {
    table->bytes_.get_deleter().mapped_bytes = bytes;
    table->bytes_.reset(static_cast<uint8_t*>(MapBits(bytes)));
  } else {
    table->bytes_.reset(static_cast<uint8_t*>(std::calloc(bytes, 1)));
  }
  if (table->bytes_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", layout.bytes(), " bytes for a cuckoo table"));
  }
  return table;
}

CuckooTable::CuckooTable(CuckooLayout layout, uint64_t key)
    : layout_(layout),
      key_(key),
      mask_(static_cast<uint32_t>((uint64_t{1} << layout.fingerprint_bits) - 1)),
      // Only fingerprints of up to kWordLaneBits bits are compared as a word (and a shift by
      // 3 * 22 bits or more would be undefined).
      lane_lows_(layout.fingerprint_bits > kWordLaneBits
                     ? 0
                     : 1 | uint64_t{1} << layout.fingerprint_bits |
                           uint64_t{1} << (2 * layout.fingerprint_bits) |
                           uint64_t{1} << (3 * layout.fingerprint_bits)),
      lane_highs_(lane_lows_ << (layout.fingerprint_bits - 1)),
      dirty_((num_pages() + 63) / 64, 0) {}

CuckooTable::Probe CuckooTable::ProbeFor(uint64_t hash) const { return ProbeOf(hash); }

BLOOM_HOT_INLINE CuckooTable::Probe CuckooTable::ProbeOf(uint64_t hash) const {
  Probe probe;
  probe.hash = hash;
  probe.bucket1 = FastRange(hash, layout_.num_buckets);
  probe.fingerprint = static_cast<uint32_t>(FastRange(Mix(hash), mask_)) + 1;
  probe.bucket2 = AltBucket(probe.bucket1, probe.fingerprint);
  return probe;
}

BLOOM_HOT_INLINE uint64_t CuckooTable::AltBucket(uint64_t bucket, uint32_t fingerprint) const {
  const uint64_t n = layout_.num_buckets;
  const uint64_t target = FastRange(Mix(fingerprint ^ key_), n);
  return target >= bucket ? target - bucket : target + n - bucket;  // (target - bucket) mod n
}

BLOOM_HOT_INLINE uint32_t CuckooTable::Slot(uint64_t bucket, int slot) const {
  const uint64_t bit = (bucket * kCuckooBucketSlots + slot) * layout_.fingerprint_bits;
  uint64_t word;
  std::memcpy(&word, bytes_.get() + bit / 8, sizeof(word));
  return static_cast<uint32_t>(word >> (bit % 8)) & mask_;
}

BLOOM_HOT_INLINE void CuckooTable::SetSlot(uint64_t bucket, int slot, uint32_t fingerprint) {
  if (changes_ != nullptr) {
    changes_->Append({.table = table_index_,
                      .before = Slot(bucket, slot),
                      .after = fingerprint,
                      .position = bucket * kCuckooBucketSlots + slot});
  }
  const uint64_t bit = (bucket * kCuckooBucketSlots + slot) * layout_.fingerprint_bits;
  uint8_t* at = bytes_.get() + bit / 8;
  uint64_t word;
  std::memcpy(&word, at, sizeof(word));
  const int shift = static_cast<int>(bit % 8);
  word = (word & ~(uint64_t{mask_} << shift)) | (uint64_t{fingerprint} << shift);
  std::memcpy(at, &word, sizeof(word));
  const uint64_t first_page = bit / 8 / kPageBytes;
  const uint64_t last_page = (bit + layout_.fingerprint_bits - 1) / 8 / kPageBytes;
  for (uint64_t page = first_page; page <= last_page; ++page) {
    dirty_[page / 64] |= uint64_t{1} << (page % 64);
  }
}

BLOOM_HOT_INLINE int CuckooTable::FreeSlot(uint64_t bucket) const {
  const uint32_t bits = layout_.fingerprint_bits;
  if (bits <= kWordLaneBits) {
    // The lowest zero lane, as in BucketHas: exact, since a borrow only reaches higher lanes.
    const uint64_t zero = ZeroLanes(BucketWord(bucket));
    return zero == 0 ? -1 : std::countr_zero(zero) / static_cast<int>(bits);
  }
  for (int slot = 0; slot < kCuckooBucketSlots; ++slot) {
    if (Slot(bucket, slot) == 0) return slot;
  }
  return -1;
}

BLOOM_HOT_INLINE uint64_t CuckooTable::BucketWord(uint64_t bucket) const {
  const uint32_t bits = layout_.fingerprint_bits;
  const uint64_t bit = bucket * kCuckooBucketSlots * bits;
  uint64_t word;
  std::memcpy(&word, bytes_.get() + bit / 8, sizeof(word));
  return (word >> (bit % 8)) & ((uint64_t{1} << (kCuckooBucketSlots * bits)) - 1);
}

int CuckooTable::CountIn(uint64_t bucket, uint32_t fingerprint) const {
  int count = 0;
  for (int slot = 0; slot < kCuckooBucketSlots; ++slot) count += Slot(bucket, slot) == fingerprint;
  return count;
}

CuckooTable::StashEntry CuckooTable::StashAt(int entry) const {
  const uint8_t* at = bytes_.get() + layout_.bucket_bytes() + entry * kStashEntryBytes;
  StashEntry value;
  std::memcpy(&value.bucket, at, sizeof(value.bucket));
  std::memcpy(&value.fingerprint, at + sizeof(value.bucket), sizeof(value.fingerprint));
  return value;
}

void CuckooTable::SetStash(int entry, StashEntry value) {
  if (changes_ != nullptr) {
    const StashEntry old = StashAt(entry);
    changes_->Append({.table = table_index_,
                      .before = old.fingerprint,
                      .after = value.fingerprint,
                      .stash = true,
                      .position = layout_.slots() + entry,
                      .stash_bucket = value.fingerprint != 0 ? value.bucket : old.bucket});
  }
  const uint64_t offset = layout_.bucket_bytes() + entry * kStashEntryBytes;
  std::memcpy(bytes_.get() + offset, &value.bucket, sizeof(value.bucket));
  std::memcpy(bytes_.get() + offset + sizeof(value.bucket), &value.fingerprint,
              sizeof(value.fingerprint));
  for (uint64_t page = offset / kPageBytes; page <= (offset + kStashEntryBytes - 1) / kPageBytes;
       ++page) {
    dirty_[page / 64] |= uint64_t{1} << (page % 64);
  }
}

int CuckooTable::FindInStash(const Probe& probe) const {
  if (stashed_ == 0) return -1;
  const uint64_t pair = std::min(probe.bucket1, probe.bucket2);
  for (int entry = 0; entry < kStashEntries; ++entry) {
    const StashEntry value = StashAt(entry);
    if (value.fingerprint == probe.fingerprint && value.bucket == pair) return entry;
  }
  return -1;
}

int CuckooTable::CountInStash(const Probe& probe) const {
  if (stashed_ == 0) return 0;
  const uint64_t pair = std::min(probe.bucket1, probe.bucket2);
  int count = 0;
  for (int entry = 0; entry < kStashEntries; ++entry) {
    const StashEntry value = StashAt(entry);
    count += value.fingerprint == probe.fingerprint && value.bucket == pair;
  }
  return count;
}

BLOOM_HOT_INLINE bool CuckooTable::BucketHas(uint64_t bucket, uint32_t fingerprint) const {
  if (layout_.fingerprint_bits > kWordLaneBits) return CountIn(bucket, fingerprint) > 0;
  // A lane is zero where the slot holds the fingerprint.
  return ZeroLanes(BucketWord(bucket) ^ (fingerprint * lane_lows_)) != 0;
}

bool CuckooTable::Contains(const Probe& probe) const { return ContainsProbe(probe); }

BLOOM_HOT_INLINE bool CuckooTable::ContainsProbe(const Probe& probe) const {
  return BucketHas(probe.bucket1, probe.fingerprint) ||
         BucketHas(probe.bucket2, probe.fingerprint) || FindInStash(probe) >= 0;
}

BLOOM_HOT_INLINE void CuckooTable::PrefetchBucket(uint64_t bucket, bool write) const {
  const uint8_t* at = bytes_.get() + bucket * kCuckooBucketSlots * layout_.fingerprint_bits / 8;
  if (write) {
    __builtin_prefetch(at, 1);
  } else {
    __builtin_prefetch(at, 0);
  }
}

BLOOM_HOT_INLINE void CuckooTable::PrefetchBuckets(const Probe& probe, bool write) const {
  PrefetchBucket(probe.bucket1, write);
  PrefetchBucket(probe.bucket2, write);
}

// The batch loops below share one shape: each item's probe is computed once, kProbeAhead items
// before its turn, and its buckets are asked for then (when the item is still wanted), so that the
// batch's cache misses overlap. Far enough ahead to overlap them, near enough that the lines are
// still cached when the item's turn comes. `visit(i, probe)` returns false to stop there.
template <typename Wanted, typename Visit>
BLOOM_HOT_INLINE size_t CuckooTable::VisitProbes(const uint64_t* hashes, size_t n, bool write,
                                                 Wanted wanted, Visit visit) const {
  constexpr size_t kProbeAhead = 16;
  Probe ahead[kProbeAhead];
  for (size_t i = 0; i < std::min(n, kProbeAhead); ++i) {
    ahead[i] = ProbeOf(hashes[i]);
    if (wanted(i)) PrefetchBuckets(ahead[i], write);
  }
  for (size_t i = 0; i < n; ++i) {
    const Probe probe = ahead[i % kProbeAhead];
    if (i + kProbeAhead < n) {
      ahead[i % kProbeAhead] = ProbeOf(hashes[i + kProbeAhead]);
      if (wanted(i + kProbeAhead)) PrefetchBuckets(ahead[i % kProbeAhead], write);
    }
    if (!visit(i, probe)) return i;
  }
  return n;
}

void CuckooTable::ContainsMany(const uint64_t* hashes, size_t n, bool* present) const {
  VisitProbes(
      hashes, n, /*write=*/false, [present](size_t i) { return !present[i]; },
      [this, present](size_t i, const Probe& probe) {
        if (!present[i]) present[i] = ContainsProbe(probe);
        return true;
      });
}

void CuckooTable::CountMany(const uint64_t* hashes, size_t n, uint32_t* counts) const {
  VisitProbes(
      hashes, n, /*write=*/false, [](size_t) { return true; },
      [this, counts](size_t i, const Probe& probe) {
        counts[i] += static_cast<uint32_t>(Count(probe));
        return true;
      });
}

int CuckooTable::Count(const Probe& probe) const {
  const int first = CountIn(probe.bucket1, probe.fingerprint);
  return CountInStash(probe) + (probe.bucket2 == probe.bucket1
                                    ? first
                                    : first + CountIn(probe.bucket2, probe.fingerprint));
}

bool CuckooTable::Insert(const Probe& probe) { return InsertProbe(probe); }

size_t CuckooTable::InsertMany(const uint64_t* hashes, size_t n, uint64_t limit) {
  return VisitProbes(
      hashes, n, /*write=*/true, [](size_t) { return true; },
      [this, limit](size_t, const Probe& probe) {
        return occupied_ < limit && InsertProbe(probe);
      });
}

BLOOM_HOT_INLINE bool CuckooTable::InsertProbe(const Probe& probe) {
  for (uint64_t bucket : {probe.bucket1, probe.bucket2}) {
    if (int slot = FreeSlot(bucket); slot >= 0) {
      SetSlot(bucket, slot, probe.fingerprint);
      ++occupied_;
      return true;
    }
  }
  // Both buckets are full: put the fingerprint in place of one, carry that one to its other
  // bucket, and so on, remembering each displaced fingerprint to undo the walk if it fails.
  struct Step {
    uint64_t bucket;
    int slot;
    uint32_t displaced;
  };
  // Most walks end in a step or two: no allocation for them.
  absl::InlinedVector<Step, 16> walk;
  uint32_t carried = probe.fingerprint;
  uint64_t bucket = (probe.hash & 1) != 0 ? probe.bucket2 : probe.bucket1;
  for (int kick = 0; kick < kMaxKicks; ++kick) {
    // One step of lookahead: a fingerprint of this bucket whose other bucket has room moves
    // there, and the carried one takes its slot; most walks end here near full load. The four
    // other buckets are asked for first, so that their cache misses overlap.
    uint64_t others[kCuckooBucketSlots];
    for (int held = 0; held < kCuckooBucketSlots; ++held) {
      others[held] = AltBucket(bucket, Slot(bucket, held));
      PrefetchBucket(others[held], /*write=*/true);
    }
    for (int held = 0; held < kCuckooBucketSlots; ++held) {
      const uint32_t fingerprint = Slot(bucket, held);
      const uint64_t other = others[held];
      if (int free = FreeSlot(other); free >= 0) {
        SetSlot(other, free, fingerprint);
        SetSlot(bucket, held, carried);
        ++occupied_;
        return true;
      }
    }
    // Each step of the walk draws its slot from the item's hash and the step.
    const int slot =
        static_cast<int>(Mix(probe.hash + (kick + 1) * kGoldenGamma) % kCuckooBucketSlots);
    const uint32_t displaced = Slot(bucket, slot);
    SetSlot(bucket, slot, carried);
    walk.push_back({bucket, slot, displaced});
    carried = displaced;
    bucket = AltBucket(bucket, carried);
    if (int free = FreeSlot(bucket); free >= 0) {
      SetSlot(bucket, free, carried);
      ++occupied_;
      return true;
    }
  }
  for (size_t i = walk.size(); i-- > 0;) {  // last step first
    SetSlot(walk[i].bucket, walk[i].slot, walk[i].displaced);
  }
  for (int entry = 0; entry < kStashEntries; ++entry) {
    if (StashAt(entry).fingerprint == 0) {
      SetStash(entry, {std::min(probe.bucket1, probe.bucket2), probe.fingerprint});
      ++stashed_;
      ++occupied_;
      return true;
    }
  }
  return false;
}

bool CuckooTable::Remove(const Probe& probe) { return RemoveProbe(probe); }

void CuckooTable::RemoveMany(const uint64_t* hashes, size_t n, bool* removed) {
  VisitProbes(
      hashes, n, /*write=*/true, [removed](size_t i) { return !removed[i]; },
      [this, removed](size_t i, const Probe& probe) {
        if (!removed[i]) removed[i] = RemoveProbe(probe);
        return true;
      });
}

BLOOM_HOT_INLINE bool CuckooTable::RemoveProbe(const Probe& probe) {
  for (uint64_t bucket : {probe.bucket1, probe.bucket2}) {
    for (int slot = 0; slot < kCuckooBucketSlots; ++slot) {
      if (Slot(bucket, slot) == probe.fingerprint) {
        SetSlot(bucket, slot, 0);
        --occupied_;
        return true;
      }
    }
  }
  if (int entry = FindInStash(probe); entry >= 0) {
    SetStash(entry, {});
    --stashed_;
    --occupied_;
    return true;
  }
  return false;
}

std::string CuckooTable::ReadPage(uint64_t page) const {
  if (page >= num_pages()) return {};
  const uint64_t begin = page * kPageBytes;
  const uint64_t end = std::min<uint64_t>(begin + kPageBytes, layout_.bytes());
  return {reinterpret_cast<const char*>(bytes_.get()) + begin, end - begin};
}

uint64_t CuckooTable::CountOccupied(uint64_t first_byte, uint64_t end_byte) const {
  const uint64_t bits = layout_.fingerprint_bits;
  const uint64_t first_slot = first_byte * 8 / bits;
  const uint64_t end_slot = std::min(layout_.slots(), (end_byte * 8 + bits - 1) / bits);
  uint64_t count = 0;
  for (uint64_t slot = first_slot; slot < end_slot; ++slot) {
    count += Slot(slot / kCuckooBucketSlots, static_cast<int>(slot % kCuckooBucketSlots)) != 0;
  }
  return count;
}

int CuckooTable::CountStashed() const {
  int count = 0;
  for (int entry = 0; entry < kStashEntries; ++entry) count += StashAt(entry).fingerprint != 0;
  return count;
}

absl::Status CuckooTable::LoadPage(uint64_t page, absl::string_view data) {
  if (page >= num_pages()) {
    return absl::InvalidArgumentError(
        absl::StrCat("page ", page, " of a cuckoo table of ", num_pages(), " pages"));
  }
  const uint64_t begin = page * kPageBytes;
  const uint64_t end = std::min<uint64_t>(begin + kPageBytes, layout_.bytes());
  if (data.size() != end - begin) {
    return absl::InvalidArgumentError(absl::StrCat("page ", page, " of a cuckoo table has ",
                                                   end - begin, " bytes, not ", data.size()));
  }
  // The slots that overlap the page (one may start in the page before) change; count them
  // before and after.
  occupied_ -= CountOccupied(begin, end) + stashed_;
  std::memcpy(bytes_.get() + begin, data.data(), data.size());
  stashed_ = CountStashed();
  occupied_ += CountOccupied(begin, end) + stashed_;
  return absl::OkStatus();
}

void CuckooTable::MarkPageDirty(uint64_t page) {
  if (page < num_pages()) dirty_[page / 64] |= uint64_t{1} << (page % 64);
}

absl::Status CuckooTable::CheckFits(const CuckooChange& change, bool undo) const {
  const uint32_t fingerprint = undo ? change.before : change.after;
  if (change.position >= layout_.slots() + kStashEntries || fingerprint > mask_) {
    return absl::InvalidArgumentError(absl::StrCat("a change of slot ", change.position, " to ",
                                                   fingerprint, " does not fit a cuckoo table of ",
                                                   layout_.slots(), " slots of ",
                                                   layout_.fingerprint_bits, " bits"));
  }
  if (change.position >= layout_.slots() && fingerprint != 0 &&
      change.stash_bucket >= layout_.num_buckets) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a stash entry names bucket ", change.stash_bucket, " of ", layout_.num_buckets));
  }
  return absl::OkStatus();
}

absl::Status CuckooTable::Apply(const CuckooChange& change, bool undo) {
  if (absl::Status fits = CheckFits(change, undo); !fits.ok()) return fits;
  const uint32_t fingerprint = undo ? change.before : change.after;
  if (change.position < layout_.slots()) {
    const uint64_t bucket = change.position / kCuckooBucketSlots;
    const int slot = static_cast<int>(change.position % kCuckooBucketSlots);
    const bool was = Slot(bucket, slot) != 0;
    SetSlot(bucket, slot, fingerprint);
    occupied_ += static_cast<uint64_t>(fingerprint != 0) - static_cast<uint64_t>(was);
    return absl::OkStatus();
  }
  const uint64_t bucket = change.stash_bucket;
  const int entry = static_cast<int>(change.position - layout_.slots());
  const bool was = StashAt(entry).fingerprint != 0;
  SetStash(entry, {fingerprint != 0 ? bucket : 0, fingerprint});
  const int delta = static_cast<int>(fingerprint != 0) - static_cast<int>(was);
  stashed_ += delta;
  occupied_ += static_cast<uint64_t>(static_cast<int64_t>(delta));
  return absl::OkStatus();
}

std::vector<uint64_t> CuckooTable::TakeDirtyPages() {
  std::vector<uint64_t> pages;
  for (size_t word = 0; word < dirty_.size(); ++word) {
    for (uint64_t bits = dirty_[word]; bits != 0; bits &= bits - 1) {
      pages.push_back(word * 64 + std::countr_zero(bits));
    }
    dirty_[word] = 0;
  }
  return pages;
}

}  // namespace bloom

// A Bloom filter bit array made of 512-bit blocks (see sizing.h for the layout and its maths).
//
// Example:
//   auto filter = BlockedBloomFilter::Create(*ChooseLayout(1'000'000, 0.01));
//   uint64_t h = HashItem("user:42", seed);
//   (*filter)->Add(h);
//   bool maybe = (*filter)->MightContain(h);  // true; false would mean "never added"
//
// An item's 64-bit hash picks its block from the high 32 bits (multiply-shift "fastrange") and
// its k bit positions from 9-bit chunks of the hash run through splitmix64's mixer, so one hash
// serves every probe and the positions are independent, as the sizing model assumes.
//
// The bits are also addressed as pages of kPageBytes, the unit the storage layer persists: every
// add that sets a new bit marks its page dirty, and TakeDirtyPages() hands the set over.
//
// Thread-safety: Add*, MightContain*, ReadPage, CountSetBits and the dirty-page calls are safe to
// call concurrently from any number of threads without locks: bits only ever go from 0 to 1, by
// atomic OR on 64-bit words, and a reader sees each word either before or after an OR. A reader
// racing with an Add of the same item may answer either way; once Add returns, every later
// MightContain of that item answers true. OrPage is for loading and must not race with readers
// that need a consistent answer (it is still data-race free).
#ifndef BLOOM_BLOCKED_FILTER_H_
#define BLOOM_BLOCKED_FILTER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bloom/sizing.h"

namespace bloom {

class SliceArena;

class BlockedBloomFilter {
 public:
  static constexpr uint32_t kPageBytes = 16 * 1024;
  static constexpr uint32_t kBlocksPerPage = kPageBytes / kBlockBytes;

  // Allocates zeroed bits for `layout`. ResourceExhausted if the memory cannot be had;
  // InvalidArgument for a layout outside the limits of sizing.h.
  static absl::StatusOr<std::unique_ptr<BlockedBloomFilter>> Create(BlockedLayout layout);
  // Zeroed bits of `arena`'s layout in a free slot of `arena` (slice_arena.h: its blocks are
  // interleaved with the other slots'); nullptr when no slot is free or no memory is left.
  static std::unique_ptr<BlockedBloomFilter> CreateInArena(SliceArena& arena);

  BlockedBloomFilter(const BlockedBloomFilter&) = delete;
  BlockedBloomFilter& operator=(const BlockedBloomFilter&) = delete;
  ~BlockedBloomFilter();
  // Create() placed this object in memory of its own choosing (with the bits of a small
  // filter): delete ends it and frees that memory the way it was had.
  static void operator delete(BlockedBloomFilter* filter, std::destroying_delete_t);

  const BlockedLayout& layout() const { return layout_; }
  // Whether the bits are a slot of a SliceArena (CreateInArena).
  bool in_arena() const { return storage_ == Storage::kArena; }

  // Sets the item's bits; returns true if at least one of them was 0 before.
  bool Add(uint64_t hash);
  // Adds every hash, prefetching blocks ahead so that cache misses overlap.
  void AddMany(absl::Span<const uint64_t> hashes);

  bool MightContain(uint64_t hash) const;
  // For each i with present[i] == false, sets present[i] if any of `filters` might contain
  // hashes[i]. The filters must share one layout (a window's slices): an item's block and bit
  // masks are computed once for all of them, and their cache lines are fetched together.
  static void MightContainAny(absl::Span<const BlockedBloomFilter* const> filters,
                              absl::Span<const uint64_t> hashes, bool* present);
  // For each i with first[i] == 0, sets first[i] to 1 + the index of the first of `filters`
  // (at most 255, of one layout) that might contain hashes[i]; leaves it 0 if none might. As
  // MightContainAny, in one pass: a windowed add learns at once whether the current slice has
  // an item (filter 0) and whether an older one has it.
  static void FirstContaining(absl::Span<const BlockedBloomFilter* const> filters,
                              absl::Span<const uint64_t> hashes, uint8_t* first);
  // Where MightContainAny finds the filters' blocks: block i of filter f starts at
  // base[f] + i * stride[f] (an arena slot's blocks are strided).
  struct Probes {
    absl::InlinedVector<uint64_t*, 16> base;
    absl::InlinedVector<uint64_t, 16> stride;
  };
  // For each i with present[i] == false, sets present[i] = MightContain(hashes[i]).
  // `present` has hashes.size() elements. Prefetches like AddMany, and tests each block with
  // AVX2 where the CPU has it (as MightContainAny): a quarter less time in cache.
  void MightContainMany(absl::Span<const uint64_t> hashes, bool* present) const;

  // Sets the bits of `hashes` in `words` (layout().bytes() / 8 words, by this filter's layout)
  // instead of in this filter: what these adds make of the bits in `words`. Storage writes a
  // new filter's first pages from it, before the add's bits become visible here.
  void AddManyTo(absl::Span<const uint64_t> hashes, uint64_t* words) const;

  // Pages: page p covers bytes [p * kPageBytes, min((p + 1) * kPageBytes, layout().bytes())).
  uint64_t num_pages() const;
  uint64_t page_size(uint64_t page) const;
  // Copies page `page` as little-endian 64-bit words into `out` (page_size(page) bytes).
  void ReadPage(uint64_t page, char* out) const;
  // ORs `bytes` (exactly page_size(page) bytes) into page `page`; InvalidArgument otherwise.
  absl::Status OrPage(uint64_t page, absl::string_view bytes);

  // Returns the pages dirtied since the previous call (ascending) and clears the set.
  std::vector<uint64_t> TakeDirtyPages();
  void MarkPageDirty(uint64_t page);
  void MarkAllPagesDirty();

  // Number of bits set, kept as bits are set (each Add and OrPage counts the bits it turned
  // from 0 to 1, from the words' previous values, so racing adds count each bit once). O(1).
  uint64_t set_bits() const { return set_bits_.load(std::memory_order_relaxed); }
  // Number of bits set by scanning them; O(bits). For tests and checks of set_bits().
  uint64_t CountSetBits() const;
  // Expected FPR of a query for an absent item given the current fill: the items the fill
  // implies (EstimateCardinality), spread over blocks as Poisson loads (sizing.h). O(1).
  double EstimatedFalsePositiveRate() const;

 private:
  // Where the object and its bits live. kSlab and kHeap: the bits follow the object in one
  // slab slot or malloc block; kMapped: the object is malloc'd, the bits mapped on their own;
  // kArena: the object is malloc'd, the bits are a slot of arena_.
  enum class Storage : uint8_t { kSlab, kHeap, kMapped, kArena };

  static Probes ProbesOf(absl::Span<const BlockedBloomFilter* const> filters);

  // `words` and `dirty` zeroed; the object was placed by Create() (see Storage). Block i
  // starts at words + i * stride_words.
  BlockedBloomFilter(BlockedLayout layout, uint64_t* words, Storage storage, uint64_t* dirty,
                     uint32_t stride_words = kBlockWords, SliceArena* arena = nullptr);

  uint64_t BlockIndex(uint64_t hash) const { return ((hash >> 32) * layout_.num_blocks) >> 32; }
  uint64_t* BlockFor(uint64_t hash) const { return words_ + BlockIndex(hash) * stride_words_; }
  // Word `i` of the bits as if they were contiguous (pages are persisted that way).
  uint64_t* WordAt(uint64_t i) const {
    return words_ + i / kBlockWords * stride_words_ + i % kBlockWords;
  }
  // Sets the item's bits in `block`; returns how many were 0 before.
  uint32_t AddToBlock(uint64_t* block, uint64_t hash);

  const BlockedLayout layout_;
  uint64_t* const words_;  // layout_.num_blocks blocks, 64-byte aligned; accessed via atomic_ref
  const Storage storage_;
  const uint32_t stride_words_;  // kBlockWords, or an arena's stride
  // One bit per page, accessed via atomic_ref: in the spare header bytes or behind the bits
  // for a small filter (Create), else its own array.
  uint64_t* const dirty_;
  std::atomic<uint64_t> set_bits_{0};
  SliceArena* const arena_;  // kArena only; holds one of its references
};

}  // namespace bloom

#endif  // BLOOM_BLOCKED_FILTER_H_

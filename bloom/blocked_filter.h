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
#include <cstddef>
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
  //
  // `companion_bytes` (a multiple of 8, at most kMaxCompanionBytes): room for the owner's
  // object right before this one, in the same allocation, when the bits are small enough to
  // follow the object (up to a few MB); companion() is then that room, uninitialised, and
  // the owner places its object there and ends it before deleting this filter, which frees
  // the allocation. So a per-user filter's sub-filter, its bits' header and its bits are one
  // slab slot: 64 bytes of header where two objects took 112 (scalable_filter.h's SubFilter).
  // Larger bits get no companion (companion() is null).
  static absl::StatusOr<std::unique_ptr<BlockedBloomFilter>> Create(BlockedLayout layout,
                                                                    size_t companion_bytes = 0);
  static constexpr size_t kMaxCompanionBytes = 192;
  // Zeroed bits of `arena`'s layout in a free slot of `arena` (slice_arena.h: its blocks are
  // interleaved with the other slots'); nullptr when no slot is free or no memory is left.
  static std::unique_ptr<BlockedBloomFilter> CreateInArena(SliceArena& arena);

  BlockedBloomFilter(const BlockedBloomFilter&) = delete;
  BlockedBloomFilter& operator=(const BlockedBloomFilter&) = delete;
  ~BlockedBloomFilter();
  // Create() placed this object in memory of its own choosing (with the bits of a small
  // filter): delete ends it and frees that memory the way it was had.
  static void operator delete(BlockedBloomFilter* filter, std::destroying_delete_t) {
    Destroy(filter);
  }
  // What delete does: for an owner in the companion room, which GCC would take for freeing a
  // pointer into the middle of a block (-Wfree-nonheap-object) if it called delete.
  static void Destroy(BlockedBloomFilter* filter);

  BlockedLayout layout() const { return {num_blocks(), hash_count_}; }
  uint64_t num_blocks() const { return uint64_t{num_blocks_minus_one_} + 1; }
  // Whether the bits are a slot of a SliceArena (CreateInArena).
  bool in_arena() const { return storage_ == Storage::kArena; }
  // The room Create() left before this object for its owner, and its size; null and 0 when
  // none was asked for or the bits do not follow the object.
  void* companion() const {
    return companion_bytes_ == 0
               ? nullptr
               : const_cast<char*>(reinterpret_cast<const char*>(this)) - companion_bytes_;
  }
  size_t companion_bytes() const { return companion_bytes_; }

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
  // slab slot or malloc block (the object ends where they start, its companion before it);
  // kMapped: the object is malloc'd with a Far behind it, the bits mapped on their own;
  // kArena: likewise, the bits a slot of the arena.
  enum class Storage : uint8_t { kSlab, kHeap, kMapped, kArena };
  // What the object of mapped or arena bits keeps behind itself.
  struct Far {
    uint64_t* words;
    uint64_t* dirty;    // its own array
    SliceArena* arena;  // kArena only; holds one of its references
    uint64_t stride_words;
  };

  static Probes ProbesOf(absl::Span<const BlockedBloomFilter* const> filters);

  // The object of bits that follow it; `header_lines` 64-byte lines before the bits start
  // the allocation. The bits and dirty-page bits are zeroed by the caller.
  BlockedBloomFilter(BlockedLayout layout, Storage storage, uint32_t header_lines,
                     uint32_t companion_bytes);
  // The object of far bits; its Far is constructed behind it by the caller.
  BlockedBloomFilter(BlockedLayout layout, Storage storage);

  bool bits_follow() const { return storage_ <= Storage::kHeap; }
  const Far* far() const { return reinterpret_cast<const Far*>(this + 1); }
  // Block i starts at words() + i * stride_words().
  uint64_t* words() const {
    return bits_follow() ? const_cast<uint64_t*>(reinterpret_cast<const uint64_t*>(this + 1))
                         : far()->words;
  }
  uint64_t stride_words() const {
    return storage_ == Storage::kArena ? far()->stride_words : kBlockWords;
  }
  // One bit per page, accessed via atomic_ref: inline_dirty_ for bits that follow the object
  // and have at most 64 pages, behind the bits for larger ones, else Far's array.
  uint64_t* dirty() const;

  uint64_t BlockIndex(uint64_t hash) const { return ((hash >> 32) * num_blocks()) >> 32; }
  uint64_t* BlockFor(uint64_t hash) const { return words() + BlockIndex(hash) * stride_words(); }
  // Word `i` of the bits as if they were contiguous (pages are persisted that way).
  uint64_t* WordAt(uint64_t i) const {
    return words() + i / kBlockWords * stride_words() + i % kBlockWords;
  }
  // Sets the item's bits in `block` (block number `block_index`); returns how many were 0.
  uint32_t AddToBlock(uint64_t* block, uint64_t block_index, uint64_t hash);

  // 24 bytes (56 while it kept its bits' address, stride, dirty-page pointer and arena, which
  // it now derives or keeps in Far), so that a small filter's first line also holds its
  // sub-filter. The block count is kept minus one, so that 2^32 blocks fit in 32 bits.
  std::atomic<uint64_t> set_bits_{0};
  mutable uint64_t inline_dirty_ = 0;
  const uint32_t num_blocks_minus_one_;
  const uint8_t hash_count_;
  const Storage storage_;
  const uint8_t header_lines_;     // bits_follow(): the allocation's lines before the bits
  const uint8_t companion_bytes_;  // bits_follow(): the room before this object
};

}  // namespace bloom

#endif  // BLOOM_BLOCKED_FILTER_H_

// Interleaved bits for the time slices of a large windowed filter (window.h).
//
// A query of a windowed filter reads an item's block in every unexpired slice: 9 blocks at 8
// slices, where a plain filter reads one. When each slice's bits are an array of their own,
// those are 9 cache misses in 9 distant places (9 DRAM rows, 9 TLB entries). An arena holds the
// first sub-filters of all slices in one mapping, block b of slot s at byte (b * slots + s) * 64:
// an item's blocks in all slices lie side by side, in one or two pages, which halves the time of
// a query for an absent item (window_benchmark BM_Contains).
// The slices keep their own pages in RocksDB (BlockedBloomFilter::ReadPage gathers a slot's
// blocks), so retiring a slice is still a range delete.
//
// Every slice's first sub-filter has one layout, so the slots are alike. An arena has
// window_slices + 2 slots: at most window_slices + 1 slices are unexpired at once, plus one
// expired slice not yet retired by storage's checkpoint. When no slot is free (a retirement
// held back by an export), a slice gets bits of its own, as smaller windows always do: slower,
// never wrong.
//
// Memory: since slots interleave, the first slice's adds touch every page of the arena. A large
// windowed filter thus holds its whole window's bits from its first slice on, as a plain filter
// holds its capacity's from its Reserve; ScalableFilter::size_bytes() counts the arena whole.
//
// Thread-safety: thread-safe. Reference-counted: the owning ScalableFilter and each
// BlockedBloomFilter in a slot hold one reference, so the arena outlives all of them.
#ifndef BLOOM_SLICE_ARENA_H_
#define BLOOM_SLICE_ARENA_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "bloom/sizing.h"
#include "common/mutex.h"

namespace bloom {

class SliceArena {
 public:
  // Slices smaller than this keep their own bits: a window of them fits in the caches, and
  // small per-user windows must not pay for slots they do not use.
  static constexpr uint64_t kMinSliceBytes = 256 << 10;

  struct Release {
    void operator()(SliceArena* arena) const { arena->Unref(); }
  };
  using Ref = std::unique_ptr<SliceArena, Release>;

  // An arena of `slots` slots of `layout`, holding one reference for the caller; nullptr when
  // the memory cannot be had (the slices then keep their own bits).
  static Ref Create(BlockedLayout layout, uint32_t slots);

  SliceArena(const SliceArena&) = delete;
  SliceArena& operator=(const SliceArena&) = delete;

  const BlockedLayout& layout() const { return layout_; }
  uint32_t slots() const { return slots_; }
  uint64_t total_bytes() const { return layout_.bytes() * slots_; }
  // Words from one block of a slot to its next.
  uint64_t stride_words() const { return uint64_t{slots_} * kBlockWords; }

  // The first word of a free slot, its blocks zeroed, now in use and holding a reference to
  // the arena; nullptr when every slot is in use.
  uint64_t* AcquireSlot();
  // Gives back the slot AcquireSlot answered `words` for, and its reference.
  void ReleaseSlot(uint64_t* words);
  uint32_t slots_in_use() const;

 private:
  SliceArena(BlockedLayout layout, uint32_t slots, uint64_t* words);
  ~SliceArena();
  void AddRef() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref();

  const BlockedLayout layout_;
  const uint32_t slots_;
  uint64_t* const words_;  // total_bytes(), 2 MiB aligned
  std::atomic<uint32_t> refs_{1};
  mutable bloomsync::Mutex mu_;
  std::vector<bool> in_use_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bloom

#endif  // BLOOM_SLICE_ARENA_H_

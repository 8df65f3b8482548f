// Fixed-size slots carved from 4 MiB slabs, one free list per slot size: memory for objects
// that are made and freed by the million in a few sizes (small filters, which the residency
// cache evicts and loads all day).
//
// Why not malloc: glibc serves a 1.6 KB chunk by best fit from its large bins, splitting bigger
// free chunks and leaving remainders that other sizes take, and each thread's arena keeps its
// own holes. Under eviction churn a server with 1 GiB of resident filters held about 400 MB
// more than it used (10M filters, RSS 1.67 GB). Here a freed slot is reused exactly by the
// next object of its size, so the memory of a size is its peak number of live objects (plus
// at most one partly carved slab), whatever the order of frees.
//
// Slabs are never returned to the system: the memory stays for the next objects of that size
// (a cache under a budget refills it at once). Under AddressSanitizer a free slot is poisoned,
// so a use after free is still reported.
//
//   void* p = slab::Allocate(1600);  // 64-byte aligned, uninitialised; nullptr if out of memory
//   slab::Free(p);
//
// Thread-safety: every function may be called from any thread; each size has its own mutex.
#ifndef COMMON_SLAB_H_
#define COMMON_SLAB_H_

#include <cstddef>
#include <cstdint>

namespace slab {

// Slots are multiples of kAlignment bytes, up to kMaxSlotBytes; larger requests are not served.
inline constexpr size_t kAlignment = 64;
inline constexpr size_t kMaxSlotBytes = size_t{64} * 1024;
inline constexpr size_t kSlabBytes = 4 << 20;

// Whether Allocate serves `bytes` (0 < bytes <= kMaxSlotBytes).
constexpr bool Fits(size_t bytes) { return bytes > 0 && bytes <= kMaxSlotBytes; }

// A slot of at least `bytes` bytes (Fits(bytes) must hold), aligned to kAlignment; nullptr if
// the system has no memory for a new slab.
void* Allocate(size_t bytes);

// Returns a slot from Allocate to its size's free list. nullptr is ignored.
void Free(void* slot);

struct Figures {
  uint64_t slab_bytes = 0;    // mapped for slabs: the most this allocator can add to RSS
  uint64_t in_use_bytes = 0;  // in live slots
};
Figures Totals();

}  // namespace slab

#endif  // COMMON_SLAB_H_

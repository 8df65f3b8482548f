// Large bit arrays straight from the kernel: zeroed, 2 MiB aligned and asked for transparent
// huge pages.
//
// Why aligned: mmap places a mapping on a 4 KiB boundary, and only the aligned 2 MiB stretches
// inside it can become huge pages, so a 2.4 MiB slice of a window got none and paid a TLB miss
// per query (window_benchmark, 10M items at 4 slices: 69 -> 50 ns per query once aligned).
//
//   void* bits = MapBits(bytes);  // nullptr if the system has no memory for it
//   UnmapBits(bits, bytes);
//
// Thread-safety: both may be called from any thread.
#ifndef BLOOM_MAPPED_BITS_H_
#define BLOOM_MAPPED_BITS_H_

#include <cstdint>

namespace bloom {

void* MapBits(uint64_t bytes);
void UnmapBits(void* bits, uint64_t bytes);

}  // namespace bloom

#endif  // BLOOM_MAPPED_BITS_H_

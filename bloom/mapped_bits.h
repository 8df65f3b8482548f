// Large bit arrays straight from the kernel: zeroed, 2 MiB aligned and asked for transparent
// huge pages.
//
// Why aligned: mmap places a mapping on a 4 KiB boundary, and only the aligned 2 MiB stretches
// inside it can become huge pages: an unaligned 2.4 MiB slice of a window would get none and pay
// a TLB miss per query (window_benchmark BM_Contains at 10M items shows it).
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

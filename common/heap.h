// The process heap: which allocator serves malloc, and giving its free pages back.
//
// bloom-server is linked with jemalloc (Debian's libjemalloc2; CMake option BLOOM_JEMALLOC,
// off in sanitizer builds, whose runtimes replace malloc themselves). Why: a per-key
// operation makes a dozen small allocations across gRPC, protobuf and the store, and glibc's
// malloc spends a noticeable share of the server's CPU on them, much of it in its slow paths
// (malloc_consolidate, unsorted-bin sorting) once millions of filters fragment the heap.
// Other programs (tests, benchmarks, bloom-cli) keep glibc's malloc.
//
//   bloomheap::ReleaseFreeMemory();  // after freeing many objects
//
// Thread-safety: both functions may be called from any thread.
#ifndef COMMON_HEAP_H_
#define COMMON_HEAP_H_

#include <cstddef>
#include <string>

namespace bloomheap {

// "jemalloc" when jemalloc serves malloc in this process, else "glibc".
std::string AllocatorName();

// Bytes the program has allocated and not freed, as the allocator counts them: jemalloc's
// stats.allocated (each allocation at its size class), glibc's in-use chunk bytes (mallinfo2).
size_t HeapBytesInUse();

// Returns free heap pages to the system now: jemalloc purges every arena's dirty pages (which
// it would otherwise return within its decay time), glibc trims its arenas (which it would
// otherwise keep, holes and all, until something of the same size comes).
void ReleaseFreeMemory();

}  // namespace bloomheap

#endif  // COMMON_HEAP_H_

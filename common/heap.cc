#include "common/heap.h"

#include <malloc.h>

#include <cstddef>
#include <cstdint>

// jemalloc's control interface, declared weak: it resolves to jemalloc's when the program is
// linked with it and is null otherwise, so one library serves both kinds of program.
// NOLINTNEXTLINE(readability-identifier-naming): the name is jemalloc's interface.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace bloomheap {
namespace {

bool JemallocServesMalloc() { return mallctl != nullptr; }

}  // namespace

std::string AllocatorName() { return JemallocServesMalloc() ? "jemalloc" : "glibc"; }

size_t HeapBytesInUse() {
  if (JemallocServesMalloc()) {
    // Its statistics are a snapshot refreshed by writing "epoch".
    uint64_t epoch = 1;
    size_t length = sizeof(epoch);
    (void)mallctl("epoch", &epoch, &length, &epoch, length);
    size_t allocated = 0;
    length = sizeof(allocated);
    if (mallctl("stats.allocated", &allocated, &length, nullptr, 0) == 0) return allocated;
    return 0;
  }
  return mallinfo2().uordblks;
}

void ReleaseFreeMemory() {
  if (JemallocServesMalloc()) {
    // "arena.<MALLCTL_ARENAS_ALL>.purge": 4096 names every arena (jemalloc 5's constant).
    (void)mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
    return;
  }
  malloc_trim(0);
}

}  // namespace bloomheap

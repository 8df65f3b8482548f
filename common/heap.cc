#include "common/heap.h"

#include <malloc.h>

#include <cstddef>

// jemalloc's control interface, declared weak: it resolves to jemalloc's when the program is
// linked with it and is null otherwise, so one library serves both kinds of program.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace bloomheap {
namespace {

bool JemallocServesMalloc() { return mallctl != nullptr; }

}  // namespace

std::string AllocatorName() { return JemallocServesMalloc() ? "jemalloc" : "glibc"; }

void ReleaseFreeMemory() {
  if (JemallocServesMalloc()) {
    // "arena.<MALLCTL_ARENAS_ALL>.purge": 4096 names every arena (jemalloc 5's constant).
    (void)mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
    return;
  }
  malloc_trim(0);
}

}  // namespace bloomheap

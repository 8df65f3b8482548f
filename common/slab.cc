#include "common/slab.h"

#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cstring>
#include <new>

#include "absl/base/thread_annotations.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SLAB_POISON(address, size) ASAN_POISON_MEMORY_REGION(address, size)
#define SLAB_UNPOISON(address, size) ASAN_UNPOISON_MEMORY_REGION(address, size)
#else
#define SLAB_POISON(address, size) ((void)(address), (void)(size))
#define SLAB_UNPOISON(address, size) ((void)(address), (void)(size))
#endif

#include "common/blocking_mutex.h"
namespace slab {
namespace {

constexpr size_t kClasses = kMaxSlotBytes / kAlignment;

// One size of slot. Free slots form a list threaded through their first bytes.
struct SizeClass {
  explicit SizeClass(size_t bytes) : slot_bytes(bytes) {}
  const size_t slot_bytes;
  bloomsync::BlockingMutex mu;
  void* free_head ABSL_GUARDED_BY(mu) = nullptr;
  char* carve ABSL_GUARDED_BY(mu) = nullptr;  // the next never-used slot of the newest slab
  char* carve_end ABSL_GUARDED_BY(mu) = nullptr;
};

// The first kAlignment bytes of every slab (aligned to kSlabBytes), so Free finds a slot's
// size from its address.
struct SlabHeader {
  SizeClass* size_class;
};
static_assert(sizeof(SlabHeader) <= kAlignment);

// Created on first use and never destroyed: slots may be freed by static destructors.
std::array<std::atomic<SizeClass*>, kClasses>& Classes() {
  static auto* classes = new std::array<std::atomic<SizeClass*>, kClasses>();
  return *classes;
}
std::atomic<uint64_t> slab_bytes{0};
std::atomic<uint64_t> in_use_bytes{0};

SizeClass& ClassFor(size_t bytes) {
  const size_t index = (bytes + kAlignment - 1) / kAlignment - 1;
  std::atomic<SizeClass*>& entry = Classes()[index];
  SizeClass* found = entry.load(std::memory_order_acquire);
  if (found != nullptr) return *found;
  auto* made = new SizeClass((index + 1) * kAlignment);
  if (entry.compare_exchange_strong(found, made, std::memory_order_acq_rel)) return *made;
  delete made;  // another thread made it first
  return *found;
}

// A new kSlabBytes mapping aligned to kSlabBytes (mapped twice the size, then trimmed).
char* MapSlab() {
  void* mapped = mmap(nullptr, 2 * kSlabBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  char* const start = static_cast<char*>(mapped);
  const size_t head = (kSlabBytes - reinterpret_cast<uintptr_t>(start) % kSlabBytes) % kSlabBytes;
  char* const aligned = start + head;
  if (head > 0) munmap(start, head);
  const size_t tail = kSlabBytes - head;  // what is mapped beyond aligned + kSlabBytes
  if (tail > 0) munmap(aligned + kSlabBytes, tail);
  slab_bytes.fetch_add(kSlabBytes, std::memory_order_relaxed);
  return aligned;
}

}  // namespace

void* Allocate(size_t bytes) {
  if (!Fits(bytes)) return nullptr;
  SizeClass& size_class = ClassFor(bytes);
  const size_t slot_bytes = size_class.slot_bytes;
  void* slot = nullptr;
  {
    bloomsync::BlockingLock lock(&size_class.mu);
    if (size_class.free_head != nullptr) {
      slot = size_class.free_head;
      SLAB_UNPOISON(slot, slot_bytes);
      std::memcpy(&size_class.free_head, slot, sizeof(void*));
    } else {
      if (size_class.carve == nullptr ||
          size_class.carve_end - size_class.carve < static_cast<std::ptrdiff_t>(slot_bytes)) {
        char* fresh = MapSlab();
        if (fresh == nullptr) return nullptr;
        new (fresh) SlabHeader{&size_class};
        size_class.carve = fresh + kAlignment;
        size_class.carve_end = fresh + kSlabBytes;
      }
      slot = size_class.carve;
      size_class.carve += slot_bytes;
    }
  }
  in_use_bytes.fetch_add(slot_bytes, std::memory_order_relaxed);
  return slot;
}

void Free(void* slot) {
  if (slot == nullptr) return;
  const char* const slab_start =
      static_cast<char*>(slot) - reinterpret_cast<uintptr_t>(slot) % kSlabBytes;
  SizeClass& size_class = *reinterpret_cast<const SlabHeader*>(slab_start)->size_class;
  {
    bloomsync::BlockingLock lock(&size_class.mu);
    std::memcpy(slot, &size_class.free_head, sizeof(void*));
    size_class.free_head = slot;
    SLAB_POISON(slot, size_class.slot_bytes);
  }
  in_use_bytes.fetch_sub(size_class.slot_bytes, std::memory_order_relaxed);
}

Figures Totals() {
  return {slab_bytes.load(std::memory_order_relaxed), in_use_bytes.load(std::memory_order_relaxed)};
}

}  // namespace slab

#include "bloom/mapped_bits.h"

#include <sys/mman.h>
#include <unistd.h>

namespace bloom {
namespace {

constexpr uint64_t kHugePageBytes = 2 << 20;

uint64_t RoundUp(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

}  // namespace

void* MapBits(uint64_t bytes) {
  // Maps 2 MiB more than needed and unmaps both ends around the aligned start.
  const uint64_t padded = bytes + kHugePageBytes;
  void* mapped = mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  char* const raw = static_cast<char*>(mapped);
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uint64_t head = RoundUp(begin, kHugePageBytes) - begin;
  const uint64_t used = RoundUp(head + bytes, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  if (head > 0) munmap(raw, head);
  if (padded > used) munmap(raw + used, padded - used);
  char* const bits = raw + head;
  madvise(bits, bytes, MADV_HUGEPAGE);  // a hint; failure is fine
  return bits;
}

void UnmapBits(void* bits, uint64_t bytes) {
  if (bits != nullptr) munmap(bits, bytes);
}

}  // namespace bloom

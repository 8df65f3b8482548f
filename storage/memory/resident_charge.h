// What a filter costs the MemoryBudget while it is in memory: its bits plus a fixed charge for
// its bookkeeping (objects, locks, counters, map slot, slab slot rest).
//
//   const uint64_t bytes = ResidentCharge(RecordBitsBytes(record), record.sub_filters.size());
//   RETURN_IF_ERROR(CheckResidentCharge(bytes, name));
//
// The bookkeeping is charged with the bits so that --memory_limit bounds the memory filters
// take, not only their bits: for millions of small per-user filters it is a fifth of it.
// `store_benchmark BM_PerFilterOverhead` measures the real per-filter overhead (with the
// server's allocator, jemalloc, and with glibc's); kResidentFilterOverheadBytes keeps a margin
// of a half to two thirds over it, for what the budget does not count per filter (RocksDB's
// memtables and block cache, free heap pages). Re-run that benchmark when a filter's objects
// change size, and keep the margin.
//
// Thread-safety: pure functions and constants.
#ifndef STORAGE_MEMORY_RESIDENT_CHARGE_H_
#define STORAGE_MEMORY_RESIDENT_CHARGE_H_

#include <cstddef>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bloom/cuckoo_table.h"
#include "bloom/scalable_filter.h"
#include "storage/format/encoding.h"

namespace storage {

// A resident filter's bookkeeping, and each further sub-filter's object.
inline constexpr uint64_t kResidentFilterOverheadBytes = 416;
inline constexpr uint64_t kSubFilterOverheadBytes = 128;

// Bytes of bits the filter `record` describes holds once built, as ScalableFilter::size_bytes()
// counts them: a large window's slice arena whole, the slices' first sub-filters in it not
// again (bloom/slice_arena.h). Expired slices count until a build drops them. A CUCKOO filter's
// tables count as CuckooTableCharge (below).
uint64_t RecordBitsBytes(const FilterRecord& record);

// The bytes of bits a sub-filter adds to its filter's: none for a slot of a slice arena, whose
// memory the filter holds already.
inline uint64_t OwnBitsBytes(const bloom::SubFilter& sub) {
  return sub.bits().in_arena() ? 0 : sub.shape().layout.bytes();
}

// The charge of a resident filter with `bits` bytes of bits in `sub_filters` sub-filters.
constexpr uint64_t ResidentCharge(uint64_t bits, size_t sub_filters) {
  return bits + kResidentFilterOverheadBytes +
         (sub_filters > 1 ? (sub_filters - 1) * kSubFilterOverheadBytes : 0);
}

// The charge of the filter `record` describes, without building it.
inline uint64_t RecordCharge(const FilterRecord& record) {
  return ResidentCharge(RecordBitsBytes(record), record.sub_filters.size());
}

// The largest charge a resident filter can hold (it is kept in 32 bits of 32-byte units):
// almost 128 GiB. CheckResidentCharge answers RESOURCE_EXHAUSTED for a filter that would take
// more in memory, as for one larger than the memory limit; OK otherwise.
inline constexpr uint64_t kChargeUnitBytes = 32;
inline constexpr uint64_t kMaxResidentChargeBytes =
    uint64_t{std::numeric_limits<uint32_t>::max()} * kChargeUnitBytes;
static_assert(kResidentFilterOverheadBytes % kChargeUnitBytes == 0 &&
                  kSubFilterOverheadBytes % kChargeUnitBytes == 0,
              "charges are kept in 32-byte units");
absl::Status CheckResidentCharge(uint64_t bytes, absl::string_view name);

// What a cuckoo table's bytes are charged: rounded up to the charge unit, since, unlike a Bloom
// filter's 64-byte blocks, its bit-packed buckets and stash are not a multiple of it (a charge
// kept in units would give back less than it took). RecordBitsBytes counts them so too.
inline uint64_t CuckooTableCharge(const bloom::CuckooLayout& layout) {
  return (layout.bytes() + kChargeUnitBytes - 1) / kChargeUnitBytes * kChargeUnitBytes;
}

}  // namespace storage

#endif  // STORAGE_MEMORY_RESIDENT_CHARGE_H_

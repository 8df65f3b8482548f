// SubFilter: one link of a scalable chain (scalable_filter.h), a blocked Bloom filter with its
// shape, its item count and, for a windowed filter, the time slice it belongs to.
//
// One exists per per-user filter, so its layout is part of the design: 40 bytes in the first
// cache line of its bits' slab slot (the static_asserts in sub_filter.cc), its bits right
// behind it.
//
// Thread-safety: the counters and next() may be used from any thread (atomics); the chain is
// grown and retired by ScalableFilter under its locks.
#ifndef BLOOM_SUB_FILTER_H_
#define BLOOM_SUB_FILTER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "bloom/blocked_filter.h"
#include "bloom/filter_params.h"

namespace bloom {

// Which slice a sub-filter of a windowed filter belongs to, and its place in that slice's chain.
struct SliceTag {
  int64_t start_micros = 0;  // SliceStartMicros; 0 for a filter without a window
  int position = 0;          // 0 for the slice's first sub-filter
};

class SubFilter {
 public:
  // `slice` (a windowed filter's sub-filters only) defaults to position `index` of an
  // unwindowed chain. InvalidArgument for a slice position of kMaxSubFilters or more (a
  // corrupt record: no slice grows that far). When `bits` were made with a companion of
  // CompanionBytes(slice.has_value()) bytes (BlockedBloomFilter::Create), the sub-filter is
  // placed there, in the bits' own allocation; otherwise it allocates its own.
  static absl::StatusOr<std::unique_ptr<SubFilter>> Create(
      int index, SubFilterShape shape, std::unique_ptr<BlockedBloomFilter> bits,
      absl::optional<SliceTag> slice = absl::nullopt);
  // The companion room bits need for a sub-filter to live in their allocation.
  static constexpr size_t CompanionBytes(bool sliced) {
    return sizeof(SubFilter) + (sliced ? sizeof(int64_t) : 0);
  }
  // Frees the newer sub-filters too (it owns next()).
  ~SubFilter();
  // Create() placed the object in its bits' allocation or in one of its own with a tail
  // (the bits' pointer, a windowed sub-filter's slice start): delete ends it and its bits
  // and frees what Create() had.
  static void operator delete(SubFilter* sub, std::destroying_delete_t);
  SubFilter(const SubFilter&) = delete;
  SubFilter& operator=(const SubFilter&) = delete;

  int index() const { return index_; }
  SliceTag slice() const {
    return sliced_ ? SliceTag{*SliceStart(), slice_position_} : SliceTag{0, index_};
  }
  SubFilterShape shape() const { return {capacity_, error_rate_, bits().layout()}; }
  BlockedBloomFilter& bits() const {
    char* tail = const_cast<char*>(reinterpret_cast<const char*>(this + 1));
    return bits_inline_
               ? *reinterpret_cast<BlockedBloomFilter*>(tail + (sliced_ ? sizeof(int64_t) : 0))
               : **reinterpret_cast<BlockedBloomFilter**>(tail);
  }

  // Items counted into this sub-filter (reserved by adds in flight or done).
  uint64_t items_added() const { return items_added_.load(std::memory_order_acquire); }
  // Sets the counter; for loading only, before the filter is shared.
  void set_items_added(uint64_t n) { items_added_.store(n, std::memory_order_release); }

  // Reserves min(count, room left) slots and returns how many.
  uint64_t ReserveUpTo(uint64_t count);
  // Reserves exactly `count` slots, or none if they do not fit.
  bool ReserveExactly(uint64_t count);
  void Unreserve(uint64_t count);

  // The next (newer) sub-filter, or nullptr. Owned by this one.
  SubFilter* next() const { return next_.load(std::memory_order_acquire); }

 private:
  friend class ScalableFilter;

  SubFilter(int index, int slice_position, bool sliced, bool bits_inline,
            const SubFilterShape& shape);
  // A windowed sub-filter's slice start, behind the object (sliced_ only), after the bits'
  // pointer when they are elsewhere.
  const int64_t* SliceStart() const {
    return reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(this + 1) +
                                            (bits_inline_ ? 0 : sizeof(void*)));
  }

  // 40 bytes, one per per-user filter, in the first line of its bits' slab slot beside their
  // 24-byte header (the static_assert in sub_filter.cc keeps it there; store_benchmark
  // BM_PerFilterOverhead measures what a filter costs in all). Behind the object: a windowed
  // filter's slice start; then, with bits_inline_, the bits' object, else before the slice start a
  // pointer to them (owned).
  const int index_;
  const uint16_t slice_position_;  // sliced_ only: < kMaxSubFilters
  const bool sliced_;              // a windowed filter's: SliceStart() holds its slice
  const bool bits_inline_;         // the bits' object follows (in their allocation)
  const uint64_t capacity_;
  const double error_rate_;
  std::atomic<uint64_t> items_added_{0};
  // Owning: written once, by the appending thread (Retire takes it back).
  std::atomic<SubFilter*> next_{nullptr};
};

}  // namespace bloom

#endif  // BLOOM_SUB_FILTER_H_

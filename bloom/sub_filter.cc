#include "bloom/sub_filter.h"

#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace bloom {

absl::StatusOr<std::unique_ptr<SubFilter>> SubFilter::Create(
    int index, SubFilterShape shape, std::unique_ptr<BlockedBloomFilter> bits,
    absl::optional<SliceTag> slice) {
  if (slice.has_value() && (slice->position < 0 || slice->position >= kMaxSubFilters)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sub-filter ", index, " is at position ", slice->position,
                     " of its time slice; a slice has at most ", kMaxSubFilters, " sub-filters"));
  }
  const bool sliced = slice.has_value();
  const bool bits_inline = bits->companion_bytes() == CompanionBytes(sliced);
  void* memory;
  if (bits_inline) {
    memory = bits->companion();
  } else {
    memory = ::operator new(CompanionBytes(sliced) + sizeof(void*));
    ::new (static_cast<char*>(memory) + sizeof(SubFilter)) BlockedBloomFilter*(bits.get());
  }
  if (sliced) {
    ::new (static_cast<char*>(memory) + sizeof(SubFilter) + (bits_inline ? 0 : sizeof(void*)))
        int64_t(slice->start_micros);
  }
  // Owned by the sub-filter now: its operator delete deletes them.
  static_cast<void>(bits.release());
  return std::unique_ptr<SubFilter>(
      ::new (memory) SubFilter(index, sliced ? slice->position : 0, sliced, bits_inline, shape));
}

SubFilter::SubFilter(int index, int slice_position, bool sliced, bool bits_inline,
                     const SubFilterShape& shape)
    : index_(index),
      slice_position_(static_cast<uint16_t>(slice_position)),
      sliced_(sliced),
      bits_inline_(bits_inline),
      capacity_(shape.capacity),
      error_rate_(shape.error_rate) {}

void SubFilter::operator delete(SubFilter* sub, std::destroying_delete_t) {
  BlockedBloomFilter* const bits = &sub->bits();
  const bool bits_inline = sub->bits_inline_;
  sub->~SubFilter();
  if (bits_inline) {
    // The sub-filter's memory is the bits' companion room: freeing them frees it too.
    BlockedBloomFilter::Destroy(bits);
  } else {
    delete bits;
    ::operator delete(static_cast<void*>(sub));
  }
}

SubFilter::~SubFilter() {
  // Frees the newer sub-filters this one owns, iteratively: a windowed chain can be long.
  SubFilter* next = next_.load(std::memory_order_acquire);
  while (next != nullptr) {
    SubFilter* after = next->next_.exchange(nullptr, std::memory_order_acq_rel);
    delete next;
    next = after;
  }
}

uint64_t SubFilter::ReserveUpTo(uint64_t count) {
  uint64_t current = items_added_.load(std::memory_order_relaxed);
  while (true) {
    if (current >= capacity_) return 0;
    const uint64_t take = std::min(count, capacity_ - current);
    if (items_added_.compare_exchange_weak(current, current + take, std::memory_order_acq_rel)) {
      return take;
    }
  }
}

bool SubFilter::ReserveExactly(uint64_t count) {
  uint64_t current = items_added_.load(std::memory_order_relaxed);
  while (true) {
    if (current > capacity_ || count > capacity_ - current) return false;
    if (items_added_.compare_exchange_weak(current, current + count, std::memory_order_acq_rel)) {
      return true;
    }
  }
}

void SubFilter::Unreserve(uint64_t count) {
  items_added_.fetch_sub(count, std::memory_order_acq_rel);
}

static_assert(sizeof(SubFilter) == 40 &&
                  SubFilter::CompanionBytes(false) + sizeof(BlockedBloomFilter) == 64,
              "an unwindowed sub-filter and its bits' object share one 64-byte line");
static_assert(kMaxSubFilters <= std::numeric_limits<uint16_t>::max(), "slice_position_ is 16 bits");

}  // namespace bloom

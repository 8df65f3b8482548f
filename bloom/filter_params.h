// FilterParams: what a caller asks of a filter (capacity, error rate, growth, window), checked
// and normalized, and the shapes of the sub-filters that meet it. (bloom.v1's FilterSpec
// message is the API's form of it; service/convert.h converts.)
//
//   FilterParams spec{.capacity = 1'000'000, .error_rate = 0.01};
//   ASSIGN_OR_RETURN(spec, NormalizeSpec(spec));          // INVALID_ARGUMENT names the field
//   ASSIGN_OR_RETURN(SubFilterShape first, SubFilterShapeFor(spec, 0));
//
// A scalable chain's sub-filter i has capacity `capacity * expansion^i` and error rate
// `error_rate * (1-r) * r^i` with r = kChainTightening, so sum_i error_i < error_rate however
// far the chain grows; a windowed filter's slices are chains of their own (window.h).
//
// Thread-safety: pure functions and values.
#ifndef BLOOM_FILTER_PARAMS_H_
#define BLOOM_FILTER_PARAMS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "bloom/blocked_filter.h"

namespace bloom {

inline constexpr uint32_t kDefaultExpansion = 2;
inline constexpr uint32_t kMaxExpansion = 32768;
// A chain never grows past this: sub-filter 63 already has error rate error_rate / 2^64.
inline constexpr int kMaxSubFilters = 64;

// What a filter is made of. A Bloom filter (scalable_filter.h) cannot forget an item; a cuckoo
// filter (cuckoo_filter.h) can (Remove), and counts copies, at the cost of no window.
enum class FilterKind : uint8_t { kBloom = 0, kCuckoo = 1 };

struct FilterParams {
  uint64_t capacity = 0;     // items the first sub-filter holds at error_rate; >= 1
  double error_rate = 0;     // target FPR of the whole filter, in (0, 1)
  uint32_t expansion = 0;    // growth factor of each new sub-filter; 0 means kDefaultExpansion
  bool non_scaling = false;  // refuse adds beyond capacity instead of growing
  FilterKind kind = FilterKind::kBloom;
  // Sliding window (window.h): items are forgotten after `window`; zero: never.
  absl::Duration window = absl::ZeroDuration();
  uint32_t window_slices = 0;  // slices the window is kept as; 0 means kDefaultWindowSlices
  // The store deletes the filter after this long without use; zero: never. Neither used nor
  // kept here: ScalableFilter::spec() answers zero, and the store keeps it (one field less in
  // each of millions of per-user filters).
  absl::Duration idle_ttl = absl::ZeroDuration();

  bool windowed() const { return window > absl::ZeroDuration(); }
  bool cuckoo() const { return kind == FilterKind::kCuckoo; }
  friend bool operator==(const FilterParams&, const FilterParams&) = default;
};

// Checks every field and replaces expansion 0 by the default. A cuckoo filter has no window.
// InvalidArgument names the field as `field`.capacity etc.
absl::StatusOr<FilterParams> NormalizeSpec(const FilterParams& spec,
                                           absl::string_view field = "spec");

struct SubFilterShape {
  uint64_t capacity = 0;
  double error_rate = 0;
  BlockedLayout layout;
};

// The shape of the sub-filter at `position` in its chain (for a windowed spec: in its slice's
// chain, SliceChainSpec) of a normalized spec. ResourceExhausted when it cannot exist
// (position >= kMaxSubFilters, or too large to address).
absl::StatusOr<SubFilterShape> SubFilterShapeFor(const FilterParams& spec, int position);

// The error-rate tightening ratio r of a scalable chain.
inline constexpr double kChainTightening = 0.5;

// What sub-filter `index` of an unwindowed chain of normalized `spec` must hold, whatever kind
// of filter it is: capacity * expansion^index items (saturating) at error_rate * (1-r) * r^index
// (error_rate itself for a non-scaling filter). ResourceExhausted past the chain's end.
struct ChainTarget {
  uint64_t capacity = 0;
  double error_rate = 0;
};
absl::StatusOr<ChainTarget> ChainTargetFor(const FilterParams& spec, int index);

// The slice arena (slice_arena.h) a filter of normalized `spec` keeps its slices' first
// sub-filters in: a window whose slices are large enough. Nullopt for every other filter.
struct ArenaShape {
  BlockedLayout layout;
  uint32_t slots = 0;
  uint64_t bytes() const { return layout.bytes() * slots; }
};
absl::optional<ArenaShape> ArenaShapeFor(const FilterParams& spec);

}  // namespace bloom

#endif  // BLOOM_FILTER_PARAMS_H_

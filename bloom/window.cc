#include "bloom/window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "bloom/scalable_filter.h"

namespace bloom {
namespace {

// floor(a / b) for b > 0, also for negative a (instants before 1970).
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); }

absl::Status CheckDuration(absl::Duration value, absl::Duration min, absl::Duration max,
                           absl::string_view field, absl::string_view name) {
  if (value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".", name, " must be 0 (none) or between ", absl::FormatDuration(min), " and ",
        absl::FormatDuration(max), " (10 years), got ", absl::FormatDuration(value)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status NormalizeWindow(FilterParams& spec, absl::string_view field) {
  // Stored in whole microseconds: a spec must compare equal to itself after a restart.
  spec.window = absl::Trunc(spec.window, absl::Microseconds(1));
  spec.idle_ttl = absl::Trunc(spec.idle_ttl, absl::Microseconds(1));
  if (spec.window != absl::ZeroDuration()) {
    if (absl::Status s = CheckDuration(spec.window, kMinWindow, kMaxWindow, field, "window");
        !s.ok()) {
      return s;
    }
    if (spec.window_slices > kMaxWindowSlices) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".window_slices must be 0 (default ", kDefaultWindowSlices,
                       ") or 1..", kMaxWindowSlices, ", got ", spec.window_slices));
    }
    if (spec.window_slices == 0) spec.window_slices = kDefaultWindowSlices;
  } else if (spec.window_slices != 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".window_slices needs a window; got ",
                                                   spec.window_slices, " without one"));
  }
  if (spec.idle_ttl != absl::ZeroDuration()) {
    return CheckDuration(spec.idle_ttl, kMinIdleTtl, kMaxIdleTtl, field, "idle_ttl");
  }
  return absl::OkStatus();
}

int64_t SliceMicros(const FilterParams& spec) {
  const int64_t micros = absl::ToInt64Microseconds(spec.window) / spec.window_slices;
  return micros < 1 ? 1 : micros;
}

int64_t SliceStartMicros(const FilterParams& spec, absl::Time t) {
  const int64_t d = SliceMicros(spec);
  return FloorDiv(absl::ToUnixMicros(t), d) * d;
}

absl::Time SliceExpiry(const FilterParams& spec, int64_t slice_start_micros) {
  return absl::FromUnixMicros(slice_start_micros + SliceMicros(spec)) + spec.window;
}

uint32_t LiveSlices(const FilterParams& spec) {
  const int64_t d = SliceMicros(spec);
  const int64_t w = absl::ToInt64Microseconds(spec.window);
  return static_cast<uint32_t>(1 + (w + d - 1) / d);
}

FilterParams SliceChainSpec(const FilterParams& spec) {
  FilterParams slice;
  slice.capacity =
      spec.capacity / spec.window_slices + (spec.capacity % spec.window_slices != 0 ? 1 : 0);
  slice.error_rate = spec.error_rate / LiveSlices(spec);
  slice.expansion = spec.expansion;
  slice.non_scaling = spec.non_scaling;
  return slice;
}

uint64_t SliceOverflowCapacity(const FilterParams& spec, int64_t slice_start_micros, absl::Time now,
                               uint64_t items_in_slice, uint64_t previous_overflow,
                               uint64_t chain_capacity) {
  constexpr double kMargin = 1.5;
  constexpr uint64_t kFirstShare = 32;  // the least: 1/32 of the first sub-filter
  const int64_t d = SliceMicros(spec);
  const int64_t elapsed = std::clamp<int64_t>(absl::ToUnixMicros(now) - slice_start_micros, 1, d);
  const double rest = static_cast<double>(items_in_slice) * static_cast<double>(d - elapsed) /
                      static_cast<double>(elapsed) * kMargin;
  const uint64_t first = SliceChainSpec(spec).capacity;
  uint64_t capacity = first / kFirstShare + (first % kFirstShare != 0 ? 1 : 0);
  // Compared as doubles: `rest` may exceed what a uint64_t holds.
  if (rest > static_cast<double>(capacity)) {
    capacity = rest >= static_cast<double>(chain_capacity) ? chain_capacity
                                                           : static_cast<uint64_t>(rest) + 1;
  }
  if (previous_overflow > 0) {
    const uint64_t grown = previous_overflow > chain_capacity / spec.expansion
                               ? chain_capacity
                               : previous_overflow * spec.expansion;
    capacity = std::max(capacity, grown);
  }
  return std::clamp<uint64_t>(capacity, 1, chain_capacity);
}

}  // namespace bloom

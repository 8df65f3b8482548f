#include "bloom/filter_params.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bloom/sizing.h"
#include "bloom/slice_arena.h"
#include "bloom/window.h"

namespace bloom {
namespace {

// A window's slice expects capacity / window_slices items when the rate matches the hint, so
// its first sub-filter gets 3/4 of the slice's error budget (not 1/2): fewer bits per item in
// the steady state (window_benchmark), a tighter rate for the sub-filters of a surge.
constexpr double kWindowSliceTightening = 0.25;

// capacity * expansion^index, saturating at UINT64_MAX.
uint64_t SaturatingGrowth(uint64_t capacity, uint32_t expansion, int index) {
  uint64_t value = capacity;
  for (int i = 0; i < index; ++i) {
    if (value > std::numeric_limits<uint64_t>::max() / expansion) {
      return std::numeric_limits<uint64_t>::max();
    }
    value *= expansion;
  }
  return value;
}

}  // namespace

// What sub-filter `index` of a chain whose sub-filter i gets
// error_rate * (1 - tightening) * tightening^i must hold, and its shape.
static absl::StatusOr<ChainTarget> ChainTargetWith(const FilterParams& spec, int index,
                                                   double tightening);
static absl::StatusOr<SubFilterShape> ChainShape(const FilterParams& spec, int index,
                                                 double tightening);

absl::StatusOr<FilterParams> NormalizeSpec(const FilterParams& spec, absl::string_view field) {
  FilterParams out = spec;
  if (spec.capacity == 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".capacity must be at least 1"));
  }
  if (!(spec.error_rate > 0 && spec.error_rate < 1)) {  // also rejects NaN
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".error_rate must be greater than 0 and less than 1, got ", spec.error_rate));
  }
  if (spec.expansion > kMaxExpansion) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".expansion must be 0 (default ",
                                                   kDefaultExpansion, ") or 1..", kMaxExpansion,
                                                   ", got ", spec.expansion));
  }
  if (spec.non_scaling && spec.expansion > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".expansion must be 0 or 1 for a non_scaling filter, got ", spec.expansion));
  }
  if (out.expansion == 0) out.expansion = spec.non_scaling ? 1 : kDefaultExpansion;
  if (spec.kind != FilterKind::kBloom && spec.kind != FilterKind::kCuckoo) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".kind is not a filter kind"));
  }
  if (spec.cuckoo() && spec.window != absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field,
        ".window is not available for a CUCKOO filter: items leave it by Remove, and the "
        "whole filter by idle_ttl"));
  }
  if (absl::Status window = NormalizeWindow(out, field); !window.ok()) return window;
  return out;
}

absl::StatusOr<SubFilterShape> SubFilterShapeFor(const FilterParams& spec, int index) {
  if (spec.windowed()) {
    return ChainShape(SliceChainSpec(spec), index, kWindowSliceTightening);
  }
  return ChainShape(spec, index, kChainTightening);
}

absl::StatusOr<ChainTarget> ChainTargetFor(const FilterParams& spec, int index) {
  return ChainTargetWith(spec, index, kChainTightening);
}

static absl::StatusOr<ChainTarget> ChainTargetWith(const FilterParams& spec, int index,
                                                   double tightening) {
  if (index < 0 || index >= kMaxSubFilters || (spec.non_scaling && index > 0)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a filter has at most ", spec.non_scaling ? 1 : kMaxSubFilters,
                     " sub-filters; reserve a larger capacity or expansion"));
  }
  ChainTarget target;
  target.capacity = SaturatingGrowth(spec.capacity, spec.expansion, index);
  target.error_rate = spec.non_scaling
                          ? spec.error_rate
                          : spec.error_rate * (1 - tightening) * std::pow(tightening, index);
  return target;
}

static absl::StatusOr<SubFilterShape> ChainShape(const FilterParams& spec, int index,
                                                 double tightening) {
  absl::StatusOr<ChainTarget> target = ChainTargetWith(spec, index, tightening);
  if (!target.ok()) return target.status();
  SubFilterShape shape;
  shape.capacity = target->capacity;
  shape.error_rate = target->error_rate;
  absl::StatusOr<BlockedLayout> layout = ChooseLayout(shape.capacity, shape.error_rate);
  if (!layout.ok()) return layout.status();
  shape.layout = *layout;
  return shape;
}

absl::optional<ArenaShape> ArenaShapeFor(const FilterParams& spec) {
  if (!spec.windowed()) return absl::nullopt;
  absl::StatusOr<SubFilterShape> first = SubFilterShapeFor(spec, 0);
  if (!first.ok() || first->layout.bytes() < SliceArena::kMinSliceBytes) return absl::nullopt;
  // The unexpired slices, and one expired slice storage has not retired yet.
  return ArenaShape{first->layout, LiveSlices(spec) + 1};
}

}  // namespace bloom

// ScalableFilter::ComputeStats and the stats computed from counts (filter_stats.h).
#include "bloom/filter_stats.h"

#include <cmath>
#include <utility>

#include "bloom/scalable_filter.h"
#include "bloom/sizing.h"

namespace bloom {

ScalableFilterStats ScalableFilter::ComputeStats() const {
  std::vector<SubFilterStats> subs;
  const absl::Time now = windowed() ? window()->clock->Now() : absl::InfinitePast();
  absl::optional<bloomsync::ReaderMutexLock> lock;
  if (windowed()) lock.emplace(&window()->retire_mu);
  absl::InlinedVector<SubFilter*, 8> chain = LiveChain(now);  // newest first
  // Oldest first. Not std::ranges::reverse_view: clang 14 (the sanitizer builds) cannot
  // compile libstdc++ 12's ranges.
  for (size_t i = chain.size(); i-- > 0;) {
    SubFilter* sub = chain[i];
    const BlockedLayout layout = sub->bits().layout();
    const uint64_t set_bits = sub->bits().set_bits();
    SubFilterStats s;
    s.capacity = sub->shape().capacity;
    s.error_rate = sub->shape().error_rate;
    s.bits = layout.bits();
    s.hash_count = layout.hash_count;
    s.items_added = sub->items_added();
    s.fill_ratio = static_cast<double>(set_bits) / static_cast<double>(layout.bits());
    s.estimated_cardinality = EstimateCardinality(set_bits, layout);
    s.estimated_error_rate = sub->bits().EstimatedFalsePositiveRate();
    if (windowed()) s.slice_start = absl::FromUnixMicros(sub->slice().start_micros);
    subs.push_back(s);
  }
  return CombineSubFilterStats(std::move(subs));
}

SubFilterStats ExpectedSubFilterStats(const SubFilterShape& shape, uint64_t items_added) {
  const BlockedLayout& layout = shape.layout;
  SubFilterStats s;
  s.capacity = shape.capacity;
  s.error_rate = shape.error_rate;
  s.bits = layout.bits();
  s.hash_count = layout.hash_count;
  s.items_added = items_added;
  // E[set bits / bits] = 1 - exp(-lambda * (1 - (1 - 1/512)^k)), lambda = items per block
  // (the model EstimateCardinality inverts).
  const double per_block =
      static_cast<double>(items_added) / static_cast<double>(layout.num_blocks);
  const double per_item = 1 - std::pow(1.0 - 1.0 / kBlockBits, layout.hash_count);
  s.fill_ratio = -std::expm1(-per_block * per_item);
  s.estimated_cardinality = static_cast<double>(items_added);
  s.estimated_error_rate = BlockedFalsePositiveRate(per_block, layout.hash_count);
  return s;
}

ScalableFilterStats CombineSubFilterStats(std::vector<SubFilterStats> subs) {
  ScalableFilterStats stats;
  double set_bits_total = 0, bits_total = 0;
  double all_clear = 1;  // probability that no sub-filter answers "maybe"
  for (const SubFilterStats& s : subs) {
    stats.capacity = s.capacity > UINT64_MAX - stats.capacity ? UINT64_MAX  // saturating
                                                              : stats.capacity + s.capacity;
    stats.size_bytes += s.bits / 8;
    stats.items_added += s.items_added;
    stats.estimated_cardinality += s.estimated_cardinality;
    set_bits_total += s.fill_ratio * static_cast<double>(s.bits);
    bits_total += static_cast<double>(s.bits);
    all_clear *= 1 - s.estimated_error_rate;
  }
  stats.fill_ratio = bits_total == 0 ? 0 : set_bits_total / bits_total;
  stats.estimated_error_rate = 1 - all_clear;
  stats.sub_filters = std::move(subs);
  return stats;
}

}  // namespace bloom

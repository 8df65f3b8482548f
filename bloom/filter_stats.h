// What Stats reports about a filter: per sub-filter and in total, counted from the bits
// (ScalableFilter::ComputeStats) or expected from an item count (ExpectedSubFilterStats, for a
// filter that is not in memory).
//
// Thread-safety: plain values and pure functions.
#ifndef BLOOM_FILTER_STATS_H_
#define BLOOM_FILTER_STATS_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "bloom/filter_params.h"

namespace bloom {

struct SubFilterStats {
  uint64_t capacity = 0;
  double error_rate = 0;
  uint64_t bits = 0;
  uint32_t hash_count = 0;
  uint64_t items_added = 0;
  double fill_ratio = 0;
  double estimated_cardinality = 0;
  double estimated_error_rate = 0;
  absl::optional<absl::Time> slice_start;  // windowed filters only
  // Cuckoo tables only (cuckoo_filter.h): bits are fingerprint bits, hash_count 0,
  // items_added the copies held, fill_ratio the load.
  uint64_t buckets = 0;
  uint32_t fingerprint_bits = 0;
};

struct ScalableFilterStats {
  uint64_t capacity = 0;    // sum over sub-filters
  uint64_t size_bytes = 0;  // bytes of bits
  uint64_t items_added = 0;
  double estimated_cardinality = 0;
  double fill_ratio = 0;            // set bits / bits, over all sub-filters
  double estimated_error_rate = 0;  // 1 - prod_i (1 - estimated_error_rate_i)
  std::vector<SubFilterStats> sub_filters;
};

// What a sub-filter of `shape` holding `items_added` distinct items is expected to show,
// computed from the count instead of its bits (for a filter that is not in memory): fill and
// error rate from the blocked filter's Poisson model, cardinality = items_added.
SubFilterStats ExpectedSubFilterStats(const SubFilterShape& shape, uint64_t items_added);
// The totals over `subs`, as ScalableFilter::ComputeStats makes them.
ScalableFilterStats CombineSubFilterStats(std::vector<SubFilterStats> subs);

}  // namespace bloom

#endif  // BLOOM_FILTER_STATS_H_

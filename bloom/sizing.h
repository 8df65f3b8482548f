// Sizing of cache-line-blocked Bloom filters.
//
// Layout: the filter is an array of 512-bit blocks (one 64-byte cache line). An item selects one
// block and sets k bits chosen uniformly (with replacement) inside it, so an add or a query touches
// exactly one cache line.
//
// Why not the textbook formula: blocking concentrates keys unevenly over blocks, so a blocked
// filter sized with m = -n ln p / (ln 2)^2 misses its target FPR (about 1.6x at 1%). We size with
// the blocked filter's own FPR instead:
//
//   FPR(lambda, k) = sum_j Poisson(j; lambda) * f_k(j)
//   f_k(j)         = E[(X_{k*j} / 512)^k]
//
// where lambda = items per block and X_t is the number of occupied bits after t uniform bit
// throws into a 512-bit block (computed exactly by dynamic programming over the occupancy
// distribution, not with the (1 - e^{-kj/512})^k approximation, which underestimates by Jensen).
// ChooseLayout searches k in [1, 32] and the largest lambda with FPR <= p, which gives the fewest
// bits for the requested rate.
//
// Example:
//   absl::StatusOr<BlockedLayout> layout = ChooseLayout(/*capacity=*/1'000'000, 0.01);
//   // layout->num_blocks * 64 bytes, layout->hash_count bits per item.
//
// Thread-safety: all functions are thread-safe (an internal cache of f_k is mutex-guarded).
#ifndef BLOOM_SIZING_H_
#define BLOOM_SIZING_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace bloom {

inline constexpr uint32_t kBlockBits = 512;
inline constexpr uint32_t kBlockBytes = kBlockBits / 8;
inline constexpr uint32_t kBlockWords = kBlockBits / 64;
inline constexpr uint32_t kMaxHashCount = 32;
// Block indexes are derived from 32 hash bits, so a sub-filter has at most 2^32 blocks (256 GiB).
inline constexpr uint64_t kMaxBlocks = uint64_t{1} << 32;

struct BlockedLayout {
  uint64_t num_blocks = 0;  // >= 1
  uint32_t hash_count = 0;  // bits set per item, in [1, kMaxHashCount]

  uint64_t bytes() const { return num_blocks * kBlockBytes; }
  uint64_t bits() const { return num_blocks * kBlockBits; }
  friend bool operator==(const BlockedLayout&, const BlockedLayout&) = default;
};

// Expected false-positive rate of a blocked filter holding `items_per_block` items per block on
// average (Poisson mixture over block loads), with `hash_count` bits per item.
double BlockedFalsePositiveRate(double items_per_block, uint32_t hash_count);

// Cardinality estimate for a blocked filter from its fill: with Poisson block loads,
// E[set bits / bits] = 1 - exp(-lambda * (1 - (1 - 1/512)^k)), inverted for lambda.
double EstimateCardinality(uint64_t set_bits, const BlockedLayout& layout);

// The smallest layout whose expected FPR with `capacity` items is <= `error_rate`.
// InvalidArgument for capacity 0 or error_rate outside (0, 1); ResourceExhausted when the filter
// would need more than kMaxBlocks blocks.
absl::StatusOr<BlockedLayout> ChooseLayout(uint64_t capacity, double error_rate);

// Bits per item of the layout ChooseLayout picks for a large filter at `error_rate`.
double BlockedBitsPerItem(double error_rate);

// Reference points for docs/performance.md and the benchmarks:
// bits per item of a split-block Bloom filter (256-bit blocks of eight 32-bit words, one bit per
// word, k = 8; Apache Parquet/Impala) sized by its exact Poisson-mixture formula, and of a
// classic unblocked filter, -ln p / (ln 2)^2.
double SplitBlockBitsPerItem(double error_rate);
double StandardBitsPerItem(double error_rate);

}  // namespace bloom

#endif  // BLOOM_SIZING_H_

// Sliding time windows over a scalable chain (after Age-Partitioned Bloom Filters, Shtul,
// Baquero and Almeida 2020): the maths of which slice an instant falls in, when a slice's
// items are forgotten and what error rate each slice gets.
//
// A windowed filter (FilterParams::window > 0) keeps its items in time slices of
// d = window / window_slices (whole microseconds, rounded down), aligned to multiples of d since
// the Unix epoch. An add goes to the slice of its instant; slice [s, s + d) is forgotten at
// s + d + window. So an item added at t reads present up to t + window and is forgotten by
// t + window + d = t + window * (1 + 1/window_slices).
//
// At any instant at most LiveSlices() slices are unexpired (window_slices + 1 when d divides
// the window), and each gets error_rate / LiveSlices() of the error budget: the filter answers
// "maybe" for an absent item with probability at most error_rate at every moment. Inside a
// slice the sub-filters grow as a scalable chain does (scalable_filter.h) from a first one of
// capacity ceil(capacity / window_slices): `capacity` is the expected number of items per
// window, a sizing hint; a non_scaling windowed filter refuses an add beyond its slice's share.
// Since a slice usually holds just its share, its first sub-filter gets 3/4 of the slice's
// budget and sub-filter i (3/4) (1/4)^i (a plain chain: 1/2 and (1/2)^(i+1)): at 8 slices and
// 1% that is about 1.6x the bits per item of a plain filter holding the window's items
// (window_benchmark BM_WindowBitsPerItem), fewer than an even split, for a tighter rate in the
// sub-filters of a rate surge. A slice's
// further sub-filters are sized for the rest of the slice at its rate so far
// (SliceOverflowCapacity), not doubled as a plain chain's are. The slices'
// first sub-filters thus share one layout, so a query computes an item's probe once for all
// of them (BlockedBloomFilter::MightContainAny), and a large window keeps them interleaved in
// one slice arena (slice_arena.h), so that an item's blocks in all slices are adjacent.
//
// Example:
//   FilterParams spec{.capacity = 1'000'000, .error_rate = 0.01, .window = absl::Hours(24 * 7)};
//   spec = *NormalizeSpec(spec);                 // window_slices 0 -> kDefaultWindowSlices
//   int64_t start = SliceStartMicros(spec, absl::Now());
//   absl::Time forget_at = SliceExpiry(spec, start);
//
// Thread-safety: pure functions; Clock implementations are thread-safe.
#ifndef BLOOM_WINDOW_H_
#define BLOOM_WINDOW_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace bloom {

struct FilterParams;

inline constexpr uint32_t kDefaultWindowSlices = 8;
inline constexpr uint32_t kMaxWindowSlices = 64;
inline constexpr absl::Duration kMinWindow = absl::Seconds(1);
inline constexpr absl::Duration kMaxWindow = absl::Hours(24 * 3653);  // 10 years
inline constexpr absl::Duration kMinIdleTtl = absl::Seconds(1);
inline constexpr absl::Duration kMaxIdleTtl = absl::Hours(24 * 3653);

// Checks window, window_slices and idle_ttl of `spec` (InvalidArgument naming `field`.window
// etc.), truncates the durations to whole microseconds (as stored) and replaces window_slices 0
// by the default when there is a window. Called by NormalizeSpec.
absl::Status NormalizeWindow(FilterParams& spec, absl::string_view field);

// Slice length d in microseconds (>= 1); spec normalized and windowed.
int64_t SliceMicros(const FilterParams& spec);
// The start of the slice holding instant `t`, in Unix microseconds.
int64_t SliceStartMicros(const FilterParams& spec, absl::Time t);
// When the items of the slice starting at `slice_start_micros` are forgotten.
absl::Time SliceExpiry(const FilterParams& spec, int64_t slice_start_micros);
// Most slices unexpired at one instant: 1 + ceil(window / d).
uint32_t LiveSlices(const FilterParams& spec);
// The spec of one slice's scalable chain: capacity ceil(capacity / window_slices), error rate
// error_rate / LiveSlices(), the spec's expansion and non_scaling, no window.
FilterParams SliceChainSpec(const FilterParams& spec);

// The capacity of a slice's next sub-filter once the slice outgrew its first one: what the
// rest of the slice will bring at the rate the slice has seen so far (`items_in_slice` since
// `slice_start_micros`, by `now`), with a margin of half again; at least 1/32 of the first
// sub-filter's capacity and `expansion` times the slice's previous overflow sub-filter
// (`previous_overflow`, 0 for none), so a surge that keeps growing still gets a geometric
// chain; at most `chain_capacity`, the plain chain's size for that position. Its error rate
// stays the position's, so the slice's error budget holds whatever the capacities.
// Why: at a steady rate of `capacity` per window, a slice overflows by a few items near its
// end about every other time (a batch straddles its end, the rate jitters). The chain's rule
// gave those few items a sub-filter of twice the first one's capacity (2.4 times its bits, at
// its tighter rate), and one more cache miss per query outside the slice arena
// (slice_arena.h).
uint64_t SliceOverflowCapacity(const FilterParams& spec, int64_t slice_start_micros, absl::Time now,
                               uint64_t items_in_slice, uint64_t previous_overflow,
                               uint64_t chain_capacity);

}  // namespace bloom

#endif  // BLOOM_WINDOW_H_

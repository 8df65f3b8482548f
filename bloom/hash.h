// Item hashing: one 64-bit XXH3 hash per item, seeded per filter.
//
// Every filter draws a random 64-bit seed when it is reserved and stores it with its bits, so the
// bit positions of an item differ between filters and nobody can precompute items that pollute a
// filter (a "hash flooding" attack on the false-positive rate).
//
// An item is its bytes: the text "a" and the bytes "a" hash alike.
// Thread-safety: pure functions.
#ifndef BLOOM_HASH_H_
#define BLOOM_HASH_H_

// Inline XXH3 from Debian's header instead of calling libxxhash.so: on 8-32 byte items the
// call and dispatch cost as much as the hash (measured with benchmarks/filter_benchmark).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdint>

#include "absl/strings/string_view.h"

namespace bloom {

inline uint64_t HashItem(absl::string_view item, uint64_t seed) {
  return XXH3_64bits_withSeed(item.data(), item.size(), seed);
}

// splitmix64's finaliser (Steele et al.): a bijection whose output bits are close to independent.
// Derives further hashes from an item's one (bit positions, fingerprints, buckets).
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 2^64 / the golden ratio: successive multiples of it are spread evenly over 64 bits, which is
// how a cuckoo filter derives a further table's hash, or a relocation step's slot, from one hash.
inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// A uniform value in [0, n) from 64 uniform bits (Lemire's multiply-shift, "fastrange").
inline uint64_t FastRange(uint64_t x, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * n) >> 64);
}

}  // namespace bloom

#endif  // BLOOM_HASH_H_

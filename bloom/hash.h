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

}  // namespace bloom

#endif  // BLOOM_HASH_H_

// Helpers shared by the bloom layer's tests (one program: bloom_test).
#ifndef BLOOM_TESTING_H_
#define BLOOM_TESTING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/random/random.h"

namespace bloom {

// `n` item hashes drawn uniformly from `gen`, standing in for hashed items.
inline std::vector<uint64_t> RandomHashes(size_t n, absl::BitGen& gen) {
  std::vector<uint64_t> hashes(n);
  for (uint64_t& hash : hashes) hash = absl::Uniform<uint64_t>(gen);
  return hashes;
}

}  // namespace bloom

#endif  // BLOOM_TESTING_H_

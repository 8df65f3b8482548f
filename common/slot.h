// A filter's slot: which part of a sharded deployment's key space its name falls in. The shard
// map (sharding/shard_map.h) says which group owns each slot; every client language computes
// the same slot to send a call straight to its owner, so the function is fixed forever:
//
//   slot = CRC-32(hashed part of the name) mod slot_count
//
// CRC-32 is the IEEE/zlib one (reflected polynomial 0xEDB88320, initial value and final XOR
// 0xFFFFFFFF; "123456789" gives 0xCBF43926): Python's zlib.crc32, Go's crc32.ChecksumIEEE,
// Java's java.util.zip.CRC32, Node's zlib.crc32. The hashed part is the whole name (its UTF-8
// bytes), unless the name holds a hash tag as Redis Cluster's keys do: when the name has a `{`
// and a `}` after it with at least one byte between them, only the bytes between the first `{`
// and the first `}` after it are hashed. So "feed:{user42}:seen" and "feed:{user42}:liked" share
// a slot, and a Merge of them never crosses groups.
//
//   uint32_t slot = slots::SlotOf("feed:{user42}:seen", 4096);
//
// Header-only: the C++ client library compiles it in without the server's common/ library.
//
// Thread-safety: pure functions.
#ifndef COMMON_SLOT_H_
#define COMMON_SLOT_H_

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace slots {

// The slot count a deployment gets unless told otherwise, and the most it may have.
inline constexpr uint32_t kDefaultSlotCount = 4096;
inline constexpr uint32_t kMaxSlotCount = 16384;

namespace internal {

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1U) != 0 ? (crc >> 1) ^ 0xEDB88320U : crc >> 1;
    table[byte] = crc;
  }
  return table;
}

inline constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

}  // namespace internal

// CRC-32 (IEEE) of `bytes`.
inline uint32_t Crc32(absl::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFU;
  for (const char c : bytes) {
    crc = internal::kCrcTable[(crc ^ static_cast<unsigned char>(c)) & 0xFFU] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFU;
}

// The part of `name` that is hashed: its hash tag, or the whole name.
inline absl::string_view HashedPart(absl::string_view name) {
  const size_t open = name.find('{');
  if (open == absl::string_view::npos) return name;
  const size_t close = name.find('}', open + 1);
  if (close == absl::string_view::npos || close == open + 1) return name;
  return name.substr(open + 1, close - open - 1);
}

// `name`'s slot among `slot_count` (0 counts as 1).
inline uint32_t SlotOf(absl::string_view name, uint32_t slot_count) {
  return Crc32(HashedPart(name)) % (slot_count == 0 ? 1 : slot_count);
}

}  // namespace slots

#endif  // COMMON_SLOT_H_

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
// Thread-safety: pure functions.
#ifndef COMMON_SLOT_H_
#define COMMON_SLOT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace slots {

// The slot count a deployment gets unless told otherwise, and the most it may have.
inline constexpr uint32_t kDefaultSlotCount = 4096;
inline constexpr uint32_t kMaxSlotCount = 16384;

// CRC-32 (IEEE) of `bytes`.
uint32_t Crc32(absl::string_view bytes);
// The part of `name` that is hashed: its hash tag, or the whole name.
absl::string_view HashedPart(absl::string_view name);
// `name`'s slot among `slot_count` (at least 1).
uint32_t SlotOf(absl::string_view name, uint32_t slot_count);

}  // namespace slots

#endif  // COMMON_SLOT_H_

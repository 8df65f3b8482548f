#include "storage/format/cuckoo_journal.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace storage {
namespace {

static_assert(std::endian::native == std::endian::little, "packed fields are little-endian");

constexpr uint8_t kVarintVersion = 2;
constexpr uint8_t kPackedVersion = 3;
constexpr uint8_t kSlotRun = 0;
constexpr uint8_t kStashRun = 1;
constexpr size_t kMaxVarintBytes = 10;
constexpr size_t kChecksumBytes = sizeof(uint64_t);
// The bit writer keeps fewer than 8 pending bits, so one put of up to 56 bits fits its 64-bit
// word. A position (a slot of kMaxCuckooBuckets buckets of 4, or a stash entry) fits 40 bits;
// a decoded change never holds more, so whatever is decoded can be encoded again.
constexpr int kMaxPutBits = 56;
constexpr int kMaxPositionBits = 40;
constexpr int kMaxValueBits = 32;
constexpr uint64_t kPositionLimit = uint64_t{1} << kMaxPositionBits;
static_assert(bloom::kMaxCuckooBuckets * bloom::kCuckooBucketSlots + bloom::kStashEntries <=
              kPositionLimit);

int BitsFor(uint64_t largest) { return std::max(1, static_cast<int>(std::bit_width(largest))); }

char* PutVarint(char* out, uint64_t value) {
  while (value >= 0x80) {
    *out++ = static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<char>(value);
  return out;
}

bool GetVarint(absl::string_view& in, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Appends fields least significant bit first. Each Put stores a whole word, so the buffer needs
// 8 bytes of room past the last byte written.
class BitWriter {
 public:
  explicit BitWriter(char* out) : out_(out) {}
  void Put(uint64_t value, int bits) {  // value < 2^bits, bits <= kMaxPutBits
    pending_ |= value << pending_bits_;
    pending_bits_ += bits;
    std::memcpy(out_, &pending_, sizeof(pending_));
    const int whole_bytes = pending_bits_ / 8;  // at most 7
    out_ += whole_bytes;
    pending_ >>= 8 * whole_bytes;
    pending_bits_ %= 8;
  }
  // Past the last byte written, a partial one included.
  [[nodiscard]] char* Finish() const { return out_ + (pending_bits_ > 0 ? 1 : 0); }

 private:
  char* out_;
  uint64_t pending_ = 0;
  int pending_bits_ = 0;
};

// Reads what BitWriter wrote; the caller has checked that `in` holds every field it asks for.
class BitReader {
 public:
  explicit BitReader(absl::string_view in) : in_(in) {}
  uint64_t Get(int bits) {  // bits <= kMaxPutBits
    const size_t byte = bit_ / 8;
    uint64_t word = 0;
    std::memcpy(&word, in_.data() + byte, std::min(sizeof(word), in_.size() - byte));
    const int shift = static_cast<int>(bit_ % 8);
    bit_ += bits;
    return (word >> shift) & ((uint64_t{1} << bits) - 1);
  }

 private:
  absl::string_view in_;
  size_t bit_ = 0;
};

struct RunShape {
  size_t begin = 0;
  size_t end = 0;
  int position_bits = 0;
  int value_bits = 0;
};

absl::Status BadRecord(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("cuckoo journal record ", why));
}

absl::Status DecodeSlotRun(uint32_t table, uint64_t count, absl::string_view& body,
                           std::vector<bloom::CuckooChange>& changes) {
  if (body.size() < 2) return BadRecord("is truncated in a run's widths");
  const int position_bits = static_cast<uint8_t>(body[0]);
  const int value_bits = static_cast<uint8_t>(body[1]);
  body.remove_prefix(2);
  if (position_bits < 1 || position_bits > kMaxPositionBits || value_bits < 1 ||
      value_bits > kMaxValueBits) {
    return BadRecord(absl::StrCat("has fields of ", position_bits, " and ", value_bits, " bits"));
  }
  const uint64_t width = position_bits + value_bits;
  if (count > body.size() * 8 / width) {
    return BadRecord(
        absl::StrCat("holds ", body.size(), " bytes for ", count, " changes of ", width, " bits"));
  }
  const size_t bytes = (count * width + 7) / 8;
  BitReader in(body.substr(0, bytes));
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t position = in.Get(position_bits);
    const auto value = static_cast<uint32_t>(in.Get(value_bits));
    changes.push_back({.table = table, .after = value, .position = position});
  }
  body.remove_prefix(bytes);
  return absl::OkStatus();
}

absl::Status DecodeStashRun(uint32_t table, uint64_t count, absl::string_view& body,
                            std::vector<bloom::CuckooChange>& changes) {
  if (count > body.size() / 3) return BadRecord("holds too few bytes for its stash entries");
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t position = 0, value = 0, bucket = 0;
    if (!GetVarint(body, position) || !GetVarint(body, value) || !GetVarint(body, bucket) ||
        position >= kPositionLimit || value > std::numeric_limits<uint32_t>::max()) {
      return BadRecord("holds a bad stash entry");
    }
    changes.push_back({.table = table,
                       .after = static_cast<uint32_t>(value),
                       .stash = true,
                       .position = position,
                       .stash_bucket = bucket});
  }
  return absl::OkStatus();
}

absl::Status DecodePacked(absl::string_view body, std::vector<bloom::CuckooChange>& changes) {
  uint64_t runs = 0;
  if (!GetVarint(body, runs) || runs > body.size() / 3) return BadRecord("has a bad run count");
  for (uint64_t run = 0; run < runs; ++run) {
    uint64_t table = 0, count = 0;
    if (!GetVarint(body, table) || table >= uint64_t{bloom::kMaxSubFilters} || body.empty()) {
      return BadRecord("names a bad table");
    }
    const auto kind = static_cast<uint8_t>(body.front());
    body.remove_prefix(1);
    if (!GetVarint(body, count) || count == 0) return BadRecord("has a run of no changes");
    absl::Status decoded =
        kind == kSlotRun    ? DecodeSlotRun(static_cast<uint32_t>(table), count, body, changes)
        : kind == kStashRun ? DecodeStashRun(static_cast<uint32_t>(table), count, body, changes)
                            : BadRecord(absl::StrCat("has a run of kind ", kind));
    if (!decoded.ok()) return decoded;
  }
  if (!body.empty()) return BadRecord("has trailing bytes");
  return absl::OkStatus();
}

absl::Status DecodeVarints(absl::string_view body, std::vector<bloom::CuckooChange>& changes) {
  uint32_t count = 0;
  // Each change takes at least 4 bytes.
  if (body.size() < sizeof(count)) return BadRecord("has a bad header");
  std::memcpy(&count, body.data(), sizeof(count));
  body.remove_prefix(sizeof(count));
  if (count > body.size() / 4) return BadRecord("has a bad header");
  changes.resize(count);
  for (bloom::CuckooChange& change : changes) {
    uint64_t table = 0, after = 0;
    if (!GetVarint(body, table) || !GetVarint(body, change.position) || !GetVarint(body, after) ||
        !GetVarint(body, change.stash_bucket) || table >= uint64_t{bloom::kMaxSubFilters} ||
        change.position >= kPositionLimit || after > std::numeric_limits<uint32_t>::max()) {
      return BadRecord("holds a bad change");
    }
    change.table = static_cast<uint32_t>(table);
    change.after = static_cast<uint32_t>(after);
  }
  if (!body.empty()) return BadRecord("has trailing bytes");
  return absl::OkStatus();
}

}  // namespace

std::string EncodeCuckooJournalRecord(absl::Span<const bloom::CuckooChange> changes) {
  // First the runs and their widths, so the record is written once into its final size.
  absl::InlinedVector<RunShape, 4> runs;
  size_t bytes = 1 + kMaxVarintBytes + kChecksumBytes + sizeof(uint64_t);  // + BitWriter's room
  for (size_t begin = 0; begin < changes.size();) {
    const bloom::CuckooChange& first = changes[begin];
    uint64_t largest_position = 0;
    uint32_t largest_value = 0;
    size_t end = begin;
    for (; end < changes.size() && changes[end].table == first.table &&
           changes[end].stash == first.stash;
         ++end) {
      largest_position = std::max(largest_position, changes[end].position);
      largest_value = std::max(largest_value, changes[end].after);
    }
    const RunShape run{begin, end, BitsFor(largest_position), BitsFor(largest_value)};
    bytes += 2 * kMaxVarintBytes + 3;
    bytes += first.stash ? (end - begin) * 3 * kMaxVarintBytes
                         : ((end - begin) * (run.position_bits + run.value_bits) + 7) / 8;
    runs.push_back(run);
    begin = end;
  }
  std::string record(bytes, '\0');
  char* at = record.data();
  *at++ = static_cast<char>(kPackedVersion);
  at = PutVarint(at, runs.size());
  for (const RunShape& run : runs) {
    const bloom::CuckooChange& first = changes[run.begin];
    at = PutVarint(at, first.table);
    *at++ = static_cast<char>(first.stash ? kStashRun : kSlotRun);
    at = PutVarint(at, run.end - run.begin);
    if (first.stash) {
      for (size_t i = run.begin; i < run.end; ++i) {
        at = PutVarint(at, changes[i].position);
        at = PutVarint(at, changes[i].after);
        at = PutVarint(at, changes[i].stash_bucket);
      }
      continue;
    }
    *at++ = static_cast<char>(run.position_bits);
    *at++ = static_cast<char>(run.value_bits);
    BitWriter out(at);
    if (run.position_bits + run.value_bits <= kMaxPutBits) {
      for (size_t i = run.begin; i < run.end; ++i) {
        out.Put(changes[i].position | uint64_t{changes[i].after} << run.position_bits,
                run.position_bits + run.value_bits);
      }
    } else {
      for (size_t i = run.begin; i < run.end; ++i) {
        out.Put(changes[i].position, run.position_bits);
        out.Put(changes[i].after, run.value_bits);
      }
    }
    at = out.Finish();
  }
  const uint64_t checksum = XXH3_64bits(record.data(), at - record.data());
  std::memcpy(at, &checksum, sizeof(checksum));
  record.resize(at + sizeof(checksum) - record.data());
  return record;
}

absl::Status DecodeCuckooJournalRecord(absl::string_view bytes,
                                       std::vector<bloom::CuckooChange>& changes) {
  changes.clear();
  if (bytes.size() < 1 + kChecksumBytes) return BadRecord("is truncated");
  const absl::string_view payload = bytes.substr(0, bytes.size() - kChecksumBytes);
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + payload.size(), sizeof(stored));
  if (stored != XXH3_64bits(payload.data(), payload.size())) {
    return BadRecord("checksum mismatch");
  }
  const auto version = static_cast<uint8_t>(payload.front());
  absl::Status decoded = version == kPackedVersion ? DecodePacked(payload.substr(1), changes)
                         : version == kVarintVersion
                             ? DecodeVarints(payload.substr(1), changes)
                             : BadRecord(absl::StrCat("has version ", version));
  if (!decoded.ok()) changes.clear();
  return decoded;
}

bool IsCuckooJournalRecord(absl::string_view bytes) {
  if (bytes.empty()) return false;
  const auto version = static_cast<uint8_t>(bytes.front());
  return version == kVarintVersion || version == kPackedVersion;
}

}  // namespace storage

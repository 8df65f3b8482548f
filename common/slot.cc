// Slots of filter names (common/slot.h).
#include "common/slot.h"

#include <array>

namespace slots {

namespace {

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1U) != 0 ? (crc >> 1) ^ 0xEDB88320U : crc >> 1;
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

}  // namespace

uint32_t Crc32(absl::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFU;
  for (const char c : bytes) {
    crc = kCrcTable[(crc ^ static_cast<unsigned char>(c)) & 0xFFU] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFU;
}

absl::string_view HashedPart(absl::string_view name) {
  const size_t open = name.find('{');
  if (open == absl::string_view::npos) return name;
  const size_t close = name.find('}', open + 1);
  if (close == absl::string_view::npos || close == open + 1) return name;
  return name.substr(open + 1, close - open - 1);
}

uint32_t SlotOf(absl::string_view name, uint32_t slot_count) {
  return Crc32(HashedPart(name)) % (slot_count == 0 ? 1 : slot_count);
}

}  // namespace slots

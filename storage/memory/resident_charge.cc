#include "storage/memory/resident_charge.h"

#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"

namespace storage {

uint64_t RecordBitsBytes(const FilterRecord& record) {
  if (record.spec.cuckoo()) {
    uint64_t bytes = 0;
    for (const SubFilterRecord& table : record.sub_filters) {
      bytes += CuckooTableCharge({table.num_blocks, static_cast<uint32_t>(table.hash_count)});
    }
    return bytes;
  }
  const absl::optional<bloom::ArenaShape> arena = bloom::ArenaShapeFor(record.spec);
  uint64_t bytes = arena.has_value() ? arena->bytes() : 0;
  for (size_t i = 0; i < record.sub_filters.size(); ++i) {
    const SubFilterRecord& sub = record.sub_filters[i];
    const bloom::BlockedLayout layout{sub.num_blocks, sub.hash_count};
    // A slice's first sub-filter (a slice retires whole, so the record's first is one too).
    const bool slice_first =
        i == 0 || sub.slice_start_micros != record.sub_filters[i - 1].slice_start_micros;
    if (!(arena.has_value() && slice_first && layout == arena->layout)) bytes += layout.bytes();
  }
  return bytes;
}

absl::Status CheckResidentCharge(uint64_t bytes, absl::string_view name) {
  if (bytes <= kMaxResidentChargeBytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("filter '", name, "' would take ", bytes, " bytes in memory; at most ",
                   kMaxResidentChargeBytes, " bytes (128 GiB) per filter are supported"));
}

}  // namespace storage

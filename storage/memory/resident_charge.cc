#include "storage/memory/resident_charge.h"

#include "absl/strings/str_cat.h"
#include "storage/filter/filter_kind.h"

namespace storage {

uint64_t RecordBitsBytes(const FilterRecord& record) {
  return FilterKind::Of(record.spec).BitsBytes(record);
}

absl::Status CheckResidentCharge(uint64_t bytes, absl::string_view name) {
  if (bytes <= kMaxResidentChargeBytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("filter '", name, "' would take ", bytes, " bytes in memory; at most ",
                   kMaxResidentChargeBytes, " bytes (128 GiB) per filter are supported"));
}

}  // namespace storage

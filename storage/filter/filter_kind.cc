#include "storage/filter/filter_kind.h"

#include <cstddef>

#include "storage/memory/resident_charge.h"

namespace storage {

uint64_t BuiltFilter::charge() const {
  if (cuckoo != nullptr) {
    uint64_t bytes = 0;
    const int tables = cuckoo->num_tables();
    for (int i = 0; i < tables; ++i) bytes += CuckooTableCharge(*cuckoo->LayoutOf(i));
    return ResidentCharge(bytes, static_cast<size_t>(tables));
  }
  return chain == nullptr ? 0 : ResidentCharge(chain->size_bytes(), chain->num_sub_filters());
}

}  // namespace storage

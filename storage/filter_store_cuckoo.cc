// FilterStore's calls that only CUCKOO filters have (filter_store.h): Remove and Count. The
// filter's own side is in stored_filter_cuckoo.cc.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/filter_store.h"

namespace storage {
namespace {

absl::Status NotCuckoo(absl::string_view name, absl::string_view call) {
  return absl::FailedPreconditionError(absl::StrCat(
      call, " needs a CUCKOO filter; '", name,
      "' is a BLOOM filter, which cannot forget or count items (reserve one with kind CUCKOO)"));
}

std::vector<uint64_t> HashItems(const StoredFilter& filter,
                                absl::Span<const absl::string_view> items) {
  std::vector<uint64_t> hashes(items.size());
  for (size_t i = 0; i < items.size(); ++i) hashes[i] = filter.Hash(items[i]);
  return hashes;
}

}  // namespace

absl::StatusOr<std::vector<bool>> FilterStore::RemoveItems(
    absl::string_view name, absl::Span<const absl::string_view> items, bool defer_sync) {
  absl::StatusOr<std::vector<bool>> removed;
  {
    bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
    RETURN_IF_ERROR(CheckOpen());
    RETURN_IF_ERROR(CheckWritable());
    RETURN_IF_ERROR(ValidateFilterName(name));
    // An evicted filter answers EvictedError: look it up again, which loads it.
    for (int attempt = 0; attempt < kDeleteRaceRetries; ++attempt) {
      ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, FindUsable(name));
      if (filter->cuckoo() == nullptr) return NotCuckoo(name, "Remove");
      removed = filter->CuckooRemove(HashItems(*filter, items), options_.sync && !defer_sync);
      if (!StoredFilter::IsEvicted(removed.status())) break;
    }
  }
  if (removed.ok() && !defer_sync) RETURN_IF_ERROR(WaitReplicated());  // holding no lock
  return removed;
}

absl::StatusOr<std::vector<uint32_t>> FilterStore::Count(
    absl::string_view name, absl::Span<const absl::string_view> items) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  RETURN_IF_ERROR(ValidateFilterName(name));
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, FindUsable(name));
  if (filter->cuckoo() == nullptr) return NotCuckoo(name, "Count");
  return filter->CuckooCount(HashItems(*filter, items));
}

}  // namespace storage

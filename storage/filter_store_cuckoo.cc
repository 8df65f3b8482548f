// FilterStore's calls that only CUCKOO filters have (filter_store.h): Remove and Count. The
// filter's own side is in stored_filter_cuckoo.cc, a remove's lookup in operation_batch.cc.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/filter_store.h"
#include "storage/write/operation_batch.h"

namespace storage {
namespace {

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
    // A batch of one, as Add: the path of a Pipeline's removes.
    ASSIGN_OR_RETURN(std::unique_ptr<OperationBatch> batch, StartBatch(defer_sync));
    removed = batch->RemoveItems(name, items);
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
  RETURN_IF_ERROR(filter->RequireCuckoo("Count"));
  return filter->CuckooCount(HashItems(*filter, items));
}

}  // namespace storage

// FilterStore's ReserveLike and Merge (filter_store.h): filters made alike, and their union.
//
// A filter made like another shares its spec and seed, so the same item sets the same bits in
// both, and ORing their bits gives a filter that answers "maybe" for every item of either
// (StoredFilter::Merge does the OR and its durable write). Filters imported from one dump are
// alike too (the dump carries the seed).
//
// Sources are read as Export reads them: pinned (PinChain), without their locks, kept alive by
// their shared_ptr even if deleted meanwhile. The target's own locks keep its checkpoints,
// eviction and Delete out of the merge; a target evicted just before is looked up again.
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/filter_store.h"

namespace storage {

absl::StatusOr<FilterStore::ReserveResult> FilterStore::ReserveLike(absl::string_view name,
                                                                    absl::string_view like,
                                                                    bool defer_ack) {
  absl::StatusOr<ReserveResult> result;
  {
    bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
    RETURN_IF_ERROR(CheckOpen());
    RETURN_IF_ERROR(CheckWritable());
    RETURN_IF_ERROR(ValidateFilterName(name));
    RETURN_IF_ERROR(ValidateFilterName(like, "like"));
    ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> model, FindUsable(like));
    result = ReserveWith(name, model->spec(), model->seed(), like);
  }
  if (result.ok() && !defer_ack) RETURN_IF_ERROR(WaitReplicated());  // holding no lock
  return result;
}

absl::StatusOr<FilterStore::ReserveResult> FilterStore::ReserveLikeRecord(
    absl::string_view name, const FilterRecord& like, absl::string_view like_name, bool defer_ack) {
  absl::StatusOr<ReserveResult> result;
  {
    bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
    RETURN_IF_ERROR(CheckOpen());
    RETURN_IF_ERROR(CheckWritable());
    RETURN_IF_ERROR(ValidateFilterName(name));
    ASSIGN_OR_RETURN(const bloom::FilterParams spec, bloom::NormalizeSpec(like.spec, "like"));
    result = ReserveWith(name, spec, like.seed, like_name);
  }
  if (result.ok() && !defer_ack) RETURN_IF_ERROR(WaitReplicated());  // holding no lock
  return result;
}

absl::StatusOr<FilterInfo> FilterStore::Merge(absl::string_view target,
                                              absl::Span<const std::string> sources,
                                              bool defer_ack) {
  absl::StatusOr<FilterInfo> info = MergeLocked(target, sources);
  if (info.ok() && !defer_ack) RETURN_IF_ERROR(WaitReplicated());  // holding no lock
  return info;
}

absl::StatusOr<FilterInfo> FilterStore::MergeLocked(absl::string_view target,
                                                    absl::Span<const std::string> sources) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  RETURN_IF_ERROR(CheckWritable());
  RETURN_IF_ERROR(ValidateFilterName(target, "target"));
  if (sources.empty()) return absl::InvalidArgumentError("sources must not be empty");
  if (sources.size() > kMaxMergeSources) {
    return absl::InvalidArgumentError(
        absl::StrCat("sources names ", sources.size(), " filters; at most ", kMaxMergeSources));
  }
  absl::flat_hash_set<absl::string_view> seen;
  for (const std::string& source : sources) {
    RETURN_IF_ERROR(ValidateFilterName(source, "sources"));
    if (source == target) {
      return absl::InvalidArgumentError(absl::StrCat("sources name the target '", target,
                                                     "': a filter is not merged into itself"));
    }
    // Its items would count twice.
    if (!seen.insert(source).second) {
      return absl::InvalidArgumentError(absl::StrCat("sources name '", source, "' twice"));
    }
  }
  // Each source pinned while it is read; unpinned however this returns.
  std::vector<std::shared_ptr<StoredFilter>> pinned;
  absl::Cleanup unpin = [&pinned] {
    for (const std::shared_ptr<StoredFilter>& filter : pinned) filter->UnpinChain();
  };
  std::vector<StoredFilter::MergeSource> merged;
  merged.reserve(sources.size());
  for (const std::string& source : sources) {
    ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, FindUsable(source));
    RETURN_IF_ERROR(filter->PinChain().status());
    pinned.push_back(filter);
    merged.push_back({source, filter->filter()});
  }
  // A target evicted between the lookup and the merge is loaded again (as an add does).
  for (int attempt = 0; attempt < kDeleteRaceRetries; ++attempt) {
    ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> into, FindUsable(target));
    absl::Status status = into->Merge(merged, options_.sync);
    if (StoredFilter::IsEvicted(status)) continue;
    RETURN_IF_ERROR(status);
    // A merge writes pages, not journal records: a slot move reading this filter's journal
    // must copy it whole again (filter_store_journal.cc).
    journal_holds_.Release(into->generation());
    return into->Info();
  }
  return absl::UnavailableError(
      absl::StrCat("filter '", target, "' was evicted from memory throughout the merge; retry it"));
}

}  // namespace storage

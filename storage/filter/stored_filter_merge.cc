// StoredFilter::Merge (stored_filter.h): the union of compatible Bloom filters.
//
// Two filters with one seed and one layout set the same bits for the same item, so the union of
// their items is the OR of their bits. Merge ORs every source page into the target's, with the
// target's checkpoint and apply locks held:
//   - checkpoint_mu_ for the whole merge, so no checkpoint, eviction or Delete interleaves, and
//     the checkpoint that ends the merge is the next one the filter writes;
//   - apply_mu_ exclusively while the chain grows and the bits are ORed, so no add is half
//     applied across it; it is released before the write, as in any checkpoint.
// The union then goes to disk as one checkpoint whose pages and record are one RocksDB batch
// (PageWrites::kOneBatch): a crash leaves the target as it was or the whole union, never part of
// it, and a follower applies it as one batch too. (Unions of more than 64 MiB of changed pages
// go out in bounded batches instead, as any checkpoint: that much is not held twice in memory.)
// Before that write returns, checks may already see merged bits: a merge is not acknowledged until
// then, so a crash that loses them loses nothing a client was told it has. A failed write leaves
// the union in memory with its pages dirty (the next checkpoint writes them) and answers the
// write's error.
#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/filter/stored_filter.h"

namespace storage {
namespace {

std::string DescribeLayout(const bloom::BlockedLayout& layout) {
  return absl::StrCat(layout.num_blocks, " blocks, ", layout.hash_count, " hashes");
}

}  // namespace

absl::Status StoredFilter::Merge(absl::Span<const MergeSource> sources, bool sync) {
  // The merge's checkpoint must not be overwritten later by a pending creation record.
  RETURN_IF_ERROR(EnsurePersisted(sync));
  bloomsync::MutexLock checkpoint_lock(&checkpoint_mu_);
  {
    bloomsync::WriterMutexLock apply(&apply_mu_);
    RETURN_IF_ERROR(Addable());
    if (!kind().mergeable()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "filter '", name(), "' is a ", kind().name(), " filter: Merge takes BLOOM filters only"));
    }
    if (windowed()) {
      return absl::FailedPreconditionError(
          absl::StrCat("filter '", name(), "' has a window: windowed filters cannot be merged"));
    }
    int longest = chain_.num_sub_filters();
    for (const MergeSource& source : sources) {
      if (source.filter->windowed()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "filter '", source.name, "' has a window: windowed filters cannot be merged"));
      }
      if (source.filter->seed() != chain_.seed()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "filter '", source.name, "' hashes with another seed than '", name(),
            "': only filters made alike merge (Reserve with like, or Import of one dump)"));
      }
      longest = std::max(longest, source.filter->num_sub_filters());
    }
    // The target grows first, as an add would: each new sub-filter is charged and its record
    // written before it is linked (PersistNewSubFilter). Empty sub-filters change no answer.
    while (chain_.num_sub_filters() < longest) {
      if (chain_.spec().non_scaling) {
        return absl::FailedPreconditionError(
            absl::StrCat("filter '", name(), "' is non-scaling with ", chain_.num_sub_filters(),
                         " sub-filter(s); a source has ", longest));
      }
      ASSIGN_OR_RETURN(std::unique_ptr<bloom::SubFilter> sub, chain_.MakeNextSubFilter());
      RETURN_IF_ERROR(PersistNewSubFilter(*sub, sync));
      chain_.AppendSubFilter(std::move(sub));
    }
    // Every shape is checked before any bit changes.
    for (const MergeSource& source : sources) {
      for (const bloom::SubFilter* from = source.filter->first(); from != nullptr;
           from = from->next()) {
        const bloom::BlockedLayout want = chain_.sub_filter(from->index())->bits().layout();
        const bloom::BlockedLayout have = from->bits().layout();
        if (want.num_blocks != have.num_blocks || want.hash_count != have.hash_count) {
          return absl::FailedPreconditionError(
              absl::StrCat("sub-filter ", from->index(), " of '", source.name, "' has ",
                           DescribeLayout(have), ", of '", name(), "' ", DescribeLayout(want)));
        }
      }
    }
    std::string page;
    for (const MergeSource& source : sources) {
      for (const bloom::SubFilter* from = source.filter->first(); from != nullptr;
           from = from->next()) {
        bloom::SubFilter* into = chain_.sub_filter(from->index());
        bloom::BlockedBloomFilter& bits = into->bits();
        for (uint64_t p = 0; p < bits.num_pages(); ++p) {
          page.resize(bits.page_size(p));
          from->bits().ReadPage(p, page.data());
          if (page.find_first_not_of('\0') == std::string::npos) continue;  // nothing to add
          RETURN_IF_ERROR(bits.OrPage(p, page));  // the layouts agree: sizes do too
          bits.MarkPageDirty(p);
        }
        into->set_items_added(into->items_added() + from->items_added());
      }
    }
  }
  MarkChanged();
  return CheckpointLocked(sync, /*evicting=*/false, PageWrites::kOneBatch);
}

}  // namespace storage

// FilterKind for BLOOM filters (filter_kind.h): a chain of blocked Bloom filters
// (bloom/scalable_filter.h) that scales, and may slide a window. Its records list one
// sub-filter per link (a windowed filter's slices oldest first); its journal records are the
// added items' hashes, idempotent to replay; a checkpoint writes its dirty pages.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "bloom/filter_stats.h"
#include "bloom/window.h"
#include "common/status_macros.h"
#include "storage/filter/stored_filter.h"
#include "storage/format/encoding.h"
#include "storage/format/page_encoding.h"

namespace storage {

class BloomKind final : public FilterKind {
 public:
  absl::string_view name() const override { return "BLOOM"; }
  bool mergeable() const override { return true; }
  bool exports_a_copy() const override { return false; }

  absl::StatusOr<SubFilterRecord> NewSubFilterRecord(const bloom::FilterParams& spec, int index,
                                                     absl::Time now) const override {
    ASSIGN_OR_RETURN(const bloom::SubFilterShape shape, bloom::SubFilterShapeFor(spec, index));
    return SubFilterRecord{shape.capacity,
                           shape.error_rate,
                           shape.layout.num_blocks,
                           shape.layout.hash_count,
                           0,
                           spec.windowed() ? bloom::SliceStartMicros(spec, now) : 0};
  }

  bool ValidLayout(const SubFilterRecord& sub) const override {
    return sub.num_blocks > 0 && sub.num_blocks <= bloom::kMaxBlocks && sub.hash_count > 0 &&
           sub.hash_count <= bloom::kMaxHashCount;
  }

  // As ScalableFilter::size_bytes() counts them: a large window's slice arena whole, the
  // slices' first sub-filters in it not again (bloom/slice_arena.h).
  uint64_t BitsBytes(const FilterRecord& record) const override {
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

  bloom::ScalableFilterStats ExpectedStats(const FilterRecord& record,
                                           absl::Time now) const override {
    std::vector<bloom::SubFilterStats> subs;
    for (const SubFilterRecord& s : record.sub_filters) {
      if (record.spec.windowed() && bloom::SliceExpiry(record.spec, s.slice_start_micros) <= now) {
        continue;
      }
      subs.push_back(bloom::ExpectedSubFilterStats(
          {s.capacity, s.error_rate, {s.num_blocks, s.hash_count}}, s.items_added));
      if (record.spec.windowed()) {
        subs.back().slice_start = absl::FromUnixMicros(s.slice_start_micros);
      }
    }
    return bloom::CombineSubFilterStats(std::move(subs));
  }

  uint16_t dump_version() const override { return 1; }

  absl::StatusOr<BuiltFilter> Build(const FilterRecord& record, const bloomtime::Clock* clock,
                                    bool drop_expired) const override {
    BuiltFilter built;
    ASSIGN_OR_RETURN(built.chain, StoredFilter::BuildFilter(record, clock, drop_expired));
    return built;
  }

  void MightContain(const StoredFilter& filter, absl::Span<const uint64_t> hashes,
                    bool* present) const override {
    filter.chain_.MightContainMany(hashes, present);
  }

  bloom::ScalableFilterStats Stats(const StoredFilter& filter) const override {
    return filter.chain_.ComputeStats();
  }

  bloom::FilterParams Spec(const StoredFilter& filter) const override {
    return filter.chain_.spec();
  }

  uint64_t BitsInMemory(const StoredFilter& filter) const override {
    return filter.has_chain_ ? filter.chain_.size_bytes() : 0;
  }

  // A new sub-filter's record is written as the store syncs (StoreContext::sync): before the
  // batch that carries the add.
  absl::Status Add(StoredFilter& filter, absl::Span<const uint64_t> hashes, bool* added,
                   bool /*sync*/, rocksdb::WriteBatch& batch, GroupedAdd& grouped) const override {
    return filter.PrepareGroupAdd(hashes, added, filter.context_->sync, batch, grouped);
  }

  absl::Status LoadPage(StoredFilter& filter, uint32_t sub, uint32_t page, absl::string_view value,
                        std::string& scratch) const override {
    if (!filter.has_chain_) return filter.Usable();
    bloom::SubFilter* sub_filter = filter.chain_.sub_filter(static_cast<int>(sub));
    // Pages of slices a windowed filter retired (a crash came before their range delete).
    if (sub_filter == nullptr && static_cast<int>(sub) < filter.chain_.first_index()) {
      return absl::OkStatus();
    }
    if (sub_filter == nullptr) {
      return absl::DataLossError(absl::StrCat("page of missing sub-filter ", sub));
    }
    return OrStoredPage(sub_filter->bits(), page, value, scratch);
  }

  absl::Status Replay(StoredFilter& filter, absl::string_view bytes) const override {
    if (!filter.has_chain_) return filter.Usable();
    std::vector<Run> runs;
    std::vector<uint64_t> hashes;
    RETURN_IF_ERROR(DecodeJournalRecord(bytes, runs, hashes));
    return filter.chain_.Replay(runs, hashes);
  }

  // Only a windowed filter's records come here: a slot move catches the others up by their
  // hashes, added as adds (FilterStore::AddHashes). A windowed one's records name the slices
  // (sub-filters) the items went to, which a copy shares with the owner until the owner opens
  // another; the items' ages stay the owner's.
  absl::StatusOr<size_t> CatchUp(StoredFilter& filter, absl::Span<const absl::string_view> records,
                                 bool sync) const override {
    if (!filter.has_chain_ || !filter.chain_.windowed()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", filter.name(), "' is not a windowed BLOOM filter here: the journal records of ",
          "one do not apply to it (copy it whole)"));
    }
    std::vector<Run> runs;
    std::vector<uint64_t> hashes;
    std::vector<Run> record_runs;
    std::vector<uint64_t> record_hashes;
    for (const absl::string_view record : records) {
      RETURN_IF_ERROR(DecodeJournalRecord(record, record_runs, record_hashes));
      runs.insert(runs.end(), record_runs.begin(), record_runs.end());
      hashes.insert(hashes.end(), record_hashes.begin(), record_hashes.end());
    }
    return filter.chain_.ReplayMissing(
        runs, hashes, [&](absl::Span<const Run> missing_runs, absl::Span<const uint64_t> missing) {
          return filter.PersistJournalRecord(EncodeJournalRecord(missing_runs, missing), sync);
        });
  }

  void MarkAllPagesDirty(StoredFilter& filter) const override {
    for (bloom::SubFilter* sub = filter.chain_.first(); sub != nullptr; sub = sub->next()) {
      sub->bits().MarkAllPagesDirty();
    }
  }

  FilterRecord MakeRecord(const StoredFilter& filter, const PersistedState& state,
                          const bloom::SubFilter* extra) const override {
    return filter.MakeBloomRecord(state, extra);
  }

  // Called by StoredFilter::CheckpointLocked, which holds the checkpoint lock.
  ABSL_NO_THREAD_SAFETY_ANALYSIS absl::Status CheckpointLocked(StoredFilter& filter, bool sync,
                                                               bool evicting,
                                                               PageWrites pages) const override {
    return filter.BloomCheckpointLocked(sync, evicting, pages);
  }
};

namespace filter_kind_internal {

const FilterKind& Bloom() {
  static const BloomKind kind;
  return kind;
}

}  // namespace filter_kind_internal
}  // namespace storage

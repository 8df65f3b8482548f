// FilterKind for CUCKOO filters (filter_kind.h): a chain of cuckoo tables
// (bloom/cuckoo_filter.h) that can forget and count items, and has no window. Its records list
// one entry per table (num_blocks: buckets, hash_count: fingerprint bits); its journal records
// are the table values an add or remove wrote (storage/format/cuckoo_journal.h). The
// StoredFilter members it calls are in stored_filter_cuckoo.cc.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/filter/stored_filter.h"
#include "storage/format/cuckoo_journal.h"
#include "storage/memory/resident_charge.h"

namespace storage {
namespace {

// The empty tables `record` lists, checked against what its spec gives.
absl::StatusOr<std::unique_ptr<bloom::CuckooFilter>> BuildCuckoo(const FilterRecord& record) {
  if (!record.spec.cuckoo() || record.first_sub_index != 0 || record.sub_filters.empty()) {
    return absl::DataLossError("the record does not describe a cuckoo filter");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<bloom::CuckooFilter> cuckoo,
                   bloom::CuckooFilter::CreateEmpty(record.spec, record.seed));
  for (size_t i = 0; i < record.sub_filters.size(); ++i) {
    const SubFilterRecord& s = record.sub_filters[i];
    const bloom::CuckooLayout layout{s.num_blocks, static_cast<uint32_t>(s.hash_count)};
    absl::StatusOr<bloom::CuckooLayout> expected = cuckoo->LayoutOf(static_cast<int>(i));
    if (!expected.ok() || !(*expected == layout)) {
      return absl::DataLossError(
          absl::StrCat("cuckoo table ", i, " has a layout its spec does not give"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<bloom::CuckooTable> table,
                     bloom::CuckooTable::Create(layout, cuckoo->KeyOf(static_cast<int>(i))));
    RETURN_IF_ERROR(cuckoo->AppendTable(std::move(table)));
  }
  return cuckoo;
}

}  // namespace

class CuckooKind final : public FilterKind {
 public:
  absl::string_view name() const override { return "CUCKOO"; }
  bool mergeable() const override { return false; }
  bool exports_a_copy() const override { return true; }

  absl::StatusOr<SubFilterRecord> NewSubFilterRecord(const bloom::FilterParams& spec, int index,
                                                     absl::Time /*now*/) const override {
    ASSIGN_OR_RETURN(const bloom::ChainTarget target, bloom::ChainTargetFor(spec, index));
    ASSIGN_OR_RETURN(const bloom::CuckooLayout layout,
                     bloom::ChooseCuckooLayout(target.capacity, target.error_rate));
    SubFilterRecord record;
    record.capacity = target.capacity;
    record.error_rate = target.error_rate;
    record.num_blocks = layout.num_buckets;
    record.hash_count = layout.fingerprint_bits;
    return record;
  }

  bool ValidLayout(const SubFilterRecord& sub) const override {
    return sub.num_blocks > 0 && sub.num_blocks <= bloom::kMaxCuckooBuckets &&
           sub.hash_count >= bloom::kMinFingerprintBits &&
           sub.hash_count <= bloom::kMaxFingerprintBits;
  }

  uint64_t BitsBytes(const FilterRecord& record) const override {
    uint64_t bytes = 0;
    for (const SubFilterRecord& table : record.sub_filters) {
      bytes += CuckooTableCharge({table.num_blocks, static_cast<uint32_t>(table.hash_count)});
    }
    return bytes;
  }

  bloom::ScalableFilterStats ExpectedStats(const FilterRecord& record,
                                           absl::Time /*now*/) const override {
    std::vector<bloom::CuckooTableStats> tables;
    for (const SubFilterRecord& s : record.sub_filters) {
      tables.push_back(bloom::ExpectedCuckooTableStats(
          {s.capacity, s.error_rate}, {s.num_blocks, static_cast<uint32_t>(s.hash_count)},
          s.items_added));
    }
    return bloom::AsFilterStats(bloom::CombineCuckooTableStats(std::move(tables)));
  }

  uint16_t dump_version() const override { return 2; }

  absl::StatusOr<BuiltFilter> Build(const FilterRecord& record, const bloomtime::Clock* /*clock*/,
                                    bool /*drop_expired*/) const override {
    BuiltFilter built;
    ASSIGN_OR_RETURN(built.cuckoo, BuildCuckoo(record));
    return built;
  }

  void MightContain(const StoredFilter& filter, absl::Span<const uint64_t> hashes,
                    bool* present) const override {
    filter.rare_->cuckoo->MightContainHashes(hashes, present);
  }

  bloom::ScalableFilterStats Stats(const StoredFilter& filter) const override {
    return bloom::AsFilterStats(filter.rare_->cuckoo->Stats());
  }

  bloom::FilterParams Spec(const StoredFilter& filter) const override {
    return filter.rare_->cuckoo->spec();
  }

  // Read without the chain's lock: its charge (tables and bookkeeping).
  uint64_t BitsInMemory(const StoredFilter& filter) const override {
    return filter.charged_bytes();
  }

  // Its own write, under the chain's lock: nothing for the caller's batch.
  absl::Status Add(StoredFilter& filter, absl::Span<const uint64_t> hashes, bool* added, bool sync,
                   rocksdb::WriteBatch& /*batch*/, GroupedAdd& /*grouped*/) const override {
    return filter.CuckooAdd(hashes, added, sync);
  }

  absl::Status LoadPage(StoredFilter& filter, uint32_t sub, uint32_t page, absl::string_view value,
                        std::string& /*scratch*/) const override {
    return filter.rare_->cuckoo->LoadPage(static_cast<int>(sub), page, value);
  }

  absl::Status Replay(StoredFilter& filter, absl::string_view bytes) const override {
    std::vector<bloom::CuckooChange> changes;
    RETURN_IF_ERROR(DecodeCuckooJournalRecord(bytes, changes));
    return filter.rare_->cuckoo->Replay(changes);
  }

  // The records hold the table values the owner's adds and removes wrote (relocations
  // included), which the copy writes in order: each slot ends as the owner's last record left
  // it, also where the copy, exported after the position, held some of them already.
  absl::StatusOr<size_t> CatchUp(StoredFilter& filter, absl::Span<const absl::string_view> records,
                                 bool sync) const override {
    std::vector<bloom::CuckooChange> changes;
    std::vector<bloom::CuckooChange> decoded;
    for (const absl::string_view record : records) {
      RETURN_IF_ERROR(DecodeCuckooJournalRecord(record, decoded));
      changes.insert(changes.end(), decoded.begin(), decoded.end());
    }
    if (changes.empty()) return 0;
    RETURN_IF_ERROR(filter.rare_->cuckoo->ReplayPersisted(
        changes, [&](absl::Span<const bloom::CuckooChange> persisted, int before, int after) {
          return filter.PersistCuckooChanges(persisted, before, after, sync);
        }));
    return changes.size();
  }

  void MarkAllPagesDirty(StoredFilter& filter) const override {
    filter.rare_->cuckoo->MarkAllPagesDirty();
  }

  FilterRecord MakeRecord(const StoredFilter& filter, const PersistedState& state,
                          const bloom::SubFilter* /*extra*/) const override {
    return filter.MakeCuckooRecord(state);
  }

  // Called by StoredFilter::CheckpointLocked, which holds the checkpoint lock.
  ABSL_NO_THREAD_SAFETY_ANALYSIS absl::Status CheckpointLocked(StoredFilter& filter, bool sync,
                                                               bool evicting,
                                                               PageWrites pages) const override {
    return filter.CuckooCheckpointLocked(sync, evicting, pages);
  }
};

namespace filter_kind_internal {

const FilterKind& Cuckoo() {
  static const CuckooKind kind;
  return kind;
}

}  // namespace filter_kind_internal
}  // namespace storage

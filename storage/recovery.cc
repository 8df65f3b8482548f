// FilterStore::Load: rebuilds every filter from RocksDB at start-up.
//
// Three sequential scans, one per column family, rather than seeks per filter: metadata first
// (which filters exist, their shapes and checkpointed counters), then every checkpointed page,
// then every journal record after its filter's checkpoint. A filter whose data does not decode
// is registered as unreadable (DATA_LOSS on use) and the others load normally.
#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "storage/encoding.h"
#include "storage/filter_store.h"
#include "storage/rocksdb_status.h"

namespace storage {
namespace {

struct Replayed {
  uint64_t max_seq = 0;
  uint64_t bytes = 0;
};

absl::string_view View(const rocksdb::Slice& slice) { return {slice.data(), slice.size()}; }

}  // namespace

absl::Status FilterStore::Load() {
  const absl::Time start = absl::Now();
  absl::flat_hash_map<uint64_t, std::shared_ptr<StoredFilter>> by_generation;
  uint64_t max_generation = 0;

  std::unique_ptr<rocksdb::Iterator> it = db_->Scan(db_->filters());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string name(View(it->key()));
    absl::StatusOr<FilterRecord> record = DecodeFilterRecord(View(it->value()));
    absl::StatusOr<std::unique_ptr<bloom::ScalableFilter>> filter =
        record.ok() ? StoredFilter::BuildFilter(*record) : record.status();
    if (!filter.ok()) {
      auto broken = std::make_shared<StoredFilter>(name, absl::OkStatus(), db_.get());
      broken->MarkUnreadable(filter.status());
      bloomlog::LogError(broken->Usable().message());
      Insert(std::move(broken));
      ++load_report_.unreadable;
      continue;
    }
    const uint64_t bytes = (*filter)->size_bytes();
    budget_.ForceCharge(bytes);  // it exists on disk already: load it even past the limit
    auto stored = std::make_shared<StoredFilter>(std::move(name), *record, *std::move(filter),
                                                 db_.get(), &budget_, bytes);
    max_generation = std::max(max_generation, record->generation);
    by_generation[record->generation] = stored;
    Insert(std::move(stored));
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "loading filter metadata"));
  load_report_.filters = by_generation.size();

  std::string next_generation;
  uint64_t stored_next = 0;
  rocksdb::Status got =
      db_->db()->Get(rocksdb::ReadOptions(), std::string(kNextGenerationKey), &next_generation);
  if (got.ok()) {
    if (!absl::SimpleAtoi(next_generation, &stored_next)) {
      return absl::DataLossError(absl::StrCat("bad next_generation '", next_generation, "'"));
    }
  } else if (!got.IsNotFound()) {
    return FromRocksDb(got, "reading next_generation");
  }
  next_generation_.store(std::max(max_generation + 1, stored_next));

  uint64_t orphans = 0;
  it = db_->Scan(db_->blocks());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(const BlockKeyParts key, ParseBlockKey(View(it->key())));
    auto found = by_generation.find(key.generation);
    if (found == by_generation.end()) {
      ++orphans;  // data of a filter whose metadata is unreadable; kept until it is deleted
      continue;
    }
    StoredFilter& stored = *found->second;
    bloom::SubFilter* sub = stored.mutable_filter()->sub_filter(static_cast<int>(key.sub_filter));
    absl::Status loaded =
        sub == nullptr
            ? absl::DataLossError(absl::StrCat("page of missing sub-filter ", key.sub_filter))
            : sub->bits().OrPage(key.page, View(it->value()));
    if (!loaded.ok()) stored.MarkUnreadable(loaded);
    ++load_report_.pages;
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "loading filter pages"));

  absl::flat_hash_map<uint64_t, Replayed> replayed;
  std::vector<Run> runs;
  std::vector<uint64_t> hashes;
  it = db_->Scan(db_->journal());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(const JournalKeyParts key, ParseJournalKey(View(it->key())));
    auto found = by_generation.find(key.generation);
    if (found == by_generation.end()) {
      ++orphans;
      continue;
    }
    StoredFilter& stored = *found->second;
    if (key.seq <= stored.checkpoint_seq()) continue;  // already in the pages
    absl::Status status = DecodeJournalRecord(View(it->value()), runs, hashes);
    if (status.ok()) status = stored.mutable_filter()->Replay(runs, hashes);
    if (!status.ok()) stored.MarkUnreadable(status);
    Replayed& r = replayed[key.generation];
    r.max_seq = std::max(r.max_seq, key.seq);
    r.bytes += it->value().size();
    ++load_report_.journal_records;
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "loading the journal"));

  for (auto& [generation, stored] : by_generation) {
    const Replayed r = replayed.contains(generation) ? replayed[generation] : Replayed{};
    stored->FinishRecovery(std::max(r.max_seq, stored->checkpoint_seq()) + 1, r.bytes);
    if (!stored->Usable().ok()) {
      ++load_report_.unreadable;
      bloomlog::LogError(stored->Usable().message());
    }
  }
  if (orphans > 0) {
    bloomlog::LogDebug(
        absl::StrCat(orphans, " pages/journal records belong to no readable filter"));
  }
  load_report_.elapsed = absl::Now() - start;
  return absl::OkStatus();
}

}  // namespace storage

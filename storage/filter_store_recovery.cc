// FilterStore::Load: rebuilds every filter from RocksDB at start-up.
//
// Three sequential scans, one per column family, rather than seeks per filter: metadata first
// (which filters exist, their shapes and checkpointed counters), then every checkpointed page,
// then every journal record after its filter's checkpoint. A filter whose data does not decode
// is registered as unreadable (DATA_LOSS on use) and the others load normally.
#include <algorithm>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "storage/db/rocksdb_status.h"
#include "storage/db/database.h"
#include "storage/filter_store.h"
#include "storage/format/encoding.h"
#include "storage/format/page_encoding.h"

namespace storage {
namespace {

struct Replayed {
  uint64_t max_seq = 0;
  uint64_t bytes = 0;
};

}  // namespace

namespace {

// The stored decimal value of `key` in the default column family; 0 if absent.
absl::StatusOr<uint64_t> ReadCounter(const Database& db, absl::string_view key) {
  std::string value;
  const rocksdb::Status got =
      db.db()->Get(rocksdb::ReadOptions(), static_cast<std::string>(key), &value);
  if (got.IsNotFound()) return 0;
  RETURN_IF_ERROR(FromRocksDb(got, absl::StrCat("reading ", key)));
  uint64_t parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::DataLossError(absl::StrCat("bad ", key, " '", value, "'"));
  }
  return parsed;
}

}  // namespace

void FilterStore::RaiseCeilingAtStart(uint64_t next_generation) {
  if (options_.replica) return;  // a replica never creates filters, nor writes RocksDB
  // Not fatal (the disk may be full at start-up: reads still work); the first creation raises it.
  if (absl::Status raised = RaiseCeiling(next_generation); !raised.ok()) {
    bloomlog::LogWarning(
        absl::StrCat("cannot persist the generation ceiling yet: ", raised.message()));
  }
}

absl::Status FilterStore::LoadLazily(uint64_t ceiling) {
  const absl::Time start = absl::Now();
  next_generation_.store(ceiling);
  // Which filters have journal records to replay when they load (filter_store_residency.cc).
  std::unique_ptr<rocksdb::Iterator> it = db_->Scan(db_->journal());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(const JournalKeyParts key, ParseJournalKey(ViewOf(it->key())));
    bloomsync::MutexLock lock(&residency_.cold_journaled_mu);
    residency_.cold_journaled.insert(key.generation);
    ++load_report_.journal_records;
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "scanning the journal"));
  uint64_t estimate = 0;
  db_->db()->GetIntProperty(db_->filters(), "rocksdb.estimate-num-keys", &estimate);
  load_report_.cold = estimate;  // RocksDB's estimate: nothing was read
  residency_.cold_filters.store(static_cast<int64_t>(estimate));
  residency_.may_have_cold.store(true);
  RaiseCeilingAtStart(ceiling);
  load_report_.elapsed = absl::Now() - start;
  return absl::OkStatus();
}

absl::Status FilterStore::Load() {
  ASSIGN_OR_RETURN(const uint64_t ceiling, ReadCounter(*db_, kGenerationCeilingKey));
  if (options_.lazy_start && ceiling > 0) return LoadLazily(ceiling);
  const absl::Time start = absl::Now();
  absl::flat_hash_map<uint64_t, std::shared_ptr<StoredFilter>> by_generation;
  absl::flat_hash_set<uint64_t> skipped_generations;  // filters left on disk, unloaded
  uint64_t max_generation = 0;

  std::unique_ptr<rocksdb::Iterator> it = db_->Scan(db_->filters());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    std::string name(ViewOf(it->key()));
    absl::StatusOr<FilterRecord> record = DecodeFilterRecord(ViewOf(it->value()));
    if (record.ok()) max_generation = std::max(max_generation, record->generation);
    absl::StatusOr<StoredFilter::Built> filter =
        record.ok() ? StoredFilter::Build(*record, options_.clock, /*drop_expired=*/true)
                    : record.status();
    if (!filter.ok()) {
      auto broken = std::make_shared<StoredFilter>(name, absl::OkStatus(), &context_);
      broken->MarkUnreadable(filter.status());
      bloomlog::LogError(broken->Usable().message());
      Insert(broken);
      ++load_report_.unreadable;
      continue;
    }
    const uint64_t bytes = filter->charge();
    absl::Status fits = CheckResidentCharge(bytes, name);
    if (fits.ok() && budget_.limit() != 0 && bytes > budget_.limit()) {
      fits = absl::ResourceExhaustedError(absl::StrCat(
          "filter '", name, "' was not loaded: its ", bytes,
          " bytes (bits and bookkeeping) do not fit the memory limit (", budget_.limit(),
          " bytes); restart with a larger --memory_limit to use it (nothing "
          "is lost), or delete it"));
    }
    if (!fits.ok()) {
      // It could never be loaded, and trying at every use would evict everything else: serve
      // the others and report this one.
      filter->reset();
      auto unloaded =
          std::make_shared<StoredFilter>(name, std::move(fits), &context_, record->generation);
      bloomlog::LogError(unloaded->Usable().message());
      skipped_generations.insert(record->generation);
      Insert(unloaded);
      ++load_report_.not_loaded;
      continue;
    }
    if (budget_.limit() != 0 && budget_.used() + bytes > budget_.limit()) {
      // The memory limit is full: this one stays on disk, cold, and is loaded on first use
      // (with its journal, if it has one). filter_store_residency.cc.
      filter->reset();
      residency_.may_have_cold.store(true);
      skipped_generations.insert(record->generation);
      ++load_report_.cold;
      continue;
    }
    budget_.ChargeCached(bytes, 0, "loading a filter").IgnoreError();  // fits: checked above
    std::shared_ptr<StoredFilter> stored =
        StoredFilter::Make(name, *record, *std::move(filter), &context_, bytes);
    by_generation[record->generation] = stored;
    Insert(stored);
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "loading filter metadata"));
  load_report_.filters = by_generation.size();
  residency_.cold_filters.store(static_cast<int64_t>(load_report_.cold));

  ASSIGN_OR_RETURN(const uint64_t stored_next, ReadCounter(*db_, kNextGenerationKey));
  next_generation_.store(std::max({max_generation + 1, stored_next, ceiling}));
  RaiseCeilingAtStart(next_generation_.load());

  uint64_t orphans = 0;
  absl::btree_set<uint64_t> orphan_generations;
  it = db_->Scan(db_->blocks());
  std::string page_scratch;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(const BlockKeyParts key, ParseBlockKey(ViewOf(it->key())));
    auto found = by_generation.find(key.generation);
    if (found == by_generation.end()) {
      // Data of a filter left unloaded (kept), or of no filter at all.
      if (!skipped_generations.contains(key.generation)) {
        ++orphans;
        orphan_generations.insert(key.generation);
      }
      continue;
    }
    StoredFilter& stored = *found->second;
    absl::Status loaded =
        stored.LoadStoredPage(key.sub_filter, key.page, ViewOf(it->value()), page_scratch);
    if (!loaded.ok()) stored.MarkUnreadable(loaded);
    ++load_report_.pages;
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "loading filter pages"));

  absl::flat_hash_map<uint64_t, Replayed> replayed;
  it = db_->Scan(db_->journal());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(const JournalKeyParts key, ParseJournalKey(ViewOf(it->key())));
    auto found = by_generation.find(key.generation);
    if (found == by_generation.end()) {
      if (!skipped_generations.contains(key.generation)) {
        ++orphans;
        orphan_generations.insert(key.generation);
      } else {
        // A cold filter's journal is replayed when it is loaded (filter_store_residency.cc); the
        // others' loads skip the journal scan.
        bloomsync::MutexLock lock(&residency_.cold_journaled_mu);
        residency_.cold_journaled.insert(key.generation);
      }
      continue;
    }
    StoredFilter& stored = *found->second;
    if (key.seq <= stored.checkpoint_seq()) continue;  // already in the pages
    absl::Status status = stored.ReplayJournalRecord(ViewOf(it->value()));
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
  // A replica leaves them to the primary, whose deletion it will apply.
  if (orphans > 0 && !options_.replica) {
    RETURN_IF_ERROR(DeleteOrphans(orphans, orphan_generations));
  }
  load_report_.elapsed = absl::Now() - start;
  return absl::OkStatus();
}

absl::Status FilterStore::DeleteOrphans(uint64_t orphans,
                                        const absl::btree_set<uint64_t>& generations) {
  if (load_report_.unreadable > 0) {
    // An unreadable metadata record's generation is unknown: its pages look like orphans.
    // Keep everything until the unreadable filters are deleted.
    bloomlog::LogWarning(absl::StrCat(
        orphans, " pages/journal records belong to no filter; they are kept while ",
        load_report_.unreadable, " unreadable filter(s) exist, as they may be theirs"));
    return absl::OkStatus();
  }
  // Left by a crash during an Import (pages written before its metadata) or a Delete. Range
  // deletes: O(generations) here, the space comes back with compaction.
  rocksdb::WriteBatch batch;
  for (const uint64_t generation : generations) {
    for (rocksdb::ColumnFamilyHandle* family : {db_->blocks(), db_->journal()}) {
      batch.DeleteRange(family, GenerationPrefix(generation), GenerationPrefix(generation + 1));
    }
  }
  RETURN_IF_ERROR(db_->Write(batch, /*sync=*/true, "deleting orphaned pages"));
  load_report_.orphans_deleted = orphans;
  bloomlog::LogInfo(absl::StrCat("deleted ", orphans, " pages/journal records of ",
                                 generations.size(),
                                 " filter generation(s) that belong to no filter (left by a "
                                 "crash during an Import or a Delete)"));
  return absl::OkStatus();
}

}  // namespace storage

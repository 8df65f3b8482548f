// StoredFilter for CUCKOO filters (stored_filter.h; its FilterKind is cuckoo_kind.cc): adds and
// removes journalled as the table values they wrote, counts, its metadata record, checkpoints.
//
// Why values, not items: a cuckoo insert relocates fingerprints along a walk, so replaying an
// add is not idempotent (a second replay would hold two copies), while writing a slot's value
// again is. A checkpoint takes its sequence S and the dirty pages under the exclusive apply
// lock, then copies the pages while writes go on: a page copied later may hold changes of
// records after S, and replaying those records in order sets each slot they touch to its last
// value, so the loaded bytes are the bytes of the last write, whenever the page was copied.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/write_batch.h"
#include "storage/filter/stored_filter.h"
#include "storage/format/cuckoo_journal.h"
#include "storage/format/encoding.h"
#include "storage/format/page_encoding.h"
#include "storage/memory/resident_charge.h"

namespace storage {

absl::Status StoredFilter::RequireCuckoo(absl::string_view call) const {
  if (cuckoo() != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      call, " needs a CUCKOO filter; '", name(),
      "' is a BLOOM filter, which cannot forget or count items (reserve one with kind CUCKOO)"));
}

StoredFilter::StoredFilter(absl::string_view name, const FilterRecord& record,
                           std::unique_ptr<bloom::CuckooFilter> cuckoo, const StoreContext* context,
                           uint64_t charged_bytes)
    : StoredFilter(name, record, std::unique_ptr<bloom::ScalableFilter>(), context, charged_bytes) {
  rare_ = std::make_unique<Rare>();
  rare_->cuckoo_tables.store(cuckoo->num_tables());
  rare_->cuckoo = std::move(cuckoo);
  if (record.spec.idle_ttl != absl::ZeroDuration()) {
    rare_->idle_ttl_micros = absl::ToInt64Microseconds(record.spec.idle_ttl);
    rare_->last_used_micros.store(record.last_used_micros != 0 ? record.last_used_micros
                                                               : record.created_at_micros);
  }
}

FilterRecord StoredFilter::MakeCuckooRecord(const PersistedState& state, int tables) const {
  FilterRecord record = RecordBase(state);
  record.first_sub_index = 0;  // a cuckoo chain never retires a table
  if (tables < 0) tables = rare_->cuckoo_tables.load();
  for (int i = 0; i < tables; ++i) {
    // Cannot fail: the table exists, so its spec gives it.
    SubFilterRecord table = *kind().NewSubFilterRecord(record.spec, i, absl::InfinitePast());
    table.items_added =
        static_cast<size_t>(i) < state.items_added.size() ? state.items_added[i] : 0;
    record.sub_filters.push_back(table);
  }
  return record;
}

absl::Status StoredFilter::PersistCuckooChanges(absl::Span<const bloom::CuckooChange> changes,
                                                int tables_before, int tables_after, bool sync) {
  rocksdb::WriteBatch batch;
  const bool creating = AddPendingCreation(batch);
  uint64_t grown_bytes = 0;
  if (tables_after > tables_before) {
    for (int i = tables_before; i < tables_after; ++i) {
      ASSIGN_OR_RETURN(const bloom::CuckooLayout layout, rare_->cuckoo->LayoutOf(i));
      grown_bytes += CuckooTableCharge(layout) + kSubFilterOverheadBytes;
    }
    RETURN_IF_ERROR(CheckResidentCharge(charged_bytes() + grown_bytes, name()));
    RETURN_IF_ERROR(budget()->ChargeCached(
        grown_bytes, charged_bytes(),
        absl::StrCat("growing filter '", name(), "' to ", tables_after, " cuckoo tables")));
    rare_->cuckoo_tables.store(tables_after);
    bloomsync::MutexLock meta(&meta_mu_);
    // Over the creation record, if any: the full record with the new tables.
    batch.Put(db()->filters(), NameSlice(),
              EncodeFilterRecord(MakeRecord(PersistedNow(), nullptr)));
  }
  const std::string record = EncodeCuckooJournalRecord(changes);
  batch.Put(db()->journal(), JournalKey(generation_, next_seq_.fetch_add(1)), record);
  if (absl::Status written = db()->Write(batch, sync, "journaling a cuckoo filter's change");
      !written.ok()) {
    if (grown_bytes > 0) {
      rare_->cuckoo_tables.store(tables_before);
      budget()->Release(grown_bytes);
    }
    return written;
  }
  if (creating) flags_.Clear(kCreationPending);
  charged_units_.fetch_add(static_cast<uint32_t>(grown_bytes / kChargeUnitBytes));
  CountJournalBytes(record.size());
  return absl::OkStatus();
}

absl::Status StoredFilter::PersistPendingCreation(bool sync) {
  rocksdb::WriteBatch batch;
  if (!AddPendingCreation(batch)) return absl::OkStatus();
  RETURN_IF_ERROR(db()->Write(batch, sync, "creating a filter"));
  flags_.Clear(kCreationPending);
  return absl::OkStatus();
}

absl::Status StoredFilter::CuckooAdd(absl::Span<const uint64_t> hashes, bool* added, bool sync) {
  RETURN_IF_ERROR(Addable());
  if (has_idle_ttl()) TouchIdle(context_->clock->Now());
  RETURN_IF_ERROR(rare_->cuckoo->AddHashes(
      hashes, [&](absl::Span<const bloom::CuckooChange> changes, int before, int after) {
        return PersistCuckooChanges(changes, before, after, sync);
      }));
  // An add of no items wrote nothing: a filter it created still needs its record.
  RETURN_IF_ERROR(PersistPendingCreation(sync));
  std::fill(added, added + hashes.size(), true);
  if (journal_bytes_.load() > 0) MarkChanged();
  ReportIfOverdue();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<bool>> StoredFilter::CuckooRemove(absl::Span<const uint64_t> hashes,
                                                             bool sync) {
  bloomsync::ReaderMutexLock lock(&apply_mu_);
  RETURN_IF_ERROR(Addable());
  if (has_idle_ttl()) TouchIdle(context_->clock->Now());
  ASSIGN_OR_RETURN(
      std::vector<bool> removed,
      rare_->cuckoo->RemoveHashes(
          hashes, [&](absl::Span<const bloom::CuckooChange> changes, int before, int after) {
            return PersistCuckooChanges(changes, before, after, sync);
          }));
  RETURN_IF_ERROR(PersistPendingCreation(sync));
  if (journal_bytes_.load() > 0) MarkChanged();
  ReportIfOverdue();
  return removed;
}

absl::StatusOr<std::vector<uint32_t>> StoredFilter::CuckooCount(absl::Span<const uint64_t> hashes) {
  RETURN_IF_ERROR(Usable());
  if (has_idle_ttl()) TouchIdle(context_->clock->Now());
  return rare_->cuckoo->CountHashes(hashes);
}

absl::StatusOr<StoredFilter::CuckooSnapshot> StoredFilter::SnapshotCuckoo() const {
  bloomsync::ReaderMutexLock lock(&apply_mu_);
  RETURN_IF_ERROR(Usable());
  RETURN_IF_ERROR(RequireCuckoo("SnapshotCuckoo"));
  CuckooSnapshot snapshot;
  ASSIGN_OR_RETURN(snapshot.copy, rare_->cuckoo->Clone());
  PersistedState live;
  live.checks = checks_.load();
  live.check_hits = check_hits_.load();
  live.last_used_micros = LastUsedMicros();
  for (const bloom::CuckooTableStats& table : snapshot.copy->Stats().tables) {
    live.items_added.push_back(table.items);
  }
  snapshot.record = MakeCuckooRecord(live, snapshot.copy->num_tables());
  snapshot.record.generation = generation_;
  return snapshot;
}

absl::Status StoredFilter::CuckooCheckpointLocked(bool sync, bool evicting, PageWrites pages) {
  bloom::CuckooFilter& cuckoo_chain = *rare_->cuckoo;
  PersistedState next;
  std::vector<std::pair<int, uint64_t>> dirty;
  uint64_t journal_bytes = 0;
  bool checks_changed = false;
  {
    bloomsync::WriterMutexLock lock(&apply_mu_);  // no add or remove is half done
    if (!Usable().ok() || evicted() != evicting) return absl::OkStatus();
    checks_changed = SnapshotCounters(next, journal_bytes);
    dirty = cuckoo_chain.TakeDirtyPages();
    for (const bloom::CuckooTableStats& table : cuckoo_chain.Stats().tables) {
      next.items_added.push_back(table.items);
    }
    bloomsync::MutexLock meta(&meta_mu_);
    next.last_used_micros = LastUsedMicros();
    if (dirty.empty() && next.checkpoint_seq == checkpointed_.seq() && !checks_changed) {
      return absl::OkStatus();
    }
  }
  WritePacer* const pacer = pages == PageWrites::kPaced ? context_->pacer : nullptr;
  const size_t batch_bytes = pacer != nullptr ? kPacedPageBatchBytes : kPageBatchBytes;
  rocksdb::WriteBatch batch;
  absl::Status status;
  // Pages are copied now, with writes going on: see the top of this file.
  for (const auto& [table, page] : dirty) {
    batch.Put(db()->blocks(),
              BlockKey(generation_, static_cast<uint32_t>(table), static_cast<uint32_t>(page)),
              cuckoo_chain.ReadPage(table, page));
    if (batch.GetDataSize() >= batch_bytes) {
      if (pacer != nullptr) pacer->Pace(batch.GetDataSize());
      status = db()->Write(batch, sync, "writing checkpoint pages");
      if (!status.ok()) break;
      batch.Clear();
    }
  }
  if (status.ok()) {
    bloomsync::MutexLock meta(&meta_mu_);
    batch.Put(db()->filters(), NameSlice(), EncodeFilterRecord(MakeRecord(next, nullptr)));
    TrimJournal(checkpointed_.seq(), next.checkpoint_seq, batch);
    status = db()->Write(batch, sync, "writing a checkpoint");
    if (status.ok()) checkpointed_.Assign(next.checkpoint_seq, 0, next.items_added);
  }
  if (!status.ok()) {
    // Nothing is lost (the journal after the last checkpoint is intact): try again later.
    for (const auto& [table, page] : dirty) cuckoo_chain.MarkPageDirty(table, page);
    RestoreCounters(journal_bytes, checks_changed);
    return status;
  }
  last_checkpoint_second_.store(SecondsSinceEpoch(absl::Now()), std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace storage

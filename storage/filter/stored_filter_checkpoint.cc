// StoredFilter's checkpoints and eviction (stored_filter.h describes the design): dirty pages
// written in batches, the metadata record and the journal's trim in the last one.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/write_batch.h"
#include "storage/checkpoint/checkpoint_schedule.h"
#include "storage/filter/journal_holds.h"
#include "storage/filter/stored_filter.h"
#include "storage/format/encoding.h"
#include "storage/format/page_encoding.h"

namespace storage {
namespace {

// PageWrites::kOneBatch (a merge) writes its pages in one batch up to this size. The batch is
// not charged to the memory budget, so a larger union goes out in kPageBatchBytes batches like
// any checkpoint: a crash during that write can leave part of the union on disk (extra bits;
// no acknowledged add is lost).
constexpr uint64_t kMaxOneBatchBytes = 64 << 20;

// The journal is checkpointed once it reaches this fraction of the filter's bits (and
// kMinJournalBytesForEarlyCheckpoint), or the interval passes: that bounds both replay time at
// start-up and amortised checkpoint writes.
constexpr double kJournalToBitsRatio = 1.0;

// A checkpoint trims up to this many journal records with point deletes, more with one range
// delete. Range tombstones cost every later read of the column family until compaction drops
// them (RocksDB 7.8 fragments a memtable's range tombstones for each new iterator): many
// small filters checkpointed often (evicted, or idle) would slow every load down.
constexpr uint64_t kMaxPointDeletes = 64;

}  // namespace

absl::Status StoredFilter::Checkpoint(bool sync, bool paced) {
  // A checkpoint's record must not be overwritten later by a pending creation record.
  if (absl::Status created = EnsurePersisted(sync); !created.ok() && Usable().ok()) {
    return created;
  }
  bloomsync::MutexLock checkpoint_lock(&checkpoint_mu_);
  return CheckpointLocked(sync, /*evicting=*/false,
                          paced ? PageWrites::kPaced : PageWrites::kBatches);
}

absl::Status StoredFilter::Evict(bool sync) {
  if (!Usable().ok() || evicted() || flags_.Has(kCreationPending)) {
    return absl::FailedPreconditionError("not evictable now");
  }
  const WritePacer::Rush rush(context_->pacer);  // a paced checkpoint of this filter hurries
  bloomsync::MutexLock checkpoint_lock(&checkpoint_mu_);
  if (!apply_mu_.TryLock()) return absl::FailedPreconditionError("busy");
  // No add applies after this (Addable), so the checkpoint below covers every one.
  const bool evictable = Usable().ok() && !flags_.Has(kCreationPending);
  if (evictable) flags_.Set(kEvicted, std::memory_order_release);
  apply_mu_.Unlock();
  if (!evictable) return absl::FailedPreconditionError("not evictable now");
  absl::Status checkpointed = CheckpointLocked(sync, /*evicting=*/true, PageWrites::kBatches);
  if (!checkpointed.ok()) flags_.Clear(kEvicted, std::memory_order_release);  // stays resident
  return checkpointed;
}

absl::Status StoredFilter::BloomCheckpointLocked(bool sync, bool evicting, PageWrites pages) {
  PersistedState next;
  DirtyPages dirty;
  uint64_t journal_bytes = 0;
  // Expired slices of a windowed filter, unlinked below and freed when this returns.
  std::vector<std::unique_ptr<bloom::SubFilter>> retired;
  uint32_t retire_from = 0;  // pages of sub-filters [retire_from, next.first_index) go
  bool checks_changed = false;
  {
    bloomsync::WriterMutexLock lock(&apply_mu_);
    if (!Usable().ok() || evicted() != evicting) return absl::OkStatus();
    if (windowed() && chain_pins_.load() == 0) {
      retired = chain_.Retire(chain_.ExpiredThrough(chain_.clock()->Now()));
      uint64_t freed = 0;
      for (const auto& sub : retired) freed += OwnBitsBytes(*sub) + kSubFilterOverheadBytes;
      if (freed > 0) {
        charged_units_.fetch_sub(static_cast<uint32_t>(freed / kChargeUnitBytes));
        budget()->Release(freed);
        // A slice is retired whole: count its first sub-filters.
        context_->slices_retired->fetch_add(static_cast<uint64_t>(
            std::count_if(retired.begin(), retired.end(),
                          [](const auto& sub) { return sub->slice().position == 0; })));
      }
    }
    next.first_index = static_cast<uint32_t>(chain_.first_index());
    checks_changed = SnapshotCounters(next, journal_bytes);
    bool any_dirty = false;
    for (bloom::SubFilter* sub = chain_.first(); sub != nullptr; sub = sub->next()) {
      next.items_added.push_back(sub->items_added());
      dirty.emplace_back(sub->index(), sub->bits().TakeDirtyPages());
      any_dirty |= !dirty.back().second.empty();
    }
    bloomsync::MutexLock meta(&meta_mu_);
    next.last_used_micros = LastUsedMicros();
    retire_from = checkpointed_.first_index();
    if (!any_dirty && next.checkpoint_seq == checkpointed_.seq() && !checks_changed &&
        next.first_index == retire_from) {
      return absl::OkStatus();
    }
  }
  if (pages == PageWrites::kOneBatch) {
    uint64_t dirty_pages = 0;
    for (const auto& [index, of_sub] : dirty) dirty_pages += of_sub.size();
    if (dirty_pages * bloom::BlockedBloomFilter::kPageBytes > kMaxOneBatchBytes) {
      pages = PageWrites::kBatches;
    }
  }
  // The last pages share the metadata's write: a small filter's checkpoint is one write.
  rocksdb::WriteBatch batch;
  absl::Status status = WritePages(dirty, sync, pages, batch);
  if (status.ok()) {
    bloomsync::MutexLock meta(&meta_mu_);
    batch.Put(db()->filters(), NameSlice(), EncodeFilterRecord(MakeRecord(next, nullptr)));
    if (retire_from < next.first_index) {  // the retired slices' pages: one range delete
      batch.DeleteRange(db()->blocks(), BlockKey(generation_, retire_from, 0),
                        BlockKey(generation_, next.first_index, 0));
    }
    TrimJournal(checkpointed_.seq(), next.checkpoint_seq, batch);
    status = db()->Write(batch, sync, "writing a checkpoint");
    if (status.ok()) {
      checkpointed_.Assign(next.checkpoint_seq, next.first_index, next.items_added);
      flags_.Clear(kRetirePending);
    }
  }
  if (!status.ok()) {
    // Nothing is lost (the journal is intact); make the next checkpoint try again. (Slices
    // retired above stay retired in memory: checkpointed_.first_index() still says where the
    // next checkpoint's range delete starts.)
    for (const auto& [index, pages] : dirty) {
      for (uint64_t page : pages) chain_.sub_filter(index)->bits().MarkPageDirty(page);
    }
    RestoreCounters(journal_bytes, checks_changed);
    return status;
  }
  last_checkpoint_second_.store(SecondsSinceEpoch(absl::Now()), std::memory_order_relaxed);
  return absl::OkStatus();
}

bool StoredFilter::SnapshotCounters(PersistedState& next, uint64_t& journal_bytes) {
  next.checkpoint_seq = next_seq_.load() - 1;
  const bool checks_changed = flags_.Clear(kChecksChanged);
  next.checks = checks_.load();
  next.check_hits = check_hits_.load();
  journal_bytes = journal_bytes_.exchange(0);
  flags_.Clear(kOverdue);
  return checks_changed;
}

void StoredFilter::RestoreCounters(uint64_t journal_bytes, bool checks_changed) {
  CountJournalBytes(journal_bytes);
  if (checks_changed) flags_.Set(kChecksChanged);
  // A pass may have dropped this filter meanwhile, finding nothing to checkpoint.
  if (journal_bytes > 0 || checks_changed) MarkChanged();
  ReportIfOverdue();
}

uint64_t StoredFilter::AppliedJournalSeq() {
  bloomsync::WriterMutexLock lock(&apply_mu_);
  return next_seq_.load() - 1;
}

void StoredFilter::TrimJournal(uint64_t from_seq, uint64_t to_seq,
                               rocksdb::WriteBatch& batch) const {
  if (context_->journal_holds != nullptr) {  // a slot move still reads the records after it
    to_seq = context_->journal_holds->TrimLimit(generation_, to_seq, context_->clock->Now());
  }
  if (to_seq <= from_seq) return;  // no record since the last checkpoint
  if (to_seq - from_seq <= kMaxPointDeletes) {
    for (uint64_t seq = from_seq + 1; seq <= to_seq; ++seq) {
      batch.Delete(db()->journal(), JournalKey(generation_, seq));
    }
    return;
  }
  batch.DeleteRange(db()->journal(), GenerationPrefix(generation_),
                    JournalKey(generation_, to_seq + 1));
}

absl::Status StoredFilter::WritePages(const DirtyPages& dirty, bool sync, PageWrites pages,
                                      rocksdb::WriteBatch& batch) {
  WritePacer* const pacer = pages == PageWrites::kPaced ? context_->pacer : nullptr;
  const size_t batch_bytes = pages == PageWrites::kOneBatch ? std::numeric_limits<size_t>::max()
                             : pacer != nullptr             ? kPacedPageBatchBytes
                                                            : kPageBatchBytes;
  std::string scratch;
  std::string page_bytes;
  for (const auto& [index, pages] : dirty) {
    const bloom::BlockedBloomFilter& bits = chain_.sub_filter(index)->bits();
    for (uint64_t page : pages) {
      EncodePage(bits, page, scratch, page_bytes);  // sparse while few words are set
      batch.Put(db()->blocks(),
                BlockKey(generation_, static_cast<uint32_t>(index), static_cast<uint32_t>(page)),
                page_bytes);
      if (batch.GetDataSize() >= batch_bytes) {
        if (pacer != nullptr) pacer->Pace(batch.GetDataSize());
        if (absl::Status s = db()->Write(batch, sync, "writing checkpoint pages"); !s.ok()) {
          return s;
        }
        batch.Clear();
      }
    }
  }
  return absl::OkStatus();
}

bool StoredFilter::CheckpointDue(absl::Time now, absl::Duration interval) const {
  if (!usable() || evicted()) return false;  // asked of each scheduled filter each second
  // Expired slices are retired by a checkpoint (the window's clock, not `now`, says which).
  if (windowed() && (flags_.Has(kRetirePending, std::memory_order_relaxed) ||
                     chain_.ExpiredThrough(chain_.clock()->Now()) >= 0)) {
    return true;
  }
  const bool changed = journal_bytes_.load(std::memory_order_relaxed) > 0 ||
                       flags_.Has(kChecksChanged, std::memory_order_relaxed);
  if (!changed) return false;
  return JournalOverdue() || now - last_checkpoint() >= interval;
}

bool StoredFilter::JournalOverdue() const {
  const uint64_t bits = kind().BitsInMemory(*this);
  if (bits == 0) return false;
  const uint64_t journal = journal_bytes_.load(std::memory_order_relaxed);
  return journal >= kMinJournalBytesForEarlyCheckpoint &&
         static_cast<double>(journal) >= kJournalToBitsRatio * static_cast<double>(bits);
}

}  // namespace storage

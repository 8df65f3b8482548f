// FilterStore as a replica (StoreOptions::replica) and a primary's wait for its followers.
//
// A replica's RocksDB takes only the primary's write batches, as they came, so its sequence
// numbers are the primary's. What a batch changes in memory:
//   - a journal record (an add): replayed into its filter when the filter is resident (found
//     by generation); a cold filter replays it when it loads, as after a restart;
//   - a metadata record written or deleted (a Reserve, a checkpoint, a new sub-filter or
//     slice, a retired slice, a Delete, an idle expiry): its filter leaves memory and loads
//     again, with what the primary decided, on its next use;
//   - pages and range deletes: nothing (they come with one of the above).
// So a replica decides nothing itself: it expires nothing and checkpoints nothing.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "rocksdb/write_batch.h"
#include "storage/db/rocksdb_status.h"
#include "storage/filter_store.h"
#include "storage/format/encoding.h"

namespace storage {
namespace {

// The filters one batch changes, read off the batch.
class BatchEffects final : public rocksdb::WriteBatch::Handler {
 public:
  BatchEffects(uint32_t filters_family, uint32_t journal_family)
      : filters_family_(filters_family), journal_family_(journal_family) {}

  rocksdb::Status PutCF(uint32_t family, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    if (family == filters_family_) names.emplace_back(key.data(), key.size());
    if (family == journal_family_) {
      journal.push_back(
          {std::string(key.data(), key.size()), std::string(value.data(), value.size())});
    }
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t family, const rocksdb::Slice& key) override {
    if (family == filters_family_) names.emplace_back(key.data(), key.size());
    return rocksdb::Status::OK();
  }
  rocksdb::Status SingleDeleteCF(uint32_t family, const rocksdb::Slice& key) override {
    return DeleteCF(family, key);
  }
  rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  void LogData(const rocksdb::Slice&) override {}

  struct JournalRecord {
    std::string key;
    std::string value;
  };
  std::vector<std::string> names;  // metadata records written or deleted
  std::vector<JournalRecord> journal;

 private:
  const uint32_t filters_family_;
  const uint32_t journal_family_;
};

}  // namespace

uint64_t FilterStore::LatestSequence() const { return db_->LatestSequence(); }

absl::Status FilterStore::CheckWritable() const {
  if (!options_.replica) {
    // Asked before a write changes anything too: a primary that stopped acknowledging (its
    // lease is in doubt, or it is handing over) applies nothing more, so that it holds no
    // writes the next primary lacks.
    if (options_.may_acknowledge == nullptr || options_.may_acknowledge()) return absl::OkStatus();
    return absl::UnavailableError(
        "this pod is no longer sure it is the primary (its etcd lease could not be renewed in "
        "time), or it is handing over to another pod: the write was not applied; retry it, "
        "through any pod");
  }
  return absl::FailedPreconditionError(
      "this server is a follower: writes go to the primary (bloom-server forwards them when "
      "it was started with --replicate_from)");
}

absl::Status FilterStore::WaitReplicated() {
  // Asked first too: no use waiting for followers when the answer cannot be OK.
  RETURN_IF_ERROR(CheckMayAcknowledge());
  const uint64_t sequence = LatestSequence();
  if (acks_ != nullptr) RETURN_IF_ERROR(acks_->WaitAcked(sequence));
  RETURN_IF_ERROR(CheckMayAcknowledge());
  if (options_.on_acknowledged) options_.on_acknowledged(sequence);
  return absl::OkStatus();
}

absl::Status FilterStore::CheckMayAcknowledge() const {
  if (options_.may_acknowledge == nullptr || options_.may_acknowledge()) return absl::OkStatus();
  return absl::UnavailableError(
      "this pod is no longer sure it is the primary (its etcd lease could not be renewed in "
      "time), or it is handing over to another pod: the write is not acknowledged and may be "
      "lost; retry it, through any pod");
}

void FilterStore::TouchIdle(absl::Span<const std::string> names) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  if (!CheckOpen().ok() || options_.replica) return;
  const absl::Time now = options_.clock->Now();
  for (const std::string& name : names) {
    if (!ValidateFilterName(name).ok()) continue;
    absl::StatusOr<std::shared_ptr<StoredFilter>> filter = Acquire(name);
    if (filter.ok() && *filter != nullptr && (*filter)->has_idle_ttl() && (*filter)->usable()) {
      (*filter)->TouchIdle(now);
    }
  }
}

absl::Status FilterStore::ApplyReplicated(absl::Span<const LogBatch> batches, bool sync) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  if (!options_.replica) {
    return absl::FailedPreconditionError("only a replica applies the primary's log");
  }
  for (const LogBatch& batch : batches) {
    bloomsync::MutexLock apply(&replica_mu_);
    const uint64_t expected = LatestSequence() + 1;
    if (batch.sequence != expected) {
      return absl::DataLossError(absl::StrCat("the primary's batch at sequence ", batch.sequence,
                                              " does not follow this replica's ", expected - 1));
    }
    rocksdb::WriteBatch write(batch.data);
    if (write.Count() != batch.count) {
      return absl::DataLossError(absl::StrCat("the primary's batch at sequence ", batch.sequence,
                                              " holds ", write.Count(), " writes, not ",
                                              batch.count));
    }
    RETURN_IF_ERROR(db_->Write(write, /*sync=*/false, "applying the primary's log"));
    if (LatestSequence() != batch.sequence + batch.count - 1) {
      return absl::DataLossError(
          absl::StrCat("after the primary's batch at sequence ", batch.sequence,
                       " this replica is at ", LatestSequence(), ", not ",
                       batch.sequence + batch.count - 1, ": something else wrote to its RocksDB"));
    }
    ApplyToResident(write);
    replica_visible_.store(batch.sequence + batch.count - 1, std::memory_order_release);
  }
  if (sync && !batches.empty()) RETURN_IF_ERROR(db_->SyncWal());
  return absl::OkStatus();
}

void FilterStore::ApplyToResident(const rocksdb::WriteBatch& batch) {
  BatchEffects effects(db_->filters()->GetID(), db_->journal()->GetID());
  if (rocksdb::Status read = batch.Iterate(&effects); !read.ok()) {
    bloomlog::LogError(absl::StrCat("reading a replicated batch: ", read.ToString()));
    return;
  }
  for (const BatchEffects::JournalRecord& record : effects.journal) {
    absl::StatusOr<JournalKeyParts> key = ParseJournalKey(record.key);
    if (!key.ok()) continue;
    std::shared_ptr<StoredFilter> filter = replica_index_.Find(key->generation);
    if (filter == nullptr || registry_.Find(filter->name()) != filter) continue;  // cold
    const absl::Status replayed = filter->ReplayJournalRecord(record.value);
    if (!replayed.ok()) {
      // Not what this replica holds in memory (a sub-filter it has not opened): load it again.
      effects.names.emplace_back(filter->name());
    }
  }
  for (const std::string& name : effects.names) {
    if (registry_.Find(name) == nullptr) continue;
    Remove(name);
    residency_.cold_filters.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace storage

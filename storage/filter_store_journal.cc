// FilterStore's journal reads for slot moves (filter_store.h: StartJournal, ReadJournal,
// AddHashes, ApplyJournalRecords). A mover copies a filter once (Export, Import), then catches
// the copy up from this store's journal, so the last catch-up, while the slot's writes pause,
// moves what changed since the previous one, not the whole filter:
// - a BLOOM filter's add record holds the hashes of the items it made new
//   (storage/format/encoding.h), which the copy adds as its own adds (AddHashes);
// - a windowed BLOOM filter's records also name the slices (sub-filters) the hashes went to,
//   which the copy shares with the owner: it sets them in the same slices, so that they age
//   as they do at the owner (ApplyJournalRecords; a slice the owner opened after the copy
//   is not there, and that filter is copied whole again);
// - a CUCKOO filter's record holds the table values an add or remove wrote
//   (format/cuckoo_journal.h), which the copy writes in the same order (ApplyJournalRecords).
//   The copy may already hold some of them (it was exported after the position was taken):
//   writing a value again is harmless, and each slot ends as its last record left it, as
//   it does when a checkpoint's pages are loaded and the journal replayed over them.
// JournalHolds (filter/journal_holds.h) keeps checkpoints from trimming records the mover has
// not read yet, and CreationLog (filter/creation_log.h) tells the mover which filters were made
// since its last round.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "storage/db/database.h"
#include "storage/db/rocksdb_status.h"
#include "storage/filter_store.h"
#include "storage/format/cuckoo_journal.h"
#include "storage/format/encoding.h"
#include "storage/write/operation_batch.h"

namespace storage {

absl::StatusOr<JournalPosition> FilterStore::StartJournal(absl::string_view name,
                                                          absl::Duration hold) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, FindUsable(name));
  if (filter->creation_pending()) {
    // Its first add writes pages, not a journal record: a position read now could miss it.
    // That write is a moment away.
    return absl::UnavailableError(
        absl::StrCat("filter '", name, "' is being created by its first add: retry"));
  }
  // The hold first, keeping everything not trimmed yet: a checkpoint that missed it took its
  // sequence before the one read below, so it trims nothing after that one.
  const uint64_t generation = filter->generation();
  journal_holds_.Hold(generation, filter->checkpoint_seq(), options_.clock->Now(), hold);
  JournalPosition position{generation, filter->AppliedJournalSeq()};
  journal_holds_.Hold(generation, position.seq, options_.clock->Now(), hold);
  return position;
}

CreationLog::Position FilterStore::WatchCreations(absl::Duration hold) {
  return creations_.Watch(options_.clock->Now(), hold);
}

absl::optional<CreationLog::Made> FilterStore::CreationsSince(CreationLog::Position from,
                                                              absl::Duration hold) {
  return creations_.Since(from, options_.clock->Now(), hold);
}

absl::StatusOr<JournalDelta> FilterStore::ReadJournal(absl::string_view name, JournalPosition from,
                                                      size_t max_hashes, absl::Duration hold) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, FindUsable(name));
  if (filter->generation() != from.generation) {
    return absl::FailedPreconditionError(
        absl::StrCat("filter '", name,
                     "' was deleted and made again since the position read "
                     "(generation ",
                     from.generation, ", now ", filter->generation(), "): copy it whole"));
  }
  if (!journal_holds_.Covers(from.generation, from.seq, options_.clock->Now())) {
    return absl::FailedPreconditionError(
        absl::StrCat("filter '", name, "': its journal after sequence ", from.seq,
                     " was not held throughout (the hold lapsed, or this server restarted or "
                     "took over since): copy it whole"));
  }
  JournalDelta delta;
  delta.to = from;
  // Nothing added since: no lock, no scan (a round visits every filter of the moving slots,
  // most of them unchanged when they are many small ones).
  if (filter->last_journal_seq() <= from.seq) {
    journal_holds_.Hold(from.generation, from.seq, options_.clock->Now(), hold);
    return delta;
  }
  // Only records whose adds have set their bits: a later one may sit before an earlier one
  // still being written, which a reader must not skip.
  const uint64_t applied = filter->AppliedJournalSeq();
  if (applied > from.seq) {
    const std::string start = JournalKey(from.generation, from.seq + 1);
    const std::string end = JournalKey(from.generation, applied + 1);
    const rocksdb::Slice upper(end);
    rocksdb::ReadOptions options;
    options.iterate_upper_bound = &upper;
    options.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it = db_->NewIterator(options, db_->journal());
    // Records, for the copy to apply as they are (decoded, and checksums checked, there).
    const bool as_records = filter->cuckoo() != nullptr || filter->windowed();
    std::vector<Run> runs;
    std::vector<uint64_t> hashes;
    size_t cost = 0;
    for (it->Seek(start); it->Valid(); it->Next()) {
      if (cost >= max_hashes) {
        delta.more = true;
        break;
      }
      ASSIGN_OR_RETURN(const JournalKeyParts key, ParseJournalKey(ViewOf(it->key())));
      const absl::string_view record = ViewOf(it->value());
      if (as_records) {
        if (filter->cuckoo() != nullptr && !IsCuckooJournalRecord(record)) {
          return absl::DataLossError(absl::StrCat("filter '", name, "': journal record ", key.seq,
                                                  " is not a cuckoo filter's"));
        }
        delta.records.emplace_back(record);
        cost += JournalRecordCost(record.size());
      } else {
        RETURN_IF_ERROR(DecodeJournalRecord(record, runs, hashes));
        delta.hashes.insert(delta.hashes.end(), hashes.begin(), hashes.end());
        cost += hashes.size();
      }
      delta.to.seq = key.seq;
    }
    RETURN_IF_ERROR(FromRocksDb(it->status(), "reading a filter's journal"));
    if (!delta.more) delta.to.seq = applied;
  }
  journal_holds_.Hold(from.generation, delta.to.seq, options_.clock->Now(), hold);
  return delta;
}

absl::StatusOr<size_t> FilterStore::AddHashes(absl::string_view name,
                                              absl::Span<const uint64_t> hashes) {
  absl::StatusOr<std::unique_ptr<bool[]>> added;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<OperationBatch> batch, StartBatch());
    const OperationBatch::Ticket ticket = batch->AddHashed(name, hashes);
    added = batch->TakeAnswers(ticket);
  }
  if (!added.ok()) return added.status();
  RETURN_IF_ERROR(WaitReplicated());
  size_t fresh = 0;
  for (size_t i = 0; i < hashes.size(); ++i) fresh += (*added)[i] ? 1 : 0;
  return fresh;
}

absl::StatusOr<size_t> FilterStore::ApplyJournalRecords(
    absl::string_view name, absl::Span<const absl::string_view> records) {
  if (records.empty()) return 0;
  absl::StatusOr<size_t> written;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<OperationBatch> batch, StartBatch());
    written = batch->CatchUp(name, records);
  }
  if (!written.ok()) return written.status();
  RETURN_IF_ERROR(WaitReplicated());  // holding no lock
  return *written;
}

}  // namespace storage

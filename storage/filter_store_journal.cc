// FilterStore's journal reads for slot moves (filter_store.h: StartJournal, ReadJournal,
// AddHashes). A mover copies a BLOOM filter once (Export, Import), then catches the copy up
// from this store's journal: each add's record holds the hashes of the items it made new
// (storage/format/encoding.h), which the copy adds as its own adds (AddHashes). So the last
// catch-up, while the slot's writes pause, moves what was added since the previous one, not
// the whole filter. A CUCKOO or windowed filter's journal cannot be replayed so, but it says
// whether the filter changed since a copy: only those that did are copied again, so the pause
// copies the ones written since the last round, not every one of them. JournalHolds
// (filter/journal_holds.h) keeps checkpoints from trimming records the mover has not read yet.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "storage/db/rocksdb_status.h"
#include "storage/db/database.h"
#include "storage/filter_store.h"
#include "storage/format/encoding.h"

namespace storage {

namespace {

// Only a BLOOM filter without a window journals what a copy can replay as adds: a CUCKOO
// filter's records are table changes, a window's name slices that age. Their journal still
// says whether they changed since a position: a mover copies them early and again only if so.
bool ReplayableJournal(const StoredFilter& filter) {
  return filter.cuckoo() == nullptr && !filter.windowed();
}

}  // namespace

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
  if (!ReplayableJournal(*filter)) {
    // Changed since (a merge into it releases the hold, caught above): only a new copy has it.
    return absl::FailedPreconditionError(absl::StrCat(
        "filter '", name, "' is ", filter->cuckoo() != nullptr ? "a CUCKOO" : "a windowed",
        " filter changed since sequence ", from.seq,
        ": its journal does not replay as adds elsewhere; copy it whole"));
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
    std::vector<Run> runs;
    std::vector<uint64_t> hashes;
    for (it->Seek(start); it->Valid(); it->Next()) {
      if (delta.hashes.size() >= max_hashes) {
        delta.more = true;
        break;
      }
      ASSIGN_OR_RETURN(const JournalKeyParts key, ParseJournalKey(ViewOf(it->key())));
      RETURN_IF_ERROR(DecodeJournalRecord(ViewOf(it->value()), runs, hashes));
      delta.hashes.insert(delta.hashes.end(), hashes.begin(), hashes.end());
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

}  // namespace storage

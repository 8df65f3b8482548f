// ReplicationService's ReadJournal and ApplyJournal (bloom.replication.v1): a slot mover
// (bloom-cli cluster move, client/cli_move.cc) catches the target group's copies up from the
// owner's journal (storage/filter_store_journal.cc): BLOOM filters' by the hashes of the items
// added, CUCKOO filters' by the table values their adds and removes wrote. So the write pause
// at the end of a move carries only the changes since the previous catch-up, not whole filters.
// Bounded per call: cursors and deltas, and hashes (a record counting a hash per 8 bytes), so
// one call holds little memory and time. ListMade tells the mover which filters the owner made
// since its last round (storage/filter/creation_log.h), so a round need not list them all.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/slot.h"
#include "replication/replication_service.h"
#include "service/convert.h"

namespace replication {

namespace v1 = bloom::replication::v1;

namespace {

constexpr int kMaxFiltersPerCall = 1000;
constexpr uint32_t kDefaultMaxHashes = 100'000;
constexpr uint32_t kMaxHashes = 1'000'000;
// How long a read holds a filter's journal (and ListMade its log of the filters made): several
// of a mover's rounds, and a lapse once it is gone.
constexpr absl::Duration kJournalHold = absl::Minutes(1);

// A filter's own failure, in its delta or result (the call itself succeeds).
template <typename Answer>
void SetStatus(const absl::Status& status, Answer* answer) {
  answer->set_code(static_cast<int32_t>(status.code()));
  answer->set_message(static_cast<std::string>(status.message()));
}

}  // namespace

grpc::Status ReplicationService::ReadJournal(grpc::ServerContext* context,
                                             const v1::ReadJournalRequest* request,
                                             v1::ReadJournalResponse* response) {
  if (grpc::Status admitted = Admit(context, service::Role::kAdmin, /*primary_only=*/true);
      !admitted.ok()) {
    return admitted;
  }
  if (request->cursors_size() > kMaxFiltersPerCall) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("ReadJournal takes at most ", kMaxFiltersPerCall, " cursors, not ",
                         request->cursors_size())};
  }
  const size_t budget = request->max_hashes() == 0
                            ? kDefaultMaxHashes
                            : std::min<uint32_t>(request->max_hashes(), kMaxHashes);
  size_t answered = 0;
  for (const v1::JournalCursor& cursor : request->cursors()) {
    v1::JournalDelta* delta = response->add_deltas();
    delta->set_name(cursor.name());
    delta->set_generation(cursor.generation());
    delta->set_seq(cursor.seq());
    if (cursor.start()) {
      absl::StatusOr<storage::JournalPosition> at =
          store_->StartJournal(cursor.name(), kJournalHold);
      if (!at.ok()) {
        SetStatus(at.status(), delta);
        continue;
      }
      delta->set_generation(at->generation);
      delta->set_seq(at->seq);
      continue;
    }
    if (answered >= budget) {  // this answer is full: read it next time
      delta->set_more(true);
      continue;
    }
    absl::StatusOr<storage::JournalDelta> read = store_->ReadJournal(
        cursor.name(), {cursor.generation(), cursor.seq()}, budget - answered, kJournalHold);
    if (read.ok() && !read->records.empty() && !request->take_records()) {
      // A mover that cannot apply them (an older one) copies the filter again instead.
      read = absl::FailedPreconditionError(absl::StrCat(
          "filter '", cursor.name(), "' (a CUCKOO or windowed filter) changed since sequence ",
          cursor.seq(), ", and the request does not take its journal records: copy it whole"));
    }
    if (!read.ok()) {
      SetStatus(read.status(), delta);
      continue;
    }
    delta->set_generation(read->to.generation);
    delta->set_seq(read->to.seq);
    delta->set_more(read->more);
    delta->mutable_hashes()->Add(read->hashes.begin(), read->hashes.end());
    answered += read->hashes.size();
    for (std::string& record : read->records) {
      answered += storage::JournalRecordCost(record.size());
      delta->add_records(std::move(record));
    }
  }
  return grpc::Status::OK;
}

grpc::Status ReplicationService::ApplyJournal(grpc::ServerContext* context,
                                              const v1::ApplyJournalRequest* request,
                                              v1::ApplyJournalResponse* response) {
  if (grpc::Status admitted = Admit(context, service::Role::kAdmin, /*primary_only=*/true);
      !admitted.ok()) {
    return admitted;
  }
  if (request->deltas_size() > kMaxFiltersPerCall) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("ApplyJournal takes at most ", kMaxFiltersPerCall, " deltas, not ",
                         request->deltas_size())};
  }
  size_t hashes = 0;
  for (const v1::JournalDelta& delta : request->deltas()) {
    hashes += delta.hashes_size();
    for (const std::string& record : delta.records()) {
      hashes += storage::JournalRecordCost(record.size());
    }
  }
  if (hashes > kMaxHashes) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("ApplyJournal takes at most ", kMaxHashes,
                         " hashes (a journal record counting one per 8 bytes), not ", hashes)};
  }
  for (const v1::JournalDelta& delta : request->deltas()) {
    v1::JournalApplied* result = response->add_results();
    if (!delta.hashes().empty()) {
      absl::StatusOr<size_t> added = store_->AddHashes(
          delta.name(), absl::MakeConstSpan(delta.hashes().data(), delta.hashes_size()));
      if (!added.ok()) {
        SetStatus(added.status(), result);
        continue;
      }
      result->set_new_items(*added);
      if (options_.on_caught_up) options_.on_caught_up(delta.hashes_size());
    }
    if (!delta.records().empty()) {
      const std::vector<absl::string_view> records(delta.records().begin(), delta.records().end());
      absl::StatusOr<size_t> written = store_->ApplyJournalRecords(delta.name(), records);
      if (!written.ok()) {
        SetStatus(written.status(), result);
        continue;
      }
      result->set_records(static_cast<uint32_t>(records.size()));
      if (options_.on_caught_up) options_.on_caught_up(*written);
    }
  }
  response->set_sequence(store_->LatestSequence());
  return grpc::Status::OK;
}

grpc::Status ReplicationService::ListMade(grpc::ServerContext* context,
                                          const v1::ListMadeRequest* request,
                                          v1::ListMadeResponse* response) {
  if (grpc::Status admitted = Admit(context, service::Role::kAdmin, /*primary_only=*/true);
      !admitted.ok()) {
    return admitted;
  }
  if (request->slot_count() == 0 || request->slot_count() > slots::kMaxSlotCount ||
      request->first() > request->last() || request->last() >= request->slot_count()) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("slots ", request->first(), "-", request->last(), " of ",
                         request->slot_count(), " are not a span of a deployment's slots")};
  }
  auto set_position = [](const storage::CreationLog::Position& at, v1::MadePosition* position) {
    position->set_epoch(at.epoch);
    position->set_count(at.count);
  };
  if (request->start()) {
    set_position(store_->WatchCreations(kJournalHold), response->mutable_next());
    response->set_complete(true);
    return grpc::Status::OK;
  }
  absl::optional<storage::CreationLog::Made> made =
      store_->CreationsSince({request->since().epoch(), request->since().count()}, kJournalHold);
  if (!made.has_value()) return grpc::Status::OK;  // not complete: list every filter
  response->set_complete(true);
  set_position(made->next, response->mutable_next());
  for (std::string& name : made->names) {
    const uint32_t slot = slots::SlotOf(name, request->slot_count());
    if (slot >= request->first() && slot <= request->last()) {
      response->add_names(std::move(name));
    }
  }
  return grpc::Status::OK;
}

}  // namespace replication

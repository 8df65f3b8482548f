// The journal catch-up of a slot move (client/move_catch_up.h).
#include "client/move_catch_up.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/bloom_client.h"

namespace bloomcli {

namespace rv1 = bloom::replication::v1;

namespace {

constexpr int kFiltersPerCall = 1000;  // the server's bound per call

absl::Status Called(const grpc::Status& status) { return bloomclient::FromGrpcStatus(status); }

}  // namespace

absl::StatusOr<JournalCursor> StartJournal(const std::shared_ptr<grpc::Channel>& owner,
                                           const std::string& name, const PrepareCall& prepare) {
  rv1::ReadJournalRequest request;
  rv1::JournalCursor* cursor = request.add_cursors();
  cursor->set_name(name);
  cursor->set_start(true);
  grpc::ClientContext context;
  prepare(context);
  rv1::ReadJournalResponse response;
  absl::Status called =
      Called(rv1::ReplicationService::NewStub(owner)->ReadJournal(&context, request, &response));
  if (!called.ok()) return called;
  if (response.deltas_size() != 1) {
    return absl::InternalError("ReadJournal answered no delta for its cursor");
  }
  const rv1::JournalDelta& delta = response.deltas(0);
  if (delta.code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(delta.code()), delta.message());
  }
  return JournalCursor{delta.generation(), delta.seq()};
}

absl::StatusOr<CatchUpRound> CatchUp(const std::shared_ptr<grpc::Channel>& owner,
                                     const std::shared_ptr<grpc::Channel>& target,
                                     std::map<std::string, JournalCursor>& cursors,
                                     const PrepareCall& prepare) {
  CatchUpRound round;
  std::unique_ptr<rv1::ReplicationService::Stub> from = rv1::ReplicationService::NewStub(owner);
  std::unique_ptr<rv1::ReplicationService::Stub> to = rv1::ReplicationService::NewStub(target);
  std::vector<std::string> pending;  // filters whose journal has more to read
  std::set<std::string> refused;     // filters whose changes the target refused
  pending.reserve(cursors.size());
  for (const auto& [name, cursor] : cursors) pending.push_back(name);
  while (!pending.empty()) {
    std::vector<std::string> more;
    for (size_t begin = 0; begin < pending.size(); begin += kFiltersPerCall) {
      const size_t end = std::min(pending.size(), begin + kFiltersPerCall);
      rv1::ReadJournalRequest read;
      read.set_take_records(true);
      for (size_t i = begin; i < end; ++i) {
        const JournalCursor& at = cursors.at(pending[i]);
        rv1::JournalCursor* cursor = read.add_cursors();
        cursor->set_name(pending[i]);
        cursor->set_generation(at.generation);
        cursor->set_seq(at.seq);
      }
      grpc::ClientContext read_context;
      prepare(read_context);
      rv1::ReadJournalResponse deltas;
      if (absl::Status called = Called(from->ReadJournal(&read_context, read, &deltas));
          !called.ok()) {
        return called;
      }
      if (deltas.deltas_size() != read.cursors_size()) {
        return absl::InternalError(absl::StrCat("ReadJournal answered ", deltas.deltas_size(),
                                                " deltas for ", read.cursors_size(), " cursors"));
      }
      // The adds go to the target before the cursors advance: a round that fails is read again
      // from the old positions.
      rv1::ApplyJournalRequest apply;
      std::vector<const rv1::JournalDelta*> applied;
      for (const rv1::JournalDelta& delta : deltas.deltas()) {
        if (delta.code() == static_cast<int>(absl::StatusCode::kNotFound)) {
          round.gone.push_back(delta.name());
        } else if (delta.code() != 0) {
          round.copy_whole.push_back(delta.name());
        } else if (!delta.hashes().empty() || !delta.records().empty()) {
          rv1::JournalDelta* changes = apply.add_deltas();
          changes->set_name(delta.name());
          *changes->mutable_hashes() = delta.hashes();
          *changes->mutable_records() = delta.records();
          applied.push_back(&delta);
        }
      }
      if (apply.deltas_size() > 0) {
        grpc::ClientContext apply_context;
        prepare(apply_context);
        rv1::ApplyJournalResponse results;
        if (absl::Status called = Called(to->ApplyJournal(&apply_context, apply, &results));
            !called.ok()) {
          return called;
        }
        if (results.results_size() != apply.deltas_size()) {
          return absl::InternalError("ApplyJournal answered a result per delta");
        }
        for (int i = 0; i < results.results_size(); ++i) {
          // A copy the target lacks (or refuses), or records it did not write (a pod that does
          // not know them skips them): copied whole again, and read no further.
          const rv1::JournalApplied& result = results.results(i);
          if (result.code() != 0 ||
              static_cast<int>(result.records()) != applied[i]->records_size()) {
            round.copy_whole.push_back(applied[i]->name());
            refused.insert(applied[i]->name());
          }
        }
      }
      for (const rv1::JournalDelta& delta : deltas.deltas()) {
        if (delta.code() != 0 || refused.count(delta.name()) != 0) continue;
        round.hashes += delta.hashes_size();
        round.records += delta.records_size();
        cursors[delta.name()] = {delta.generation(), delta.seq()};
        if (delta.more()) more.push_back(delta.name());
      }
    }
    pending = std::move(more);
  }
  for (const std::vector<std::string>* dropped : {&round.copy_whole, &round.gone}) {
    for (const std::string& name : *dropped) cursors.erase(name);
  }
  return round;
}

}  // namespace bloomcli

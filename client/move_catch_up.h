// The journal catch-up of a slot move (bloom-cli cluster move, cli_move.h): the target group's
// copies of filters without a window follow their owner's writes from its journal
// (bloom.replication.v1 ReadJournal at the owner's primary, ApplyJournal at the target's): a
// BLOOM filter's as the hashes of the items added, a CUCKOO filter's as the table values its
// adds and removes wrote. So a round, and the last one while writes pause, moves what changed
// since the previous round instead of whole filters.
//
//   absl::StatusOr<JournalCursor> at = StartJournal(owner, name, prepare);  // then copy it
//   cursors[name] = *at;
//   absl::StatusOr<CatchUpRound> round = CatchUp(owner, target, cursors, prepare);
//   ... copy round->copy_whole again (StartJournal first); forget round->gone
//
// Thread-safety: the functions are; a cursor map is its caller's.
#ifndef CLIENT_MOVE_CATCH_UP_H_
#define CLIENT_MOVE_CATCH_UP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace bloomcli {

// Where a copy stands in its filter's journal at the owner.
struct JournalCursor {
  uint64_t generation = 0;
  uint64_t seq = 0;
};

struct CatchUpRound {
  uint64_t hashes = 0;   // item hashes the round moved
  uint64_t records = 0;  // CUCKOO and windowed filters' journal records (an add or remove each)
  // Filters the journal cannot catch up (a windowed filter that changed, a lapsed hold, a
  // merge into it, a filter made again, a copy missing at the target or unable to take the
  // records, a target too old to write them): copy them whole again. Their cursors are
  // dropped.
  std::vector<std::string> copy_whole;
  // Filters deleted at the owner meanwhile; their cursors are dropped.
  std::vector<std::string> gone;
};

// Sets a call's deadline and headers (the caller's token, the mover's header).
using PrepareCall = std::function<void(grpc::ClientContext& context)>;

// Holds `name`'s journal at the owner's primary and answers its position: a copy of the filter
// made after this holds every add up to it. FAILED_PRECONDITION for a filter to copy whole.
absl::StatusOr<JournalCursor> StartJournal(const std::shared_ptr<grpc::Channel>& owner,
                                           const std::string& name, const PrepareCall& prepare);

// One round: every filter of `cursors` read from the owner's primary (in calls of up to 1,000
// filters and 100,000 hashes) and its changes applied to the target's copy; the cursors
// advance. A failed call fails the round (retry it: what was applied is applied again
// harmlessly: adds of the same items, and writes of the same table values in the same order,
// are idempotent).
absl::StatusOr<CatchUpRound> CatchUp(const std::shared_ptr<grpc::Channel>& owner,
                                     const std::shared_ptr<grpc::Channel>& target,
                                     std::map<std::string, JournalCursor>& cursors,
                                     const PrepareCall& prepare);

}  // namespace bloomcli

#endif  // CLIENT_MOVE_CATCH_UP_H_

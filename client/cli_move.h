// bloom-cli cluster move: moves slots of a sharded deployment, with their filters, from the
// group that owns them to another, online, driving the move's steps in the shard map
// (bloom.replication.v1 ChangeShardMap, MoveStep):
//
//   1. begin: the map says the slots are moving; their owner goes on serving them.
//   2. copy: each filter of the slots is exported from the owner's primary and imported into
//      the target's, replacing any older copy, several filters at once. Its journal is held
//      at the owner first, and its copy then follows it (move_catch_up.h): each round moves
//      to the copies what changed since the last, until a round moves little.
//   3. pause: the map pauses writes to the slots everywhere; the mover waits until every member
//      of the owning group holds that version, so that no pod can still take a write (and
//      a write admitted before is not acknowledged after: ShardRouter::SettleWrite).
//   4. the last changes: a last catch-up round, filters created since (copied whole: the
//      owner's primary names the filters it made since the last round, ListMade, so a round
//      need not list every filter it holds), any filter the journal could not follow (copied
//      whole), and copies of filters deleted meanwhile (deleted at the target).
//   5. finish: once the target's followers hold the copies, the map names the target the
//      owner (writes resume there); then the old owner's copies are deleted.
//
// Everything the move has done is in the map: run the same command again after it was killed
// and it resumes from its step (copying again what it cannot know was copied), or, once the
// slots are the target's, deletes the copies left at other groups. `--abort` gives the move
// up, the slots staying their owner's, and deletes the target's copies. A new move of slots
// whose owner holds more than `max_filters` filters in them is refused before it begins: the
// last round, while writes pause, reads every copy's journal (about 2 us each).
//
// Thread-safety: runs on the calling thread, which starts helpers to copy filters and joins
// them before it goes on; prints to std::cout or stderr.
#ifndef CLIENT_CLI_MOVE_H_
#define CLIENT_CLI_MOVE_H_

#include <cstdint>
#include <string>

#include "client/bloom_client.h"

namespace bloomcli {

// The filters one move may carry unless told otherwise: about 0.6 s of write pause.
inline constexpr uint64_t kDefaultMaxFiltersPerMove = 300'000;

struct MoveArgs {
  std::string slots;        // FIRST-LAST or SLOT
  std::string to;           // the target group
  std::string max_filters;  // default kDefaultMaxFiltersPerMove
  std::string copies;       // filters copied at once (default 4)
  bool abort = false;
};

// `client` talks to any pod of the deployment; `options` open the others. Returns the exit
// status.
int MoveSlots(const bloomclient::BloomClient& client, const bloomclient::ClientOptions& options,
              const MoveArgs& args);

}  // namespace bloomcli

#endif  // CLIENT_CLI_MOVE_H_

// What a cluster keeps in etcd, and the rule for who may become its primary.
//
// Keys under the cluster's prefix (--cluster):
//   <cluster>/members/<name>  MemberRecord, under the member's own lease: who is up, where it
//                             is reached, (written when an election starts) the last
//                             sequence it holds, and the SHA-256 of the secret its Tail
//                             streams show the primary (a stream counts as this member only
//                             with it)
//   <cluster>/leader          LeaderRecord, under the primary's lease. Its create_revision is
//                             the term: etcd revisions only grow, so a later primary's term is
//                             always higher
//   <cluster>/election        while there is no leader: created by the first member to see
//                             none; member records written after its create_revision are
//                             what members hold now (older ones may be from before the last
//                             primary went). The winner deletes it as it takes the leader key
//   <cluster>/sync            SyncSet: the followers whose acknowledgements count, written by
//                             the primary before it counts any of theirs (Patroni's
//                             synchronous mode), and a planned switchover's target
//
// The takeover rule (MayTakeOver), for a primary that ran with --min_replica_acks=N >= 1 and
// recorded K followers in the sync set:
// - the primary that wrote the set holds everything it acknowledged: if it is up (restarted)
//   and holds at least what every follower up holds (its data is not a lost or older copy),
//   it leads again;
// - otherwise every acknowledged write is on at least N of the K, so once K - N + 1 of them
//   have said what they hold, at least one of those holds every acknowledged write, and the
//   one holding the most does: only it may take over. With fewer up, nobody may (an
//   acknowledged write could be lost). A member holding nothing (sequence 0: its data dir
//   was lost) does not count.
// That holds only if a follower leaves the set after the followers staying in it hold every
// write acknowledged so far, and joins it (the set written) before its acknowledgements count:
// the primary's side of the rule. A new primary starts with an empty set: until its followers
// hold what it held when it took over, only it can lead.
// A planned switchover comes first: a primary hands over only after it stopped acknowledging
// writes and the target acknowledged every write it holds (handover_sequence). That target
// holds every acknowledged write, whatever N is, so once it has said it holds at least that
// much it takes over, and nobody else may while it is up.
// With N = 0 nothing guarantees that: the member holding the most of those up takes over, and
// writes only the old primary had are lost (README, "High availability"). Before any sync set
// was written no write was acknowledged, so any member may lead.
//
// Records are short text lines (`key=value` words), readable with etcdctl.
//
// Thread-safety: plain values and pure functions.
#ifndef COORDINATION_CLUSTER_STATE_H_
#define COORDINATION_CLUSTER_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace coordination {

struct MemberRecord {
  std::string name;
  std::string address;  // host:port for clients and followers
  // The last sequence this member holds durably, when it last said (0: not said).
  uint64_t sequence = 0;
  // The term of the primary it followed (or led) then; 0 for none.
  int64_t term = 0;
  // Lowercase hex SHA-256 of the member's secret (ClusterMember::secret); empty: none.
  std::string proof;
};

// The lowercase hex SHA-256 of `secret`, as a MemberRecord's proof names it.
std::string ProofOf(absl::string_view secret);

struct LeaderRecord {
  std::string name;
  std::string address;
  // The primary's latest sequence when it took over: a follower holding more than this has
  // writes the new primary never had, and copies a snapshot instead of tailing on.
  uint64_t start_sequence = 0;
};

struct SyncSet {
  std::string leader;              // the primary that wrote it
  int64_t term = 0;                // its term
  int required = 0;                // its --min_replica_acks
  std::vector<std::string> names;  // the followers whose acknowledgements count
  // Set by a primary handing over (a planned switchover): the member to take over, which
  // holds every write up to handover_sequence, the last this primary may have acknowledged.
  std::string handover_to;
  uint64_t handover_sequence = 0;
};

std::string Encode(const MemberRecord& record);
std::string Encode(const LeaderRecord& record);
std::string Encode(const SyncSet& set);
// INVALID_ARGUMENT naming what is wrong with `text`.
absl::StatusOr<MemberRecord> DecodeMember(absl::string_view text);
absl::StatusOr<LeaderRecord> DecodeLeader(absl::string_view text);
absl::StatusOr<SyncSet> DecodeSyncSet(absl::string_view text);

// The cluster's keys.
std::string MembersPrefix(absl::string_view cluster);
std::string MemberKey(absl::string_view cluster, absl::string_view name);
std::string LeaderKey(absl::string_view cluster);
std::string SyncKey(absl::string_view cluster);
std::string ElectionKey(absl::string_view cluster);

struct TakeoverDecision {
  bool allowed = false;
  // Who should take over (when one can), and in words why this member may or may not.
  std::string candidate;
  std::string reason;
};

// Whether `me` may take over, given the members that are up and said what they hold (`me`
// among them) and the last sync set (nullptr: none was ever written). The candidate is the
// member holding the highest sequence among those that count, ties going to the smallest name,
// so that every member reading the same records agrees on one.
TakeoverDecision MayTakeOver(const std::string& me, const std::vector<MemberRecord>& members,
                             const SyncSet* sync);

}  // namespace coordination

#endif  // COORDINATION_CLUSTER_STATE_H_

// What changes when a pod's role changes (with --etcd_endpoints): each incarnation's settings
// for the role etcd gave it, the term its data continues (kept beside the data, so that a pod
// restarted in the same term tails on instead of copying anew), and stepping down when it was
// elected without the data, or the shard map, it needs to lead.
//
//   const int64_t data_term = ReadDataTerm(data_dir);
//   ASSIGN_OR_RETURN(ServerConfig config, ConfigForRole(base, role, failover, ack_log,
//                                                       data_term, follower_options, copy_again));
//   if (role is primary && !ServesAsElected(failover, role, data_dir, version, signal)) ...
//
// Thread-safety: functions for main()'s thread.
#ifndef SERVER_ROLE_CHANGE_H_
#define SERVER_ROLE_CHANGE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordination/cluster_state.h"
#include "replication/follower.h"
#include "server/ack_log.h"
#include "server/failover.h"
#include "server/server_flags.h"
#include "server/shard_member.h"

namespace server {

// The term whose log the data in `data_dir` continues; 0 if not known.
int64_t ReadDataTerm(const std::string& data_dir);
// Records it (best effort: without it, the pod is copied anew when it need not be).
void WriteDataTerm(const std::string& data_dir, int64_t term);

// Each incarnation's settings for the role etcd gave it: a primary's acknowledgement fence and
// ack log, or a follower of the elected primary (and its `follower_options`). Sets
// `copy_again` when this pod holds writes the new primary never had (this pod led, or
// followed one that led, past the point where the new primary took over): they were never
// acknowledged, and a fresh copy drops them. `data_term`: the term whose log the data
// continues.
absl::StatusOr<ServerConfig> ConfigForRole(
    const ServerConfig& base, const coordination::Role& role, Failover& failover, AckLog* ack_log,
    int64_t data_term, absl::StatusOr<replication::FollowerOptions>& follower_options,
    bool& copy_again);

// Steps down from `role`'s term, then waits (within the lease) until the member's role changed.
// A stop signal that arrives meanwhile is left in `signal_number`.
void StepDownAndWait(Failover& failover, const coordination::Role& role, uint64_t role_version,
                     int& signal_number);

// An elected primary serves only if it holds what it said when it took over (its leader
// record's start sequence): a pod whose copy of the data was interrupted, or lost, steps down
// at once so that an election on what it really holds replaces it, rather than leading without
// the writes it claimed (or retrying a copy from a primary that is gone with its port closed).
// Returns whether it serves; if not, waits (within the lease) until the member's role changed.
// A stop signal that arrives meanwhile is left in `signal_number`.
bool ServesAsElected(Failover& failover, const coordination::Role& role,
                     const std::string& data_dir, uint64_t role_version, int& signal_number);

// A sharded pod elected primary takes writes only with the shard map etcd holds now: a slot
// move may have paused writes that its watch has not delivered yet. If its view cannot catch
// up within `wait` (etcd unreachable), it steps down as ServesAsElected does.
bool ShardViewCaughtUp(Failover& failover, const ShardMember& shards,
                       const coordination::Role& role, uint64_t role_version, absl::Duration wait,
                       int& signal_number);

}  // namespace server

#endif  // SERVER_ROLE_CHANGE_H_

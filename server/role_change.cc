// The role-change steps of server/main.cc's loop of incarnations (role_change.h).
#include "server/role_change.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "server/node.h"
#include "server/signals.h"

namespace server {
namespace {

// With failover, the term whose log the data dir continues, kept beside the data so that a
// pod restarted in the same term is not copied anew (a copy wipes the dir, this file too).
constexpr char kDataTermFile[] = "REPLICATION_TERM";

}  // namespace

int64_t ReadDataTerm(const std::string& data_dir) {
  std::ifstream in(std::filesystem::path(data_dir) / kDataTermFile);
  int64_t term = 0;
  if (!(in >> term) || term < 0) return 0;  // none, or unreadable: not known
  return term;
}

void WriteDataTerm(const std::string& data_dir, int64_t term) {
  const std::filesystem::path path = std::filesystem::path(data_dir) / kDataTermFile;
  const std::string tmp = path.string() + ".tmp";
  { std::ofstream(tmp) << term << "\n"; }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    bloomlog::LogWarning(absl::StrCat("cannot write ", path.string()));
  }
}

// Each incarnation's settings for the role etcd gave it: a primary's acknowledgement fence and
// ack log, or a follower of the elected primary (and its `follower_options`). Sets
// `copy_again` when this pod holds writes the new primary never had (this pod led, or
// followed one that led, past the point where the new primary took over): they were never
// acknowledged, and a fresh copy drops them. `data_term`: the term whose log the data
// continues.
absl::StatusOr<ServerConfig> ConfigForRole(
    const ServerConfig& base, const coordination::Role& role, Failover& failover, AckLog* ack_log,
    int64_t data_term, absl::StatusOr<replication::FollowerOptions>& follower_options,
    bool& copy_again) {
  ServerConfig config = base;
  if (role.kind == coordination::Role::Kind::kPrimary) {
    config.store.replica = false;
    config.store.may_acknowledge = failover.Fence();
    if (ack_log != nullptr) {
      ack_log->BeginTerm(role.term, role.leader.start_sequence);
      config.store.on_acknowledged = [ack_log](uint64_t sequence) {
        ack_log->Acknowledged(sequence);
      };
    }
    return config;
  }
  config.store.replica = true;
  config.replication.replicate_from = role.leader.address;
  // The primary's sync set names followers as their members do.
  if (config.replication.name.empty()) {
    config.replication.name = config.replication.advertise_address;
  }
  follower_options = FollowerOptionsFromConfig(config.replication, config.server.listen);
  if (!follower_options.ok()) {  // worded as at start-up (main)
    return absl::Status(follower_options.status().code(),
                        absl::StrCat("replication: ", follower_options.status().message()));
  }
  // The primary counts this pod's stream as its member's only with the member's secret.
  follower_options->member_secret = failover.member()->secret();
  if (role.term != data_term && failover.held() > role.leader.start_sequence) {
    bloomlog::LogWarning(absl::StrCat(
        "this pod holds sequence ", failover.held(), ", past ", role.leader.start_sequence,
        " where the primary ", role.leader.name,
        " took over: copying its data anew (writes only this pod had were never acknowledged)"));
    copy_again = true;
  }
  return config;
}

void StepDownAndWait(Failover& failover, const coordination::Role& role, uint64_t role_version,
                     int& signal_number) {
  if (absl::Status stepped = failover.member()->StepDown(role.term); !stepped.ok()) {
    bloomlog::LogWarning(absl::StrCat("etcd: stepping down: ", stepped.ToString()));
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!failover.RoleChangedSince(role_version) && absl::Now() < give_up &&
         (signal_number = StopSignalArrived()) == 0) {
    absl::SleepFor(absl::Milliseconds(20));
  }
}

bool ServesAsElected(Failover& failover, const coordination::Role& role,
                     const std::string& data_dir, uint64_t role_version, int& signal_number) {
  if (replication::DiscardIncompleteCopy(data_dir)) failover.SetHeld(0);
  const uint64_t held = failover.held();
  if (held >= role.leader.start_sequence) return true;
  bloomlog::LogError(absl::StrCat("elected primary of term ", role.term, " at sequence ",
                                  role.leader.start_sequence, " but this pod holds ", held,
                                  " (its copy of the data was interrupted): stepping down"));
  StepDownAndWait(failover, role, role_version, signal_number);
  return false;
}

bool ShardViewCaughtUp(Failover& failover, const ShardMember& shards,
                       const coordination::Role& role, uint64_t role_version, absl::Duration wait,
                       int& signal_number) {
  const absl::Status caught_up = shards.watch->CatchUp(absl::Now() + wait);
  if (caught_up.ok()) return true;
  bloomlog::LogError(absl::StrCat("elected primary of term ", role.term,
                                  " but its shard map is not the one etcd holds (",
                                  caught_up.ToString(), "): stepping down"));
  StepDownAndWait(failover, role, role_version, signal_number);
  return false;
}

}  // namespace server

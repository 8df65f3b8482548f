// A pod's part in a sharded deployment (shard_member.h).
#include "server/shard_member.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/slot.h"
#include "coordination/shard_map_record.h"
#include "grpcpp/grpcpp.h"
#include "server/etcd_access.h"
#include "server/node.h"

namespace server {

namespace {

// --shard_map_groups: the map's first version, unless one exists (ALREADY_EXISTS, from a pod
// that won the race or an earlier start); then this pod's group is added to it if it lacks it.
// Tried until `wait` passes while etcd is unreachable; the pod then serves no filter until a
// map naming its group appears, as without the flag.
void CreateFirstMap(ShardMember& member, const ReplicationConfig& replication,
                    absl::Duration wait) {
  absl::StatusOr<sharding::ShardMap> first =
      sharding::ShardMap::EvenSplit(replication.shard_map_groups, replication.shard_map_slots);
  if (!first.ok()) return;  // checked with the flags
  const absl::Time give_up = absl::Now() + wait;
  while (true) {
    absl::StatusOr<sharding::ShardMap> created =
        coordination::CreateShardMap(*member.etcd, member.map_key, *first);
    if (created.ok()) {
      bloomlog::LogInfo(
          absl::StrCat("created the shard map at ", member.map_key, ": ", created->Encode()));
      return;
    }
    if (absl::IsAlreadyExists(created.status())) {
      // A group added to the deployment later (the chart's sharding.groups raised): it joins
      // the map owning nothing, and slots are then moved to it.
      absl::StatusOr<sharding::ShardMap> joined = coordination::ChangeShardMap(
          *member.etcd, member.map_key,
          [&](const sharding::ShardMap& now) { return now.AddGroup(replication.cluster); });
      if (joined.ok() || absl::IsAlreadyExists(joined.status())) return;  // in it now
      if (absl::Now() > give_up) {
        bloomlog::LogWarning(absl::StrCat("could not add group ", replication.cluster,
                                          " to the shard map at ", member.map_key, ": ",
                                          joined.status().message()));
        return;
      }
      absl::SleepFor(absl::Milliseconds(200));
      continue;
    }
    if (absl::Now() > give_up) {
      bloomlog::LogWarning(absl::StrCat("could not create the shard map at ", member.map_key, ": ",
                                        created.status().message()));
      return;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardMember>> JoinShards(
    const ServerConfig& config, absl::Duration wait_for_map,
    std::shared_ptr<coordination::EtcdClient> etcd) {
  const ReplicationConfig& replication = config.replication;
  if (replication.shard_map.empty()) return nullptr;
  // Other groups' pods are reached as a follower reaches its primary: the same CA and client
  // certificate. Forwarded calls carry their caller's token.
  absl::StatusOr<replication::FollowerOptions> peers =
      FollowerOptionsFromConfig(replication, config.server.listen);
  if (!peers.ok()) return peers.status();
  auto member = std::make_unique<ShardMember>();
  member->map_key = replication.shard_map;
  if (etcd == nullptr) {
    absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> connected =
        ConnectToEtcd(replication, absl::Seconds(2));
    if (!connected.ok()) return connected.status();
    etcd = *std::move(connected);
  }
  member->etcd = std::move(etcd);
  if (!replication.shard_map_groups.empty()) CreateFirstMap(*member, replication, wait_for_map);
  absl::StatusOr<std::unique_ptr<coordination::ShardMapWatch>> watch =
      coordination::ShardMapWatch::Start(member->etcd.get(),
                                         {replication.shard_map, replication.cluster});
  if (!watch.ok()) return watch.status();
  member->watch = *std::move(watch);
  member->router = std::make_unique<service::ShardRouter>(
      member->watch.get(), [credentials = peers->credentials](const std::string& address) {
        grpc::ChannelArguments args;
        args.SetMaxReceiveMessageSize(-1);  // a forwarded answer is as large as the caller's
        args.SetMaxSendMessageSize(-1);
        // A pod restarting in a new role is back within a second: reconnect within 100 ms.
        // No keep-alive pings on an idle connection, which a server counts as abuse (its
        // default policy allows one each 5 minutes without calls) and then closes it.
        args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
        args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
        args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2'000);
        return grpc::CreateCustomChannel(address, credentials, args);
      });
  if (member->watch->WaitForVersion(1, absl::Now() + wait_for_map)) {
    bloomlog::LogInfo(absl::StrCat("sharded: group ", replication.cluster, " of the shard map at ",
                                   replication.shard_map, ", version ",
                                   member->watch->Current()->map.version()));
  } else {
    bloomlog::LogWarning(absl::StrCat("sharded: no shard map at ", replication.shard_map,
                                      " yet; calls for filters are refused until one is written "
                                      "(bloom-cli cluster init)"));
  }
  return member;
}

namespace {

// The map after one step of a move; a step other than the first must name the move in
// progress, so that two movers cannot drive each other's moves.
absl::StatusOr<sharding::ShardMap> MoveStep(const sharding::ShardMap& now,
                                            const bloom::replication::v1::MoveStep& step) {
  using Step = bloom::replication::v1::MoveStep;
  const sharding::SlotRange slots{step.first(), step.last()};
  if (step.step() == Step::STEP_BEGIN) return now.BeginMove(slots, step.to());
  const absl::optional<sharding::SlotMove>& moving = now.move();
  if (!moving.has_value() || !(moving->slots == slots) || moving->to != step.to()) {
    return absl::FailedPreconditionError(
        moving.has_value() ? absl::StrCat("the move in progress is of slots ", moving->slots.first,
                                          "-", moving->slots.last, " to ", moving->to)
                           : std::string("no move is in progress"));
  }
  switch (step.step()) {
    case Step::STEP_PAUSE:
      return now.PauseMove();
    case Step::STEP_FINISH:
      return now.FinishMove();
    case Step::STEP_ABORT:
      return now.AbortMove();
    default:
      return absl::InvalidArgumentError("MoveStep names no step");
  }
}

}  // namespace

absl::StatusOr<bloom::replication::v1::ChangeShardMapResponse> ChangeShardMap(
    ShardMember& member, const bloom::replication::v1::ChangeShardMapRequest& request) {
  absl::StatusOr<sharding::ShardMap> changed;
  if (request.has_create()) {
    const uint32_t slot_count = request.create().slot_count() == 0 ? slots::kDefaultSlotCount
                                                                   : request.create().slot_count();
    absl::StatusOr<sharding::ShardMap> first = sharding::ShardMap::EvenSplit(
        {request.create().groups().begin(), request.create().groups().end()}, slot_count);
    if (!first.ok()) return first.status();
    changed = coordination::CreateShardMap(*member.etcd, member.map_key, *first);
  } else if (request.change_case() == bloom::replication::v1::ChangeShardMapRequest::kAddGroup) {
    changed = coordination::ChangeShardMap(
        *member.etcd, member.map_key,
        [&](const sharding::ShardMap& now) { return now.AddGroup(request.add_group()); });
  } else if (request.has_move()) {
    changed = coordination::ChangeShardMap(
        *member.etcd, member.map_key,
        [&](const sharding::ShardMap& now) { return MoveStep(now, request.move()); });
  } else {
    return absl::InvalidArgumentError("ChangeShardMap names no change (create, add_group, move)");
  }
  if (!changed.ok()) return changed.status();
  bloomlog::LogInfo(absl::StrCat("shard map at ", member.map_key, " changed to version ",
                                 changed->version(), ": ", changed->Encode()));
  bloom::replication::v1::ChangeShardMapResponse response;
  response.set_version(changed->version());
  response.set_record(changed->Encode());
  return response;
}

}  // namespace server

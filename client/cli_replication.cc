// bloom-cli's replication commands (client/cli_replication.h).
#include "client/cli_replication.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/cli_output.h"

namespace bloomcli {
namespace {

// bloom.replication.v1.ReplicationService/Status of the pod `client` talks to.
// With `wait_until`, the call waits for the pod to be reachable until then: see Switchover.
absl::StatusOr<bloom::replication::v1::StatusResponse> CallStatus(
    const bloomclient::BloomClient& client, absl::optional<absl::Time> wait_until = absl::nullopt) {
  namespace v1 = bloom::replication::v1;
  grpc::ClientContext context;
  client.PrepareContext(context);
  if (wait_until.has_value()) {
    context.set_wait_for_ready(true);
    context.set_deadline(std::min(context.deadline(), absl::ToChronoTime(*wait_until)));
  }
  v1::StatusResponse status;
  const absl::Status called = bloomclient::FromGrpcStatus(
      v1::ReplicationService::NewStub(client.channel())->Status(&context, {}, &status));
  if (!called.ok()) return called;
  return status;
}

}  // namespace

int ReplicationStatus(bloomclient::BloomClient& client, bool json) {
  namespace v1 = bloom::replication::v1;
  absl::StatusOr<v1::StatusResponse> called = CallStatus(client);
  if (!called.ok()) return Error(called.status());
  const v1::StatusResponse& status = *called;
  if (json) {
    PrintJson(status);
    std::cout << "\n";
    return 0;
  }
  if (status.has_cluster()) {
    const v1::StatusResponse::Cluster& cluster = status.cluster();
    std::cout << "cluster:           " << cluster.name() << " (etcd), term " << cluster.term()
              << ", primary " << cluster.leader() << " at " << cluster.leader_address() << "\n";
    if (status.role() == v1::StatusResponse::ROLE_PRIMARY) {
      std::cout << "sync set:          {" << absl::StrJoin(cluster.sync_set(), ",") << "}\n";
    }
  }
  if (status.role() == v1::StatusResponse::ROLE_FOLLOWER) {
    std::cout << "role:              follower of " << status.primary() << "\n"
              << "connected:         " << (status.connected() ? "yes" : "no") << "\n"
              << "applied sequence:  " << status.sequence() << "\n"
              << "primary sequence:  " << status.primary_sequence() << "\n"
              << "lag:               "
              << (status.lag_seconds() < 0 ? std::string("not caught up yet")
                                           : absl::StrFormat("%.3f s", status.lag_seconds()))
              << "\n";
    return 0;
  }
  std::cout << "role:              primary\n"
            << "sequence:          " << status.sequence() << "\n"
            << "min_replica_acks:  " << status.min_replica_acks() << "\n"
            << "followers:         " << status.followers_size() << "\n";
  for (const v1::StatusResponse::Follower& f : status.followers()) {
    std::cout << "  " << f.name() << " (" << f.peer() << "): durable " << f.durable_sequence()
              << ", behind by "
              << status.sequence() - std::min(status.sequence(), f.durable_sequence()) << "\n";
  }
  return 0;
}

int Switchover(const bloomclient::BloomClient& client, const std::string& server,
               const bloomclient::ClientOptions& options, const std::string& to, bool json) {
  namespace v1 = bloom::replication::v1;
  absl::StatusOr<v1::StatusResponse> status = CallStatus(client);
  if (!status.ok()) return Error(status.status());
  if (!status->has_cluster()) {
    return Error(absl::FailedPreconditionError(
        absl::StrCat(server,
                     " is not in a cluster that elects its primary through etcd (it "
                     "runs without --etcd_endpoints): there is nothing to switch over")));
  }
  // The primary is asked directly: only it can hand over.
  std::unique_ptr<bloomclient::BloomClient> opened;
  const bloomclient::BloomClient* primary = &client;
  if (status->role() != v1::StatusResponse::ROLE_PRIMARY) {
    absl::StatusOr<std::unique_ptr<bloomclient::BloomClient>> other =
        bloomclient::BloomClient::Open(status->cluster().leader_address(), options);
    if (!other.ok()) return Error(other.status());
    opened = *std::move(other);
    primary = opened.get();
  }
  grpc::ClientContext context;
  primary->PrepareContext(context);
  v1::SwitchoverRequest request;
  request.set_to(to);
  v1::SwitchoverResponse response;
  const absl::Status called =
      bloomclient::FromGrpcStatus(v1::ReplicationService::NewStub(primary->channel())
                                      ->Switchover(&context, request, &response));
  if (!called.ok()) return Error(called);
  if (response.primary() == status->cluster().leader()) {
    if (json) {
      PrintJson(response);
      std::cout << "\n";
    } else {
      std::cout << response.primary() << " is the primary already\n";
    }
    return 0;
  }
  // The new primary's election takes about a second; the pod asked may restart in its new role
  // meanwhile, so failed calls are retried. Each waits (up to a second) for the pod to be
  // reachable: a fail-fast call on a reconnecting channel fails at once without polling it, and
  // the channel would then move on only when gRPC's backup poller runs, every 5 s
  // (client/reconnect_poller.h), three times in this loop's 15 s.
  const absl::Time give_up = absl::Now() + std::max(options.timeout, absl::Seconds(15));
  while (true) {
    absl::StatusOr<v1::StatusResponse> now =
        CallStatus(*primary, std::min(give_up, absl::Now() + absl::Seconds(1)));
    if (now.ok() && now->cluster().term() > response.term() &&
        now->cluster().leader() == response.primary()) {
      if (json) {
        PrintJson(*now);
        std::cout << "\n";
      } else {
        std::cout << "handed over from " << status->cluster().leader() << " to "
                  << response.primary() << " at sequence " << response.sequence() << "; "
                  << response.primary() << " leads term " << now->cluster().term() << "\n";
      }
      return 0;
    }
    if (absl::Now() >= give_up) {
      return Error(absl::DeadlineExceededError(
          absl::StrCat(status->cluster().leader(), " handed over to ", response.primary(),
                       " at sequence ", response.sequence(),
                       ", but no pod reported it primary in time; see bloom-cli "
                       "replication")));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace bloomcli

// Node: one incarnation of bloom-server (server/node.h).
#include "server/node.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace server {
namespace {

// How long a primary told to stop waits for a follower to catch up before it hands over.
constexpr absl::Duration kHandOverOnStop = absl::Seconds(5);

// A switchover from this primary (the Switchover call): followers as its replication service
// sees them.
absl::StatusOr<bloom::replication::v1::SwitchoverResponse> SwitchOver(Node& node,
                                                                      Failover& failover,
                                                                      const std::string& to,
                                                                      absl::Time deadline) {
  // Only a stream that proved its member name (its secret's digest is the one that member's
  // record names) may be handed over to: a client posing as a follower, or naming no member,
  // would take the primary's role with it. The records are read once, not per poll. Such a
  // stream is the member's own process, so what it said it held when it started counts with
  // what it acknowledged since (a follower that reconnected to a quiet primary was sent
  // nothing to acknowledge yet).
  std::map<std::string, std::string> proofs;  // member name -> the proof its record names
  for (const replication::FollowerStream& f : node.replication->Followers()) {
    if (proofs.count(f.name) != 0) continue;
    absl::StatusOr<coordination::MemberRecord> record = failover.member()->ReadMember(f.name);
    proofs[f.name] = record.ok() ? record->proof : "";
  }
  auto followers = [&node, &proofs] {
    std::vector<Failover::FollowerProgress> out;
    for (const replication::FollowerStream& f : node.replication->Followers()) {
      auto proof = proofs.find(f.name);
      if (f.proof.empty() || proof == proofs.end() || proof->second != f.proof) continue;
      out.push_back({f.name, std::max(f.durable_sequence, f.start_sequence - 1)});
    }
    return out;
  };
  auto latest = [&node] { return node.store->LatestSequence(); };
  absl::StatusOr<Failover::Handover> handover =
      failover.Switchover(to, deadline, followers, latest);
  if (!handover.ok()) return handover.status();
  bloom::replication::v1::SwitchoverResponse response;
  response.set_primary(handover->to);
  response.set_sequence(handover->sequence);
  response.set_term(handover->term);
  return response;
}

}  // namespace

metrics::ReplicationFigures Node::Figures() const {
  metrics::ReplicationFigures figures;
  if (follower != nullptr) {
    const replication::FollowerStatus status = follower->status();
    figures.follower = true;
    figures.connected = status.connected;
    figures.applied_sequence = status.applied_sequence;
    figures.primary_sequence = status.primary_sequence;
    figures.lag = status.lag;
    figures.reads_waiting = status.reads_waiting;
    return figures;
  }
  figures.latest_sequence = store->LatestSequence();
  if (replication != nullptr) {  // a primary's followers
    for (const replication::FollowerStream& f : replication->Followers()) {
      figures.followers.push_back({f.name, f.sent_sequence, f.durable_sequence});
    }
  }
  if (store->replica_acks() != nullptr) {
    figures.ack_timeouts = store->replica_acks()->timeouts();
    figures.writes_waiting_acks = store->replica_acks()->waiting();
  }
  return figures;
}

absl::Status Node::Stop(absl::optional<absl::Duration> grace) {
  if (replication != nullptr) replication->Stop();
  if (follower != nullptr) follower->Stop();
  if (server != nullptr) server->Shutdown(grace);
  server.reset();
  sync_set.reset();  // after the calls (Status reads it), before the store's acknowledgements
  follower.reset();
  forwarder.reset();
  absl::Status closed = store->Close();
  replication.reset();
  return closed;
}

absl::StatusOr<replication::FollowerOptions> FollowerOptionsFromConfig(
    const ReplicationConfig& config, const std::string& listen) {
  replication::FollowerOptions options;
  options.primary = config.replicate_from;
  options.max_lag = config.max_lag;
  options.name = config.name;
  if (options.name.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) options.name = host;
    options.name = absl::StrCat(options.name, ":", listen.substr(listen.rfind(':') + 1));
  }
  auto read_file = [](const std::string& path) -> absl::StatusOr<std::string> {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    std::stringstream contents;
    contents << in.rdbuf();
    return contents.str();
  };
  if (!config.token_file.empty()) {
    absl::StatusOr<std::string> token = read_file(config.token_file);
    if (!token.ok()) return token.status();
    options.token = std::string(absl::StripAsciiWhitespace(*token));
    if (options.token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--replication_token_file ", config.token_file, " is empty"));
    }
  }
  if (!config.ca_file.empty()) {
    absl::StatusOr<std::string> ca = read_file(config.ca_file);
    if (!ca.ok()) return ca.status();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = *ca;
    if (!config.cert_file.empty()) {  // for a primary with --tls_client_ca_file
      absl::StatusOr<std::string> cert = read_file(config.cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = read_file(config.key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    options.credentials = grpc::SslCredentials(ssl);
  }
  return options;
}

absl::Status StartNode(Node& node, const ServerConfig& config, service::ServerOptions options,
                       const absl::StatusOr<replication::FollowerOptions>& follower_options) {
  if (config.store.replica) {
    node.forwarder = std::make_unique<service::Forwarder>(
        [options = *follower_options](const std::string& address) {
          replication::FollowerOptions to = options;
          to.primary = address;
          return replication::PrimaryChannel(to);  // a connection of its own
        },
        follower_options->primary,
        [&node](uint64_t sequence, absl::Time deadline, service::Forwarder::AppliedDone done) {
          if (node.follower == nullptr) {
            std::move(done)(false);
          } else {
            node.follower->WhenApplied(sequence, deadline, std::move(done));
          }
        });
    options.hooks.forwarder = node.forwarder.get();
    options.serving_at_start = false;  // until the follower has caught up
  }
  replication::ReplicationServiceOptions replication_options;
  replication_options.allow_unauthenticated = config.replication.allow_unauthenticated;
  // A follower's stream that stops moving is ended as a client's transfer is.
  replication_options.idle_timeout = config.server.limits.transfer_idle_timeout;
  if (service::ShardRouter* router = options.hooks.router; router != nullptr) {
    replication_options.on_caught_up = [router](uint64_t items) {
      router->CountMoveCatchUp(items);
    };
  }
  node.replication = std::make_unique<replication::ReplicationService>(
      node.store.get(), options.hooks.auth, config.store.data_dir, replication_options);
  options.extra_services.push_back(node.replication.get());
  absl::StatusOr<std::unique_ptr<service::BloomServer>> server =
      service::BloomServer::Start(node.store.get(), options);
  if (!server.ok()) return server.status();
  node.server = *std::move(server);
  if (config.store.replica) {
    service::BloomServer* raw = node.server.get();
    node.follower = std::make_unique<replication::Follower>(
        node.store.get(), *follower_options, [raw](bool serving) { raw->SetServing(serving); });
    node.follower->Start();
    node.replication->SetFollower(node.follower.get(), follower_options->primary);
    bloomlog::LogInfo(absl::StrCat("follower of the primary at ", follower_options->primary,
                                   " (as ", follower_options->name, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> HeldSequence(storage::StoreOptions options) {
  // Nothing, or a copy of a primary cut short (a crash during the copy): it holds nothing an
  // election may count on.
  if (!replication::HoldsCompleteCopy(options.data_dir)) return 0;
  options.replica = true;
  options.lazy_start = true;
  options.background_checkpoints = false;
  options.may_acknowledge = nullptr;
  absl::StatusOr<std::unique_ptr<storage::FilterStore>> store = storage::FilterStore::Open(options);
  if (!store.ok()) return store.status();
  const uint64_t held = (*store)->LatestSequence();
  RETURN_IF_ERROR((*store)->Close());
  return held;
}

void ConnectToCluster(Node& node, Failover& failover, const std::string& cluster, bool primary,
                      metrics::ServerMetrics& server_metrics) {
  auto view = [&node, &failover, cluster] {
    uint64_t version = 0;
    const coordination::Role current = failover.role(&version);
    replication::ReplicationService::ClusterView out{
        cluster, current.term, current.leader.name, current.leader.address, {}};
    if (node.sync_set != nullptr) out.sync_set = node.sync_set->recorded();
    return out;
  };
  node.replication->SetClusterSource(view);
  if (primary) {
    node.replication->SetSwitchoverHandler(
        [&node, &failover](
            const std::string& to,
            absl::Time deadline) -> absl::StatusOr<bloom::replication::v1::SwitchoverResponse> {
          RETURN_IF_ERROR(failover.CheckSwitchoverCooldown());
          return SwitchOver(node, failover, to, deadline);
        });
  }
  server_metrics.SetReplicationSource([&node, view] {
    metrics::ReplicationFigures figures = node.Figures();
    const replication::ReplicationService::ClusterView cluster = view();
    figures.elected = true;
    figures.term = cluster.term;
    figures.sync_set_size = cluster.sync_set.size();
    return figures;
  });
}

bool RetargetInPlace(Node& node, Failover& failover, replication::FollowerOptions follower_options,
                     uint64_t& role_version, int64_t& data_term) {
  if (node.follower == nullptr || node.follower->needs_snapshot()) return false;
  uint64_t version = 0;
  const coordination::Role next = failover.role(&version);
  if (next.kind == coordination::Role::Kind::kNone) {
    // No primary now (an election runs): reads go on from what was applied.
    role_version = version;
    return true;
  }
  if (next.kind != coordination::Role::Kind::kFollower) return false;
  if (next.term != data_term && node.store->LatestSequence() > next.leader.start_sequence) {
    return false;
  }
  follower_options.primary = next.leader.address;
  node.forwarder->Retarget(next.leader.address);
  node.follower->Retarget(next.leader.address);
  node.replication->SetFollower(node.follower.get(), next.leader.address);
  role_version = version;
  data_term = next.term;
  bloomlog::LogInfo(absl::StrCat("follower: now follows the primary ", next.leader.name, " at ",
                                 next.leader.address, " (term ", next.term,
                                 "), serving reads throughout"));
  return true;
}

void HandOverBeforeStopping(Node& node, Failover& failover) {
  absl::StatusOr<bloom::replication::v1::SwitchoverResponse> handed =
      SwitchOver(node, failover, "", absl::Now() + kHandOverOnStop);
  if (handed.ok()) {
    bloomlog::LogInfo(absl::StrCat("handed over to ", handed->primary(), " at sequence ",
                                   handed->sequence(), " before stopping"));
  } else {
    bloomlog::LogInfo(absl::StrCat("stopping without handing over: ", handed.status().message()));
  }
}

}  // namespace server

#include "replication/replication_service.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "service/convert.h"
#include "storage/replica/replication_log.h"

namespace replication {
namespace {

namespace v1 = bloom::replication::v1;

constexpr size_t kSnapshotChunkBytes = 1 << 20;
constexpr const char* kSnapshotDir = "replication-snapshots";
// Snapshots a primary makes at once, in all and per caller.
constexpr size_t kMaxSnapshots = 2;
constexpr size_t kMaxSnapshotsPerCaller = 1;
// How long a switchover may wait for its target to catch up: the call's deadline, at most the
// longer bound; the shorter one without a deadline.
constexpr absl::Duration kSwitchoverDefaultWait = absl::Seconds(10);
constexpr absl::Duration kSwitchoverMaxWait = absl::Minutes(1);

grpc::Status ToGrpc(const absl::Status& status) { return service::ToGrpcStatus(status); }

}  // namespace

ReplicationService::ReplicationService(storage::ReplicatedStore* store,
                                       const service::TokenAuthenticator* auth,
                                       std::string data_dir, ReplicationServiceOptions options)
    : store_(store),
      auth_(auth),
      data_dir_(std::move(data_dir)),
      options_(options),
      snapshots_({kMaxSnapshots, kMaxSnapshotsPerCaller, options.idle_timeout, 0}, nullptr) {
  // Snapshots a killed primary left behind.
  std::error_code ignored;
  std::filesystem::remove_all(std::filesystem::path(data_dir_) / kSnapshotDir, ignored);
}

grpc::Status ReplicationService::Admit(grpc::ServerContextBase* context, service::Role role,
                                       bool primary_only, std::string* caller_key) const {
  if (stopping_.load()) {
    return {grpc::StatusCode::UNAVAILABLE, "the primary is shutting down"};
  }
  if (primary_only && store_->is_replica()) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "this server is a follower, not a primary: replicate from its primary"};
  }
  service::Caller caller;
  if (auth_ == nullptr) {
    if (role == service::Role::kReplication && !options_.allow_unauthenticated) {
      return {grpc::StatusCode::PERMISSION_DENIED,
              "this server has no token auth, so it serves no replication (a follower's "
              "acknowledgements decide when writes are acknowledged): give it "
              "--auth_token_file with a replication token and its followers "
              "--replication_token_file, or start it with --allow_unauthenticated_replication "
              "on a network only its pods reach"};
    }
  } else {
    absl::optional<absl::string_view> authorization;
    const auto& metadata = context->client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      authorization = absl::string_view(it->second.data(), it->second.size());
    }
    absl::StatusOr<service::Caller> authorized =
        auth_->Authorize(authorization, role, "Replication");
    if (!authorized.ok()) return ToGrpc(authorized.status());
    caller = *std::move(authorized);
  }
  if (caller_key != nullptr) *caller_key = service::ClientKey(caller, context->peer());
  return grpc::Status::OK;
}

bool ReplicationService::TakeTailSlot(const std::string& caller, std::string* why) {
  bloomsync::BlockingLock lock(&mu_);
  auto mine = tails_per_caller_.find(caller);
  if (mine != tails_per_caller_.end() && mine->second >= options_.max_tails_per_caller) {
    *why = absl::StrCat(caller, " holds ", mine->second, " Tail streams already, its most");
    return false;
  }
  if (tails_ >= options_.max_tails) {
    *why = absl::StrCat("this primary serves ", options_.max_tails, " followers already");
    return false;
  }
  ++tails_per_caller_[caller];
  ++tails_;
  return true;
}

void ReplicationService::ReleaseTailSlot(const std::string& caller) {
  bloomsync::BlockingLock lock(&mu_);
  --tails_;
  auto mine = tails_per_caller_.find(caller);
  if (mine != tails_per_caller_.end() && --mine->second <= 0) tails_per_caller_.erase(mine);
}

grpc::Status ReplicationService::Snapshot(grpc::ServerContext* context,
                                          const v1::SnapshotRequest* request,
                                          grpc::ServerWriter<v1::SnapshotResponse>* writer) {
  std::string caller;
  if (grpc::Status admitted =
          Admit(context, service::Role::kReplication, /*primary_only=*/true, &caller);
      !admitted.ok()) {
    return admitted;
  }
  if (request->follower_id().size() > kMaxFollowerIdBytes) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("follower_id is ", request->follower_id().size(), " bytes; at most ",
                         kMaxFollowerIdBytes)};
  }
  // The guard ends a copy whose follower stops reading (a blocked Write returns false).
  absl::StatusOr<std::unique_ptr<service::TransferGuard::Ticket>> ticket =
      snapshots_.Admit(service::TransferGuard::Kind::kSnapshot, context->peer(), caller,
                       [context](const absl::Status&) { context->TryCancel(); });
  if (!ticket.ok()) return ToGrpc(ticket.status());
  const std::filesystem::path root = std::filesystem::path(data_dir_) / kSnapshotDir;
  const std::filesystem::path dir = root / absl::StrCat(next_snapshot_.fetch_add(1));
  std::error_code error;
  std::filesystem::create_directories(root, error);
  std::filesystem::remove_all(dir, error);
  const absl::Time start = absl::Now();
  absl::StatusOr<uint64_t> sequence = storage::CreateSnapshot(store_->database(), dir.string());
  if (!sequence.ok()) return ToGrpc(sequence.status());
  bloomlog::LogInfo(absl::StrCat("replication: sending a snapshot at sequence ", *sequence,
                                 " to follower ", request->follower_id(), " (", context->peer(),
                                 ")"));
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{dir};
  uint64_t bytes = 0;
  std::vector<char> buffer(kSnapshotChunkBytes);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    if (!in) {
      return {grpc::StatusCode::INTERNAL,
              absl::StrCat("cannot read snapshot file ", entry.path().string())};
    }
    uint64_t offset = 0;
    do {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      const std::streamsize got = in.gcount();
      v1::SnapshotResponse chunk;
      chunk.set_file(entry.path().filename().string());
      chunk.set_offset(offset);
      chunk.set_data(buffer.data(), static_cast<size_t>(got));
      if (!writer->Write(chunk)) {
        if ((*ticket)->abandoned()) return ToGrpc((*ticket)->AbandonedStatus());
        return {grpc::StatusCode::CANCELLED, "the follower went away"};
      }
      (*ticket)->Touch(static_cast<uint64_t>(got));
      offset += static_cast<uint64_t>(got);
    } while (in);
    bytes += offset;
  }
  // The follower tails from the snapshot's sequence next: the log archive keeps it.
  store_->database().NoteLogReader();
  v1::SnapshotResponse done;
  done.set_done(true);
  done.set_sequence(*sequence);
  writer->Write(done);
  bloomlog::LogInfo(absl::StrCat("replication: snapshot of ", bytes, " bytes sent to follower ",
                                 request->follower_id(), " in ",
                                 absl::FormatDuration(absl::Now() - start)));
  return grpc::Status::OK;
}

// A Tail refused before it started: finishes at once, and frees itself when gRPC is done.
class RefusedTail final : public grpc::ServerBidiReactor<v1::TailRequest, v1::TailResponse> {
 public:
  explicit RefusedTail(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

grpc::ServerBidiReactor<v1::TailRequest, v1::TailResponse>* ReplicationService::Tail(
    grpc::CallbackServerContext* context) {
  std::string caller;
  if (grpc::Status admitted =
          Admit(context, service::Role::kReplication, /*primary_only=*/true, &caller);
      !admitted.ok()) {
    return new RefusedTail(admitted);
  }
  if (std::string why; !TakeTailSlot(caller, &why)) {
    return new RefusedTail(
        {grpc::StatusCode::RESOURCE_EXHAUSTED, absl::StrCat(why, "; retry later")});
  }
  TailHooks hooks;
  hooks.registered = [this](const std::string& name, const std::string& peer,
                            const std::string& proof, uint64_t start) {
    return Register({name, peer, proof, start, 0, 0, absl::Now(), absl::InfinitePast()});
  };
  hooks.update = [this](int id, uint64_t sent, uint64_t durable) { Update(id, sent, durable); };
  hooks.unregistered = [this](int id) { Unregister(id); };
  hooks.done = [this, caller] { ReleaseTailSlot(caller); };
  auto stream = std::make_shared<TailStream>(context, store_, &pump_, std::move(hooks),
                                             options_.idle_timeout);
  TailStream* reactor = stream.get();
  pump_.Add(std::move(stream));  // the pump owns it until gRPC is done with it
  return reactor;
}

void ReplicationService::SetFollower(const Follower* follower, std::string primary) {
  bloomsync::BlockingLock lock(&mu_);
  follower_ = follower;
  primary_ = std::move(primary);
}

void ReplicationService::SetClusterSource(std::function<ClusterView()> source) {
  bloomsync::BlockingLock lock(&mu_);
  cluster_source_ = std::move(source);
}

grpc::Status ReplicationService::Status(grpc::ServerContext* context,
                                        const v1::StatusRequest* /*request*/,
                                        v1::StatusResponse* response) {
  if (grpc::Status admitted = Admit(context, service::Role::kRead, /*primary_only=*/false);
      !admitted.ok()) {
    return admitted;
  }
  response->set_sequence(store_->LatestSequence());
  bloomsync::BlockingLock lock(&mu_);
  if (cluster_source_) {
    const ClusterView view = cluster_source_();
    v1::StatusResponse::Cluster* cluster = response->mutable_cluster();
    cluster->set_name(view.name);
    cluster->set_term(view.term);
    cluster->set_leader(view.leader);
    cluster->set_leader_address(view.leader_address);
    for (const std::string& name : view.sync_set) cluster->add_sync_set(name);
  }
  if (follower_ != nullptr) {
    const FollowerStatus status = follower_->status();
    response->set_role(v1::StatusResponse::ROLE_FOLLOWER);
    response->set_primary(primary_);
    response->set_connected(status.connected);
    response->set_primary_sequence(status.primary_sequence);
    response->set_lag_seconds(
        status.lag == absl::InfiniteDuration() ? -1 : absl::ToDoubleSeconds(status.lag));
    return grpc::Status::OK;
  }
  response->set_role(v1::StatusResponse::ROLE_PRIMARY);
  response->set_primary_sequence(response->sequence());
  if (const storage::ReplicaAcks* acks = store_->replica_acks()) {
    response->set_min_replica_acks(acks->required());
  }
  for (const auto& [id, follower] : followers_) {
    v1::StatusResponse::Follower* out = response->add_followers();
    out->set_name(follower.name);
    out->set_peer(follower.peer);
    out->set_sent_sequence(follower.sent_sequence);
    out->set_durable_sequence(follower.durable_sequence);
  }
  return grpc::Status::OK;
}

void ReplicationService::SetShardMapHandler(ShardMapHandler handler) {
  bloomsync::BlockingLock lock(&mu_);
  shard_map_ = std::move(handler);
}

grpc::Status ReplicationService::ChangeShardMap(grpc::ServerContext* context,
                                                const v1::ChangeShardMapRequest* request,
                                                v1::ChangeShardMapResponse* response) {
  if (grpc::Status admitted = Admit(context, service::Role::kAdmin, /*primary_only=*/false);
      !admitted.ok()) {
    return admitted;
  }
  ShardMapHandler handler;
  {
    bloomsync::BlockingLock lock(&mu_);
    handler = shard_map_;
  }
  if (!handler) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "this pod is not sharded (--shard_map): it has no shard map to change"};
  }
  absl::StatusOr<v1::ChangeShardMapResponse> changed = handler(*request);
  if (!changed.ok()) return ToGrpc(changed.status());
  *response = *std::move(changed);
  return grpc::Status::OK;
}

void ReplicationService::SetSwitchoverHandler(SwitchoverHandler handler) {
  bloomsync::BlockingLock lock(&mu_);
  switchover_ = std::move(handler);
}

grpc::Status ReplicationService::Switchover(grpc::ServerContext* context,
                                            const v1::SwitchoverRequest* request,
                                            v1::SwitchoverResponse* response) {
  if (grpc::Status admitted = Admit(context, service::Role::kAdmin, /*primary_only=*/false);
      !admitted.ok()) {
    return admitted;
  }
  SwitchoverHandler handler;
  std::string primary;
  {
    bloomsync::BlockingLock lock(&mu_);
    handler = switchover_;
    if (cluster_source_) {
      const ClusterView view = cluster_source_();
      primary = absl::StrCat(view.leader, " at ", view.leader_address);
    }
  }
  if (primary.empty()) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "switchover needs failover through etcd (--etcd_endpoints): without it the primary "
            "is whichever pod the others --replicate_from"};
  }
  if (!handler) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("this pod is not the primary: call the primary (", primary, ")")};
  }
  // Bounded: the primary refuses writes while it waits.
  const absl::Time now = absl::Now();
  absl::Time deadline = now + kSwitchoverDefaultWait;
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    deadline = std::min(absl::FromChrono(context->deadline()), now + kSwitchoverMaxWait);
  }
  absl::StatusOr<v1::SwitchoverResponse> done = handler(request->to(), deadline);
  if (!done.ok()) return ToGrpc(done.status());
  *response = *std::move(done);
  return grpc::Status::OK;
}

int ReplicationService::Register(FollowerStream status) {
  bloomsync::BlockingLock lock(&mu_);
  const int id = next_id_++;
  followers_.emplace_back(id, std::move(status));
  return id;
}

void ReplicationService::Update(int id, uint64_t sent, uint64_t durable) {
  bloomsync::BlockingLock lock(&mu_);
  for (auto& [key, follower] : followers_) {
    if (key != id) continue;
    if (sent != 0) follower.sent_sequence = sent;
    if (durable != 0) {
      follower.durable_sequence = durable;
      follower.last_ack = absl::Now();
    }
  }
}

void ReplicationService::Unregister(int id) {
  bloomsync::BlockingLock lock(&mu_);
  std::erase_if(followers_, [id](const auto& entry) { return entry.first == id; });
}

std::vector<FollowerStream> ReplicationService::Followers() const {
  bloomsync::BlockingLock lock(&mu_);
  std::vector<FollowerStream> out;
  for (const auto& [id, follower] : followers_) out.push_back(follower);
  return out;
}

}  // namespace replication

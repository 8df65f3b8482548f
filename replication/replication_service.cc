#include "replication/replication_service.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "service/convert.h"
#include "storage/replication_log.h"

namespace replication {
namespace {

namespace v1 = bloom::replication::v1;

constexpr size_t kSnapshotChunkBytes = 1 << 20;
constexpr const char* kSnapshotDir = "replication-snapshots";
// Followers a primary serves at once, and snapshots it makes at once; more get
// RESOURCE_EXHAUSTED (a follower retries).
constexpr int kMaxTails = 16;
constexpr int kMaxSnapshots = 2;
// How long a switchover may wait for its target to catch up: the call's deadline, at most the
// longer bound; the shorter one without a deadline.
constexpr absl::Duration kSwitchoverDefaultWait = absl::Seconds(10);
constexpr absl::Duration kSwitchoverMaxWait = absl::Minutes(1);

// Takes one of `limit` slots of `count` for the scope, or none (Taken() false) when all are
// taken.
class Slot {
 public:
  Slot(std::atomic<int>& count, int limit) : count_(count), ok_(count.fetch_add(1) < limit) {}
  ~Slot() { count_.fetch_sub(1); }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  [[nodiscard]] bool Taken() const { return ok_; }

 private:
  std::atomic<int>& count_;
  const bool ok_;
};

grpc::Status ToGrpc(const absl::Status& status) { return service::ToGrpcStatus(status); }

}  // namespace

ReplicationService::ReplicationService(storage::FilterStore* store,
                                       const service::TokenAuthenticator* auth,
                                       std::string data_dir)
    : store_(store), auth_(auth), data_dir_(std::move(data_dir)) {
  // Snapshots a killed primary left behind.
  std::error_code ignored;
  std::filesystem::remove_all(std::filesystem::path(data_dir_) / kSnapshotDir, ignored);
}

grpc::Status ReplicationService::Admit(grpc::ServerContextBase* context, service::Role role,
                                       bool primary_only) const {
  if (stopping_.load()) {
    return {grpc::StatusCode::UNAVAILABLE, "the primary is shutting down"};
  }
  if (primary_only && store_->is_replica()) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "this server is a follower, not a primary: replicate from its primary"};
  }
  if (auth_ == nullptr) return grpc::Status::OK;
  absl::optional<absl::string_view> authorization;
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  absl::StatusOr<service::Caller> caller = auth_->Authorize(authorization, role, "Replication");
  return ToGrpc(caller.status());
}

grpc::Status ReplicationService::Snapshot(grpc::ServerContext* context,
                                          const v1::SnapshotRequest* request,
                                          grpc::ServerWriter<v1::SnapshotResponse>* writer) {
  if (grpc::Status admitted = Admit(context); !admitted.ok()) return admitted;
  const Slot slot(snapshots_, kMaxSnapshots);
  if (!slot.Taken()) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat(kMaxSnapshots, " snapshots are being copied already; retry later")};
  }
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
        return {grpc::StatusCode::CANCELLED, "the follower went away"};
      }
      offset += static_cast<uint64_t>(got);
    } while (in);
    bytes += offset;
  }
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
  if (grpc::Status admitted = Admit(context); !admitted.ok()) return new RefusedTail(admitted);
  if (tails_.fetch_add(1) >= kMaxTails) {
    tails_.fetch_sub(1);
    return new RefusedTail({grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::StrCat("this primary serves ", kMaxTails, " followers already")});
  }
  TailHooks hooks;
  hooks.registered = [this](const std::string& name, const std::string& peer, uint64_t sent) {
    return Register({name, peer, sent, 0, absl::Now(), absl::InfinitePast()});
  };
  hooks.update = [this](int id, uint64_t sent, uint64_t durable) { Update(id, sent, durable); };
  hooks.unregistered = [this](int id) { Unregister(id); };
  hooks.done = [this] { tails_.fetch_sub(1); };
  auto stream = std::make_shared<TailStream>(context, store_, &pump_, std::move(hooks));
  TailStream* reactor = stream.get();
  pump_.Add(std::move(stream));  // the pump owns it until gRPC is done with it
  return reactor;
}

void ReplicationService::SetFollower(const Follower* follower, std::string primary) {
  std::lock_guard<std::mutex> lock(mu_);
  follower_ = follower;
  primary_ = std::move(primary);
}

void ReplicationService::SetClusterSource(std::function<ClusterView()> source) {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
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

void ReplicationService::SetSwitchoverHandler(SwitchoverHandler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  switchover_ = std::move(handler);
}

grpc::Status ReplicationService::Switchover(grpc::ServerContext* context,
                                            const v1::SwitchoverRequest* request,
                                            v1::SwitchoverResponse* response) {
  if (grpc::Status admitted = Admit(context, service::Role::kWrite, /*primary_only=*/false);
      !admitted.ok()) {
    return admitted;
  }
  SwitchoverHandler handler;
  std::string primary;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  const int id = next_id_++;
  followers_.emplace_back(id, std::move(status));
  return id;
}

void ReplicationService::Update(int id, uint64_t sent, uint64_t durable) {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(followers_, [id](const auto& entry) { return entry.first == id; });
}

std::vector<FollowerStream> ReplicationService::Followers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FollowerStream> out;
  for (const auto& [id, follower] : followers_) out.push_back(follower);
  return out;
}

}  // namespace replication

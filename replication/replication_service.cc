#include "replication/replication_service.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "service/convert.h"
#include "storage/replication_log.h"

namespace replication {
namespace {

namespace v1 = bloom::replication::v1;

// What one Tail response carries at most; the follower syncs and acknowledges once per
// response.
constexpr size_t kMaxResponseBytes = 4 << 20;
// A quiet primary still sends this often: the follower learns that it is caught up (its lag)
// and that the stream is alive.
constexpr absl::Duration kHeartbeat = absl::Milliseconds(200);
// Responses with writes go at most this often (unless full): what is written meanwhile
// travels in one response and one write on the follower, instead of one each per RocksDB
// write, and each response costs this thread's and gRPC's wake-ups (the larger part of what a
// follower costs its primary). The price is latency: a follower sees a write up to this much
// later (a read-your-writes check through it waits that long). With --min_replica_acks every
// write waits for its response and the follower's answer, so responses go more often there.
constexpr absl::Duration kMinDataInterval = absl::Milliseconds(5);
constexpr absl::Duration kMinDataIntervalWithAcks = absl::Milliseconds(1);
constexpr size_t kSnapshotChunkBytes = 1 << 20;
constexpr const char* kSnapshotDir = "replication-snapshots";
// Followers a primary serves at once, and snapshots it makes at once; more get
// RESOURCE_EXHAUSTED (a follower retries).
constexpr int kMaxTails = 16;
constexpr int kMaxSnapshots = 2;

// Takes one of `limit` slots of `count` for the scope, or none (ok() false) when all are taken.
class Slot {
 public:
  Slot(std::atomic<int>& count, int limit) : count_(count), ok_(count.fetch_add(1) < limit) {}
  ~Slot() { count_.fetch_sub(1); }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  bool ok() const { return ok_; }

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

grpc::Status ReplicationService::Admit(grpc::ServerContext* context, service::Role role,
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
  if (!slot.ok()) {
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

grpc::Status ReplicationService::Tail(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::TailResponse, v1::TailRequest>* stream) {
  if (grpc::Status admitted = Admit(context); !admitted.ok()) return admitted;
  const Slot slot(tails_, kMaxTails);
  if (!slot.ok()) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("this primary serves ", kMaxTails, " followers already")};
  }
  v1::TailRequest first;
  if (!stream->Read(&first)) {
    return {grpc::StatusCode::CANCELLED, "no request from the follower"};
  }
  if (first.start_sequence() == 0) {  // sequences start at 1: a follower asks for latest + 1
    return {grpc::StatusCode::INVALID_ARGUMENT, "start_sequence must be at least 1"};
  }
  const std::string name = first.follower_id().empty() ? context->peer() : first.follower_id();
  uint64_t next = first.start_sequence();
  // The last sequence sent on this stream: an acknowledgement counts up to it, never beyond,
  // whatever the follower claims (a write is acknowledged only once it was sent to enough
  // followers and they say they hold it).
  std::atomic<uint64_t> sent{next - 1};
  const int id = Register({name, context->peer(), next - 1, 0, absl::Now(), absl::InfinitePast()});
  storage::ReplicaAcks* acks = store_->replica_acks();
  const int ack_id = acks != nullptr ? acks->Connect(name) : -1;
  bloomlog::LogInfo(absl::StrCat("replication: follower ", name, " (", context->peer(),
                                 ") tails the log from sequence ", next));

  // Acknowledgements arrive on this thread while the handler's thread sends.
  std::thread acks_reader([&] {
    v1::TailRequest ack;
    while (stream->Read(&ack)) {
      if (acks != nullptr && ack.durable_sequence() != 0) {
        acks->Ack(ack_id, std::min(ack.durable_sequence(), sent.load()));
      }
      Update(id, 0, ack.durable_sequence());
      if (ack.idle_touches_size() > 0) {
        std::vector<std::string> names(ack.idle_touches().begin(), ack.idle_touches().end());
        store_->TouchIdle(names);
      }
    }
  });
  grpc::Status result;
  absl::Time last_sent = absl::InfinitePast();
  absl::Time paced_until = absl::InfinitePast();
  storage::LogReader log(store_->database(), next);
  while (true) {
    if (const absl::Time now = absl::Now(); now < paced_until) absl::SleepFor(paced_until - now);
    if (stopping_.load()) {
      result = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the primary is shutting down");
      break;
    }
    if (context->IsCancelled()) break;
    // The latest sequence before the read: once the follower applied this response, it holds
    // everything the primary held when it was sent (unless it was cut at kMaxResponseBytes).
    const uint64_t latest = store_->LatestSequence();
    absl::StatusOr<storage::LogRead> read = log.Read(kMaxResponseBytes);
    if (!read.ok()) {
      result = ToGrpc(read.status());
      v1::TailResponse last;  // the reason travels in a message: the call ends cancelled
      last.set_error_code(static_cast<int32_t>(read.status().code()));
      last.set_error_message(std::string{read.status().message()});
      stream->Write(last);
      break;
    }
    if (read->batches.empty() && absl::Now() - last_sent < kHeartbeat) {
      store_->database().WaitForWriteAfter(next - 1, kHeartbeat);
      continue;
    }
    v1::TailResponse response;
    for (storage::LogBatch& batch : read->batches) {
      v1::WalBatch* out = response.add_batches();
      out->set_sequence(batch.sequence);
      out->set_data(std::move(batch.data));
    }
    response.set_primary_sequence(std::max(latest, read->next - 1));
    response.set_acks_wanted(acks != nullptr);
    response.set_primary_time_micros(absl::ToUnixMicros(absl::Now()));
    const size_t bytes = response.ByteSizeLong();
    sent.store(read->next - 1);  // before the write: its acknowledgement may come at once
    if (!stream->Write(response)) break;
    last_sent = absl::Now();
    if (!read->batches.empty() && bytes < kMaxResponseBytes) {
      paced_until = last_sent + (acks != nullptr ? kMinDataIntervalWithAcks : kMinDataInterval);
    }
    next = read->next;
    Update(id, next - 1, 0);
  }
  context->TryCancel();  // ends the reader's Read
  acks_reader.join();
  if (acks != nullptr) acks->Disconnect(ack_id);
  Unregister(id);
  bloomlog::LogInfo(absl::StrCat("replication: follower ", name, " disconnected at sequence ",
                                 next - 1, result.ok() ? "" : ": ", result.error_message()));
  return result;
}

void ReplicationService::SetFollower(const Follower* follower, std::string primary) {
  std::lock_guard<std::mutex> lock(mu_);
  follower_ = follower;
  primary_ = std::move(primary);
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

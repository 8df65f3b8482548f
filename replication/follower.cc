#include "replication/follower.h"

#include <fcntl.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/blocking_mutex.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "storage/replica/replication_log.h"

namespace replication {
namespace {

namespace v1 = bloom::replication::v1;

// Present while a snapshot is being copied into the data dir: a start that finds it copies
// again (the files there are a partial copy).
constexpr const char* kIncompleteMarker = "REPLICA_COPY_INCOMPLETE";
// How often a follower acknowledges to a primary that does not wait for acknowledgements
// (TailResponse.acks_wanted false): its figures only.
constexpr absl::Duration kLazyAckInterval = absl::Milliseconds(200);
// A quiet primary sends a heartbeat every 200 ms: a connected follower that heard nothing for
// this long counts its lag from the last news.
constexpr absl::Duration kSilence = absl::Seconds(1);
constexpr absl::Duration kMinRetry = absl::Milliseconds(100);
constexpr absl::Duration kMaxRetry = absl::Seconds(2);
// For this long after Retarget, a refused connection is retried at the shortest interval:
// a new primary opens its port a moment after it is elected.
constexpr absl::Duration kNewPrimaryGrace = absl::Seconds(10);

void AddToken(grpc::ClientContext& context, const FollowerOptions& options) {
  if (!options.token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options.token));
  }
}

absl::Status SyncPath(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path.string()));
  const int synced = ::fsync(fd);
  ::close(fd);
  if (synced != 0) return absl::InternalError(absl::StrCat("cannot fsync ", path.string()));
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("cannot write ", path));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// One attempt at copying a snapshot into `dir` (emptied first); the sequence it holds.
absl::StatusOr<uint64_t> CopySnapshot(v1::ReplicationService::Stub& stub,
                                      const FollowerOptions& options,
                                      const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  const std::filesystem::path marker = dir / kIncompleteMarker;
  { std::ofstream(marker.string()) << "a snapshot copy is in progress\n"; }
  RETURN_IF_ERROR(SyncPath(dir));
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename() != kIncompleteMarker) std::filesystem::remove_all(entry, error);
  }
  grpc::ClientContext context;
  AddToken(context, options);
  v1::SnapshotRequest request;
  request.set_follower_id(options.name);
  std::unique_ptr<grpc::ClientReader<v1::SnapshotResponse>> reader =
      stub.Snapshot(&context, request);
  v1::SnapshotResponse chunk;
  std::string file;
  int fd = -1;
  auto close_file = [&]() -> absl::Status {
    if (fd < 0) return absl::OkStatus();
    const bool synced = ::fsync(fd) == 0;
    ::close(fd);
    fd = -1;
    return synced ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot fsync ", file));
  };
  absl::optional<uint64_t> sequence;
  uint64_t bytes = 0;
  absl::Status written;
  while (written.ok() && reader->Read(&chunk)) {
    if (chunk.done()) {
      sequence = chunk.sequence();
      break;
    }
    const std::string name = std::filesystem::path(chunk.file()).filename().string();
    if (name.empty() || name == kIncompleteMarker || name != chunk.file()) {
      written = absl::DataLossError(
          absl::StrCat("the primary sent a bad file name '", chunk.file(), "'"));
      break;
    }
    if (name != file) {
      written = close_file();
      file = name;
      fd = ::open((dir / name).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) written = absl::InternalError(absl::StrCat("cannot create ", name));
    }
    if (written.ok()) written = WriteAll(fd, chunk.data(), name);
    bytes += chunk.data().size();
  }
  if (written.ok()) written = close_file();
  if (!written.ok()) {
    context.TryCancel();
    close_file().IgnoreError();
  }
  const grpc::Status finished = reader->Finish();
  RETURN_IF_ERROR(written);
  if (!finished.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(finished.error_code()),
                        absl::StrCat("copying a snapshot: ", finished.error_message()));
  }
  if (!sequence.has_value()) return absl::DataLossError("the snapshot ended without its sequence");
  RETURN_IF_ERROR(SyncPath(dir));
  std::filesystem::remove(marker, error);
  RETURN_IF_ERROR(SyncPath(dir));
  bloomlog::LogInfo(absl::StrCat("follower: copied a snapshot of ", bytes, " bytes at sequence ",
                                 *sequence, " from the primary at ", options.primary));
  return *sequence;
}

}  // namespace

bool HoldsCompleteCopy(const std::string& data_dir) {
  const std::filesystem::path dir(data_dir);
  return std::filesystem::exists(dir / "CURRENT") &&
         !std::filesystem::exists(dir / kIncompleteMarker);
}

bool DiscardIncompleteCopy(const std::string& data_dir) {
  const std::filesystem::path dir(data_dir);
  std::error_code error;
  if (!std::filesystem::exists(dir / kIncompleteMarker, error)) return false;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    std::filesystem::remove_all(entry.path(), error);
  }
  bloomlog::LogWarning(absl::StrCat("removed an interrupted copy of the primary from ", data_dir));
  return true;
}

std::shared_ptr<grpc::Channel> PrimaryChannel(const FollowerOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);  // Tail responses carry up to 4 MiB of batches
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // A primary being elected opens its port a moment after the followers are told of it, and
  // one restarting in a new role closes it for a moment: reconnect within 100 ms rather than
  // after gRPC's default backoff (1 s, growing to 2 min), on a subchannel of this channel's own
  // (the process-wide pool would hand over another channel's backoff).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2'000);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(options.primary, options.credentials, args);
}

absl::Status Bootstrap(const FollowerOptions& options, const std::string& data_dir, bool force,
                       const std::function<bool()>& stop) {
  const std::filesystem::path dir(data_dir);
  if (!force && HoldsCompleteCopy(data_dir)) return absl::OkStatus();
  bloomlog::LogInfo(absl::StrCat(
      "follower: copying a snapshot of the primary at ", options.primary, " into ", data_dir,
      force ? " (the primary's log no longer reaches back to ours)" : " (no copy here yet)"));
  auto stub = v1::ReplicationService::NewStub(PrimaryChannel(options));
  absl::Duration retry = kMinRetry;
  while (!stop()) {
    absl::StatusOr<uint64_t> copied = CopySnapshot(*stub, options, dir);
    if (copied.ok()) return absl::OkStatus();
    bloomlog::LogWarning(absl::StrCat("follower: copying a snapshot failed (retrying in ",
                                      absl::FormatDuration(retry),
                                      "): ", copied.status().ToString()));
    absl::SleepFor(retry);
    retry = std::min(retry * 2, kMaxRetry);
  }
  return absl::CancelledError("stopped before a snapshot was copied");
}

Follower::Follower(storage::ReplicatedStore* store, FollowerOptions options,
                   std::function<void(bool)> on_serving)
    : store_(store),
      options_(std::move(options)),
      on_serving_(std::move(on_serving)),
      stub_(v1::ReplicationService::NewStub(PrimaryChannel(options_))) {}

Follower::~Follower() { Stop(); }

void Follower::Start() {
  if (on_serving_) on_serving_(false);
  thread_ = std::thread([this] { Run(); });
}

void Follower::Stop() {
  stop_.store(true);
  waiters_.Stop();  // the reads waiting go to the primary (or fail there, as it is gone)
  {
    bloomsync::BlockingLock lock(&mu_);
    if (call_ != nullptr) call_->TryCancel();
  }
  applied_cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void Follower::Retarget(const std::string& primary) {
  FollowerOptions options = options_;
  options.primary = primary;
  std::shared_ptr<v1::ReplicationService::Stub> stub =
      v1::ReplicationService::NewStub(PrimaryChannel(options));
  bloomsync::BlockingLock lock(&mu_);
  options_.primary = primary;
  stub_ = std::move(stub);
  retargeted_ = true;
  retargeted_at_ = absl::Now();
  if (call_ != nullptr) call_->TryCancel();
  applied_cv_.NotifyAll();
}

std::string Follower::primary() const {
  bloomsync::BlockingLock lock(&mu_);
  return options_.primary;
}

bool Follower::SleepUnlessStopped(absl::Duration duration) {
  bloomsync::BlockingLock lock(&mu_);
  applied_cv_.WaitFor(
      lock, absl::ToChronoMicroseconds(duration),
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_.load() || retargeted_; });
  return !stop_.load();
}

void Follower::Run() {
  absl::Duration retry = kMinRetry;
  while (!stop_.load()) {
    const absl::Time start = absl::Now();
    const grpc::Status ended = TailOnce();
    {
      bloomsync::BlockingLock lock(&mu_);
      connected_ = false;
      unreachable_ = ended.error_code() == grpc::StatusCode::UNAVAILABLE ||
                     ended.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    }
    UpdateServing();
    if (stop_.load()) break;
    if (ended.error_code() == grpc::StatusCode::OUT_OF_RANGE) {
      bloomlog::LogWarning(absl::StrCat("follower: ", ended.error_message()));
      needs_snapshot_.store(true);
      return;
    }
    bool new_primary = false;  // elected moments ago: it may still be opening its port
    {
      bloomsync::BlockingLock lock(&mu_);
      if (retargeted_) {  // the old primary's stream was ended on purpose: the new one now
        retargeted_ = false;
        retry = kMinRetry;
        continue;
      }
      new_primary = absl::Now() - retargeted_at_ < kNewPrimaryGrace;
    }
    if (new_primary) retry = kMinRetry;
    bloomlog::LogWarning(absl::StrCat(
        "follower: lost the primary at ", primary(), " (", ended.error_code(), ": ",
        ended.error_message(), "); serving reads from what was applied up to sequence ",
        store_->LatestSequence(), "; reconnecting in ", absl::FormatDuration(retry)));
    if (absl::Now() - start > absl::Seconds(10)) retry = kMinRetry;  // it had been working
    if (!SleepUnlessStopped(retry)) break;
    retry = std::min(retry * 2, kMaxRetry);
  }
}

namespace {

// The responses of one Tail stream, read on their own thread while the follower applies the
// ones before: under load, everything that arrived during one apply and fsync is applied with
// the next one (one fsync and one acknowledgement for many responses, as the group committer
// does for adds), so the follower keeps up with a primary that sends many small responses.
class ResponseQueue {
 public:
  // Bounded: the reader stops reading (and HTTP/2 flow control holds the primary back) past it.
  static constexpr size_t kMaxQueued = 256;

  void Push(v1::TailResponse response) {
    bloomsync::BlockingLock lock(&mu_);
    room_.Wait(lock, [&] { return queue_.size() < kMaxQueued || closed_; });
    queue_.push_back(std::move(response));
    ready_.NotifyOne();
  }
  // The stream ended (the reader's Read returned false), or the consumer gave up.
  void Close() {
    bloomsync::BlockingLock lock(&mu_);
    closed_ = true;
    ready_.NotifyAll();
    room_.NotifyAll();
  }
  // Everything queued, waiting for at least one; empty once closed and drained.
  std::vector<v1::TailResponse> TakeAll() {
    bloomsync::BlockingLock lock(&mu_);
    ready_.Wait(lock, [&] { return !queue_.empty() || closed_; });
    std::vector<v1::TailResponse> out(std::make_move_iterator(queue_.begin()),
                                      std::make_move_iterator(queue_.end()));
    queue_.clear();
    room_.NotifyAll();
    return out;
  }

 private:
  bloomsync::BlockingMutex mu_;
  bloomsync::CondVar ready_, room_;
  std::deque<v1::TailResponse> queue_;
  bool closed_ = false;
};

}  // namespace

grpc::Status Follower::TailOnce() {
  grpc::ClientContext context;
  AddToken(context, options_);
  std::shared_ptr<v1::ReplicationService::Stub> stub;
  {
    bloomsync::BlockingLock lock(&mu_);
    if (stop_.load()) return {grpc::StatusCode::CANCELLED, "stopped"};
    call_ = &context;
    stub = stub_;
    retargeted_ = false;
  }
  std::unique_ptr<grpc::ClientReaderWriter<v1::TailRequest, v1::TailResponse>> stream =
      stub->Tail(&context);
  v1::TailRequest first;
  first.set_follower_id(options_.name);
  first.set_member_secret(options_.member_secret);
  first.set_start_sequence(store_->LatestSequence() + 1);
  ResponseQueue queue;
  std::thread reader;
  if (stream->Write(first)) {
    reader = std::thread([&] {
      v1::TailResponse response;
      while (stream->Read(&response)) queue.Push(std::move(response));
      queue.Close();
    });
  } else {
    queue.Close();
  }
  const grpc::Status ended = ApplyResponses(queue, *stream, first.start_sequence());
  if (!ended.ok()) context.TryCancel();  // the reader's Read returns
  queue.Close();
  if (reader.joinable()) reader.join();
  grpc::Status finished = stream->Finish();
  bloomsync::BlockingLock lock(&mu_);
  call_ = nullptr;
  return ended.ok() ? finished : ended;
}

template <typename Queue, typename Stream>
grpc::Status Follower::ApplyResponses(Queue& queue, Stream& stream, uint64_t start) {
  bool announced = false;
  std::vector<storage::LogBatch> batches;
  uint64_t acked = 0;
  absl::Time last_ack = absl::InfinitePast();
  for (std::vector<v1::TailResponse> responses = queue.TakeAll(); !responses.empty();
       responses = queue.TakeAll()) {
    batches.clear();
    uint64_t bytes = 0;
    for (v1::TailResponse& response : responses) {
      if (response.error_code() != 0) {  // the primary's reason for ending the stream
        return {static_cast<grpc::StatusCode>(response.error_code()), response.error_message()};
      }
      for (v1::WalBatch& batch : *response.mutable_batches()) {
        absl::StatusOr<uint32_t> count = storage::BatchCount(batch.data());
        if (!count.ok()) {
          return {grpc::StatusCode::DATA_LOSS, std::string{count.status().message()}};
        }
        bytes += batch.data().size();
        batches.push_back({batch.sequence(), *count, std::move(*batch.mutable_data())});
      }
    }
    if (!announced) {
      announced = true;
      {
        bloomsync::BlockingLock lock(&mu_);
        connected_ = true;
        unreachable_ = false;
        last_response_ = absl::Now();  // these responses; lag counts from here, not the last stream
      }
      bloomlog::LogInfo(absl::StrCat("follower: connected to the primary at ", primary(),
                                     ", applying its log from sequence ", start));
    }
    if (!batches.empty()) {
      if (absl::Status applied = store_->ApplyReplicated(batches, /*sync=*/true); !applied.ok()) {
        bloomlog::LogError(
            absl::StrCat("follower: applying the primary's log failed: ", applied.ToString()));
        // A batch that does not follow on: this replica and the primary disagree; copy.
        return {absl::IsDataLoss(applied) ? grpc::StatusCode::OUT_OF_RANGE
                                          : grpc::StatusCode::UNAVAILABLE,
                std::string{applied.message()}};
      }
    }
    // What was applied (and synced), and the idle filters this follower's reads used.
    // Promptly when the primary's writes wait for it, else a few times a second.
    const uint64_t durable = store_->LatestSequence();
    const bool wanted = responses.back().acks_wanted();
    if (durable > acked && (wanted || absl::Now() - last_ack >= kLazyAckInterval)) {
      std::vector<std::string> touched = store_->TakeIdleTouches();
      v1::TailRequest ack;
      ack.set_durable_sequence(durable);
      for (std::string& name : touched) ack.add_idle_touches(std::move(name));
      stream.Write(ack);
      acked = durable;
      last_ack = absl::Now();
    } else if (absl::Now() - last_ack >= kLazyAckInterval) {
      if (std::vector<std::string> touched = store_->TakeIdleTouches(); !touched.empty()) {
        v1::TailRequest ack;
        for (std::string& name : touched) ack.add_idle_touches(std::move(name));
        stream.Write(ack);
        last_ack = absl::Now();
      }
    }
    {
      bloomsync::BlockingLock lock(&mu_);
      batches_applied_ += batches.size();
      bytes_applied_ += bytes;
    }
    const v1::TailResponse& last = responses.back();
    OnApplied(last.primary_sequence(), absl::FromUnixMicros(last.primary_time_micros()));
  }
  return grpc::Status::OK;
}

void Follower::OnApplied(uint64_t primary_sequence, absl::Time primary_time) {
  // Elected, this replica's log is what the other followers resume from: its archive is kept as
  // a primary's is (storage/replica/wal_archive.h).
  store_->database().NoteLogReader();
  const uint64_t applied = store_->LatestSequence();
  const absl::Time now = absl::Now();
  bool caught_up_now = false;
  bool fell_behind = false;
  {
    bloomsync::BlockingLock lock(&mu_);
    primary_sequence_ = std::max(primary_sequence_, primary_sequence);
    last_response_ = now;
    const bool was_behind = behind_ || !caught_up_once_;
    if (applied >= primary_sequence) {
      caught_up_primary_time_ = primary_time;
      last_delay_ = std::max(absl::ZeroDuration(), now - primary_time);
      behind_ = false;
      caught_up_now = was_behind;
      caught_up_once_ = true;
    } else if (!behind_) {
      behind_ = true;
    }
    const absl::Duration lag = behind_ ? now - caught_up_primary_time_ : last_delay_;
    fell_behind = behind_ && caught_up_once_ && lag > options_.max_lag && serving_;
  }
  waiters_.Notify();
  if (caught_up_now) {
    bloomlog::LogInfo(absl::StrCat("follower: caught up with the primary at sequence ", applied));
  }
  if (fell_behind) {
    bloomlog::LogWarning(absl::StrCat("follower: fell behind the primary by ",
                                      primary_sequence - applied, " sequences (more than ",
                                      absl::FormatDuration(options_.max_lag), ")"));
  }
  UpdateServing();
}

FollowerStatus Follower::status() const {
  FollowerStatus status;
  status.applied_sequence = store_->LatestSequence();
  status.reads_waiting = waiters_.waiting();
  const absl::Time now = absl::Now();
  bloomsync::BlockingLock lock(&mu_);
  status.connected = connected_;
  status.serving = serving_;
  status.primary_sequence = std::max(primary_sequence_, status.applied_sequence);
  if (!caught_up_once_) {
    status.lag = absl::InfiniteDuration();
  } else if (behind_ || (connected_ && now - last_response_ > kSilence) || !connected_) {
    status.lag = now - caught_up_primary_time_;
  } else {
    status.lag = last_delay_;
  }
  status.batches_applied = batches_applied_;
  status.bytes_applied = bytes_applied_;
  return status;
}

void Follower::UpdateServing() {
  const FollowerStatus now = status();
  bool serving;
  {
    bloomsync::BlockingLock lock(&mu_);
    // Connected: serve once within max_lag. Not connected: serve what is here once the primary
    // proved unreachable (reads go on without it), but not while a stream is being set up.
    serving = connected_ ? (caught_up_once_ && now.lag <= options_.max_lag)
                         : (unreachable_ || (caught_up_once_ && now.lag <= options_.max_lag));
    if (serving == serving_) return;
    serving_ = serving;
  }
  bloomlog::LogInfo(absl::StrCat("follower: health ", serving ? "SERVING" : "NOT_SERVING",
                                 " (applied sequence ", now.applied_sequence, ", primary's ",
                                 now.primary_sequence, ")"));
  if (on_serving_) on_serving_(serving);
}

}  // namespace replication

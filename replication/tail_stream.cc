// TailStream and TailPump (tail_stream.h): the Tail stream's reactions and the log pump.
#include "replication/tail_stream.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "replication/replication_service.h"
#include "service/auth.h"
#include "service/convert.h"

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
// write, and each response costs the pump's and gRPC's wake-ups. The price is latency: a
// follower sees a write up to this much later (a read-your-writes check through it waits that
// long). With --min_replica_acks every write waits for its response and the follower's
// answer, so responses go more often there.
constexpr absl::Duration kMinDataInterval = absl::Milliseconds(5);
constexpr absl::Duration kMinDataIntervalWithAcks = absl::Milliseconds(1);
// Step's `caught_up_at` when no stream waits for a write.
constexpr uint64_t kNoneCaughtUp = std::numeric_limits<uint64_t>::max();

}  // namespace

TailStream::TailStream(grpc::CallbackServerContext* context, storage::ReplicatedStore* store,
                       TailPump* pump, TailHooks hooks, absl::Duration idle_timeout)
    : context_(context),
      store_(store),
      pump_(pump),
      hooks_(std::move(hooks)),
      idle_timeout_(idle_timeout),
      acks_(store->replica_acks()),
      last_progress_(absl::Now()) {
  StartRead(&request_);
}

bool TailStream::Start(const v1::TailRequest& first) {
  bloomsync::BlockingLock lock(&mu_);
  if (first.start_sequence() == 0) {  // sequences start at 1: a follower asks for latest + 1
    FinishLocked({grpc::StatusCode::INVALID_ARGUMENT, "start_sequence must be at least 1"});
    return false;
  }
  if (first.follower_id().size() > kMaxFollowerIdBytes ||
      first.member_secret().size() > kMaxFollowerIdBytes) {
    FinishLocked({grpc::StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("follower_id and member_secret take at most ", kMaxFollowerIdBytes,
                               " bytes; this follower_id has ", first.follower_id().size())});
    return false;
  }
  name_ = first.follower_id().empty() ? context_->peer() : first.follower_id();
  next_ = first.start_sequence();
  log_ = std::make_unique<storage::LogReader>(store_->database(), next_);
  const std::string proof = first.member_secret().empty()
                                ? std::string()
                                : service::TokenAuthenticator::HashToken(first.member_secret());
  id_ = hooks_.registered(name_, context_->peer(), proof, next_);
  // It covers what it will be sent, from its start on: nothing before it, whatever it claims.
  if (acks_ != nullptr) ack_id_ = acks_->Connect(name_, proof, next_);
  started_ = true;
  // Escaped: a name is the client's string, and must not forge log lines.
  bloomlog::LogInfo(absl::StrCat("replication: follower '", absl::CHexEscape(name_), "' (",
                                 context_->peer(), ") tails the log from sequence ", next_));
  return true;
}

void TailStream::OnReadDone(bool ok) {
  if (!ok) {  // the follower closed its side, or the call ended
    bloomsync::BlockingLock lock(&mu_);
    FinishLocked(started_
                     ? grpc::Status::OK
                     : grpc::Status(grpc::StatusCode::CANCELLED, "no request from the follower"));
    pump_->Wake();
    return;
  }
  bool started;
  {
    bloomsync::BlockingLock lock(&mu_);
    started = started_;
  }
  if (!started) {
    if (!Start(request_)) return;
    StartRead(&request_);
    pump_->Wake();
    return;
  }
  // An acknowledgement: what the follower holds durably, and the idle filters its reads used.
  // It counts only for what this stream sent.
  if (request_.durable_sequence() != 0) {
    const uint64_t credited = std::min(request_.durable_sequence(), sent_.load());
    {
      bloomsync::BlockingLock lock(&mu_);
      if (credited > acked_) {
        acked_ = credited;
        last_progress_ = absl::Now();
      }
    }
    if (acks_ != nullptr && credited > 0) acks_->Ack(ack_id_, credited);
    hooks_.update(id_, 0, credited);
  }
  if (request_.idle_touches_size() > 0) {
    std::vector<std::string> names(request_.idle_touches().begin(), request_.idle_touches().end());
    store_->TouchIdle(names);
  }
  StartRead(&request_);
}

void TailStream::OnWriteDone(bool ok) {
  bool wake = true;
  {
    bloomsync::BlockingLock lock(&mu_);
    writing_ = false;
    if (finish_pending_) {
      finish_pending_ = false;
      Finish(finish_after_write_);
    } else if (!ok) {
      FinishLocked({grpc::StatusCode::CANCELLED, "the follower went away"});
    } else {
      // Done before its pace allows the next response: the pump wakes then anyway (Step).
      wake = absl::Now() >= paced_until_;
    }
  }
  if (wake) pump_->Wake();
}

void TailStream::OnCancel() {
  bloomsync::BlockingLock lock(&mu_);
  FinishLocked({grpc::StatusCode::CANCELLED, "cancelled"});
}

void TailStream::OnDone() {
  bool started;
  uint64_t sent;
  grpc::Status ended;
  {
    bloomsync::BlockingLock lock(&mu_);
    started = started_;
    sent = sent_.load();
    ended = finish_after_write_;
  }
  if (started) {
    if (acks_ != nullptr) acks_->Disconnect(ack_id_);
    hooks_.unregistered(id_);
    bloomlog::LogInfo(absl::StrCat("replication: follower '", absl::CHexEscape(name_),
                                   "' disconnected having been sent sequence ", sent,
                                   ended.ok() ? "" : ": ", ended.error_message()));
  }
  hooks_.done();
  // Last: once done() answers true, the pump may drop its reference, which can be the last one,
  // and free this stream while this function still runs; nothing of it may be touched after.
  TailPump* const pump = pump_;
  {
    bloomsync::BlockingLock lock(&mu_);
    done_ = true;
  }
  pump->Wake();  // the pump lets go of this stream; gRPC is done with it
}

bool TailStream::done() const {
  bloomsync::BlockingLock lock(&mu_);
  return done_;
}

void TailStream::FinishLocked(grpc::Status status) {
  if (finished_) return;
  finished_ = true;
  finish_after_write_ = status;
  if (writing_) {
    finish_pending_ = true;  // OnWriteDone finishes
  } else {
    Finish(std::move(status));
  }
}

void TailStream::Step(absl::Time now, bool stopping, absl::Time& wake, uint64_t& caught_up_at) {
  {
    bloomsync::BlockingLock lock(&mu_);
    if (!started_ || finished_) return;
    if (idle_timeout_ > absl::ZeroDuration() && sent_.load() > acked_ &&
        now - last_progress_ >= idle_timeout_) {
      bloomlog::LogWarning(absl::StrCat("replication: ending the stream of follower '",
                                        absl::CHexEscape(name_), "' (", context_->peer(),
                                        "): it acknowledged nothing of what it was sent for ",
                                        absl::FormatDuration(idle_timeout_)));
      const bool stuck = writing_;
      FinishLocked({grpc::StatusCode::ABORTED,
                    absl::StrCat("the follower acknowledged nothing it was sent for ",
                                 absl::FormatDuration(idle_timeout_))});
      if (stuck) context_->TryCancel();  // the write in flight returns, then Finish goes
      return;
    }
    if (writing_) {  // OnWriteDone wakes the pump if the write outlasts the pace
      if (paced_until_ > now) wake = std::min(wake, paced_until_);
      return;
    }
    if (stopping) {
      FinishLocked({grpc::StatusCode::UNAVAILABLE, "the primary is shutting down"});
      return;
    }
  }
  if (now < paced_until_) {
    wake = std::min(wake, paced_until_);
    return;
  }
  store_->database().NoteLogReader();  // the archive keeps what this stream may still read
  // The latest sequence before the read: once the follower applied this response, it holds
  // everything the primary held when it was sent (unless it was cut at kMaxResponseBytes).
  const uint64_t latest = store_->LatestSequence();
  absl::StatusOr<storage::LogRead> read = log_->Read(kMaxResponseBytes);
  response_.Clear();
  bloomsync::BlockingLock lock(&mu_);
  if (finished_) return;
  if (!read.ok()) {  // the reason travels in a message: the call itself ends cancelled
    response_.set_error_code(static_cast<int32_t>(read.status().code()));
    response_.set_error_message(std::string{read.status().message()});
    writing_ = true;
    FinishLocked(service::ToGrpcStatus(read.status()));  // after this write
    lock.Unlock();
    StartWrite(&response_);
    return;
  }
  if (read->batches.empty() && now - last_sent_ < kHeartbeat) {
    caught_up_at = std::min(caught_up_at, next_ - 1);
    wake = std::min(wake, last_sent_ + kHeartbeat);
    return;
  }
  for (storage::LogBatch& batch : read->batches) {
    v1::WalBatch* out = response_.add_batches();
    out->set_sequence(batch.sequence);
    out->set_data(std::move(batch.data));
  }
  response_.set_primary_sequence(std::max(latest, read->next - 1));
  response_.set_acks_wanted(acks_ != nullptr);
  response_.set_primary_time_micros(absl::ToUnixMicros(absl::Now()));
  const size_t bytes = response_.ByteSizeLong();
  if (!read->batches.empty()) {
    if (acked_ >= sent_.load()) last_progress_ = now;  // idle from now on if unanswered
    sent_.store(read->next - 1);  // before the write: its acknowledgement may come at once
  }
  last_sent_ = now;
  if (!read->batches.empty() && bytes < kMaxResponseBytes) {
    paced_until_ = now + (acks_ != nullptr ? kMinDataIntervalWithAcks : kMinDataInterval);
    wake = std::min(wake, paced_until_);  // OnWriteDone does not wake the pump before then
  }
  next_ = read->next;
  writing_ = true;
  lock.Unlock();
  hooks_.update(id_, sent_.load(), 0);
  StartWrite(&response_);
}

TailPump::TailPump(storage::ReplicatedStore* store) : store_(store), thread_([this] { Loop(); }) {}

TailPump::~TailPump() {
  quit_.store(true);
  Wake();
  thread_.join();
}

void TailPump::Add(std::shared_ptr<TailStream> stream) {
  {
    bloomsync::BlockingLock lock(&mu_);
    streams_.push_back(std::move(stream));
  }
  Wake();
}

void TailPump::Wake() {
  {
    bloomsync::BlockingLock lock(&wait_mu_);
    woken_.store(true);
  }
  wait_cv_.NotifyOne();
  store_->database().WakeWriteWaiters();
}

void TailPump::Stop() {
  stopping_.store(true);
  Wake();
}

void TailPump::Loop() {
  while (!quit_.load()) {
    woken_.store(false);
    std::vector<std::shared_ptr<TailStream>> streams;
    {
      bloomsync::BlockingLock lock(&mu_);
      std::erase_if(streams_, [](const auto& stream) { return stream->done(); });
      streams = streams_;
    }
    const absl::Time now = absl::Now();
    absl::Time wake = now + kHeartbeat;
    uint64_t caught_up_at = kNoneCaughtUp;
    for (const auto& stream : streams) stream->Step(now, stopping_.load(), wake, caught_up_at);
    streams.clear();  // a stream that is done now goes at the next round
    if (wake <= now) continue;
    if (caught_up_at != kNoneCaughtUp) {  // a stream waits for the next write
      store_->database().WaitForWriteAfter(caught_up_at, wake - now, &woken_);
    } else {  // only for a pace or a write in flight: writes must not wake the pump
      bloomsync::BlockingLock lock(&wait_mu_);
      wait_cv_.WaitFor(lock, absl::ToChronoNanoseconds(wake - now),
                       [this] { return woken_.load(); });
    }
  }
}

}  // namespace replication

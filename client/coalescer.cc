#include "client/coalescer.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "client/bloom_client.h"

namespace bloomclient {

using bloom::v1::PipelineRequest;
using bloom::v1::PipelineResponse;

// One caller's Add, MightContain, Remove or Count, and where its answer goes.
struct Coalescer::Call {
  enum class Kind { kAdd, kCheck, kRemove, kCount };
  Kind kind = Kind::kCheck;
  std::string name;
  absl::optional<bloom::v1::FilterSpec> create_if_missing;
  bool absent_if_missing = false;  // a check's
  std::vector<std::string> items;  // copied: the caller may time out and return early
  bool alone = false;              // retried alone after its merged operation failed

  std::mutex mu;
  std::condition_variable answered;
  bool done = false;
  absl::StatusOr<std::vector<bool>> result;
  std::vector<uint32_t> counts;  // a count's answer, when `result` is OK
  // A count not sent: the stream's server has not said it takes counts (older servers end
  // the stream on one). The caller makes the unary call instead.
  bool count_not_sent = false;

  void Answer(absl::StatusOr<std::vector<bool>> answer, std::vector<uint32_t> count_answer = {}) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (done) return;
      done = true;
      result = std::move(answer);
      counts = std::move(count_answer);
    }
    answered.notify_one();
  }
};

// A Pipeline stream with its context. Shared by the lane, its reader thread and a sender, so
// that a stream that breaks while a batch is being written stays valid until the write ends.
struct PipelineStream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<PipelineRequest, PipelineResponse>> rw;
  std::mutex write_mu;    // one writer at a time
  bool finished = false;  // Finish() was called (guarded by write_mu)

  // Batches the reader thread hands to the writer thread: the reader must never block in a
  // write (the server may be waiting for it to read answers before it reads more requests).
  std::mutex queue_mu;
  std::condition_variable queued;
  std::deque<std::vector<PipelineRequest>> queue;
  bool closing = false;
  std::thread writer;

  // Whether the server answers a request's `more` (it says so in its response headers, which
  // arrive with the first response): then a batch goes out as few messages as its size allows.
  std::atomic<bool> packs{false};
  // Whether it takes PipelineRequest.count (its headers carry bloom-pipeline-count: 1).
  std::atomic<bool> counts{false};

  void Write(std::vector<PipelineRequest> batch) {
    if (packs.load(std::memory_order_relaxed)) batch = Pack(std::move(batch));
    std::lock_guard<std::mutex> write_lock(write_mu);
    if (finished) return;
    for (size_t i = 0; i < batch.size(); ++i) {
      grpc::WriteOptions options;
      if (i + 1 < batch.size()) options.set_buffer_hint();  // one flush for the whole batch
      // A failed write means a broken stream: the reader sees it and fails the calls.
      if (!rw->Write(batch[i], options)) return;
    }
  }
  // Operations packed into the `more` of messages of at most kPackBytes (a message per
  // operation costs more than the operation itself for small ones).
  static std::vector<PipelineRequest> Pack(std::vector<PipelineRequest> batch) {
    constexpr size_t kPackBytes = 1 << 20;
    std::vector<PipelineRequest> packed;
    size_t bytes = 0;
    for (PipelineRequest& request : batch) {
      const size_t size = request.ByteSizeLong();
      if (packed.empty() || bytes + size > kPackBytes) {
        packed.push_back(std::move(request));
        bytes = size;
      } else {
        packed.back().mutable_more()->Add(std::move(request));
        bytes += size + 4;  // the field's tag and length
      }
    }
    return packed;
  }

  void Enqueue(std::vector<PipelineRequest> batch) {
    {
      std::lock_guard<std::mutex> lock(queue_mu);
      queue.push_back(std::move(batch));
    }
    queued.notify_one();
  }
  void WriteQueued() {
    std::unique_lock<std::mutex> lock(queue_mu);
    for (;;) {
      queued.wait(lock, [&] { return closing || !queue.empty(); });
      if (queue.empty()) return;  // closing
      std::vector<PipelineRequest> batch = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      Write(std::move(batch));
      lock.lock();
    }
  }
  void StopWriter() {
    {
      std::lock_guard<std::mutex> lock(queue_mu);
      closing = true;
      queue.clear();
    }
    queued.notify_one();
  }
};

// One Pipeline stream and the calls waiting for it or answered on it.
class Coalescer::Lane {
 public:
  Lane(bloom::v1::BloomFilterService::Stub* stub, const Options& options)
      : stub_(stub), options_(options) {}

  ~Lane() {
    std::shared_ptr<PipelineStream> stream;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stream = stream_;
      if (stream != nullptr && !in_flight_.empty()) stream->context.TryCancel();
    }
    if (stream != nullptr) {
      // Nothing is in flight (callers are gone): end the stream cleanly, the reader then
      // reads its end.
      std::lock_guard<std::mutex> write_lock(stream->write_mu);
      if (!stream->finished) stream->rw->WritesDone();
    }
    if (reader_.joinable()) reader_.join();  // it stops its stream's writer when it ends
    for (FinishedReader& old : finished_readers_) old.thread.join();
  }

  void Submit(std::shared_ptr<Call> call) {
    std::vector<PipelineRequest> batch;
    std::shared_ptr<PipelineStream> stream;
    {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_.push_back(std::move(call));
      // Otherwise an answer to what is in flight sends it.
      if (!MaySendLocked(stream_.get())) return;
      if (!OpenStreamLocked()) return;
      batch = TakeBatchLocked();
      stream = stream_;
    }
    // Inline: the caller waits for its answer anyway, and the reader thread goes on reading
    // answers while this write waits for the server.
    stream->Write(std::move(batch));
  }

 private:
  // Opens a stream if there is none; false (and every waiting call failed) if it cannot.
  bool OpenStreamLocked() {
    if (stream_ != nullptr) return true;
    // Readers of broken streams that have ended are joined now, not at the end: a client
    // whose server is down opens a stream per call, and their threads would pile up.
    std::erase_if(finished_readers_, [](FinishedReader& old) {
      if (!old.done->load()) return false;
      old.thread.join();
      return true;
    });
    if (reader_.joinable()) finished_readers_.push_back({std::move(reader_), reader_done_});
    auto stream = std::make_shared<PipelineStream>();
    if (!options_.token.empty()) {
      stream->context.AddMetadata("authorization", "Bearer " + options_.token);
    }
    stream->rw = stub_->Pipeline(&stream->context);
    if (stream->rw == nullptr) {
      FailLocked(absl::UnavailableError("cannot open a Pipeline stream"));
      return false;
    }
    stream_ = stream;
    stream->writer = std::thread([stream] { stream->WriteQueued(); });
    reader_done_ = std::make_shared<std::atomic<bool>>(false);
    reader_ = std::thread([this, stream, done = reader_done_] {
      ReadAnswers(*stream);
      done->store(true);  // last: holds no lock, touches nothing else
    });
    return true;
  }

  // Whether a batch may go out now: none is in flight, or one is and a second may follow it
  // (see kMaxRounds). `stream` is null before the first stream opens.
  bool MaySendLocked(const PipelineStream* stream) const {
    const size_t rounds_in_flight = round_operations_.size();
    if (rounds_in_flight == 0) return true;
    // A second round only to a server that packs (one message per batch, read whole) and
    // while the answers in flight are small: then the server can always write them, so it
    // never stops reading the next batch while this side's reader thread writes it (below).
    // And only behind a round of many operations, with many calls waiting
    // (kSecondRoundMinOperations).
    return rounds_in_flight < std::min(options_.rounds, kMaxRounds) && stream != nullptr &&
           stream->packs.load(std::memory_order_relaxed) &&
           in_flight_.size() >= kSecondRoundMinOperations &&
           waiting_.size() >= kSecondRoundMinOperations &&
           in_flight_.size() <= kSecondRoundOperations && items_in_flight_ <= kSecondRoundItems;
  }

  // Turns every waiting call into operations, one per run of calls that may share one, and
  // registers them as in flight, as one round.
  std::vector<PipelineRequest> TakeBatchLocked() {
    const uint64_t round = next_round_++;
    std::vector<PipelineRequest> batch;
    absl::flat_hash_map<std::string, size_t> open;  // key -> index in batch of its operation
    const bool takes_counts = stream_ != nullptr && stream_->counts.load();
    for (std::shared_ptr<Call>& call : waiting_) {
      if (call->kind == Call::Kind::kCount && !takes_counts) {
        {
          std::lock_guard<std::mutex> lock(call->mu);
          call->count_not_sent = true;
        }
        call->Answer(std::vector<bool>());
        continue;
      }
      std::string key;
      if (!call->alone) {
        const char* kind = call->kind == Call::Kind::kAdd      ? "a"
                           : call->kind == Call::Kind::kRemove ? "r"
                           : call->kind == Call::Kind::kCount  ? "n"
                           : call->absent_if_missing           ? "C"
                                                               : "c";
        key = absl::StrCat(kind, call->name.size(), ":", call->name);
        if (call->create_if_missing.has_value()) {
          absl::StrAppend(&key, call->create_if_missing->SerializeAsString());
        }
      }
      size_t index = batch.size();
      if (auto it = open.find(key);
          !call->alone && it != open.end() &&
          in_flight_[batch[it->second].id()].items + call->items.size() <= options_.max_items) {
        index = it->second;
      } else {
        PipelineRequest& request = batch.emplace_back();
        request.set_id(next_id_++);
        if (call->kind == Call::Kind::kRemove) {
          request.mutable_remove()->set_name(call->name);
        } else if (call->kind == Call::Kind::kCount) {
          request.mutable_count()->set_name(call->name);
          if (options_.last_sequence != nullptr) {
            request.mutable_count()->set_min_sequence(options_.last_sequence->load());
          }
        } else if (call->kind == Call::Kind::kAdd) {
          request.mutable_add()->set_name(call->name);
          if (call->create_if_missing.has_value()) {
            *request.mutable_add()->mutable_create_if_missing() = *call->create_if_missing;
          }
        } else {
          request.mutable_might_contain()->set_name(call->name);
          request.mutable_might_contain()->set_absent_if_missing(call->absent_if_missing);
          if (options_.last_sequence != nullptr) {
            request.mutable_might_contain()->set_min_sequence(options_.last_sequence->load());
          }
        }
        if (!call->alone) open[key] = index;
      }
      PipelineRequest& request = batch[index];
      auto* items =
          call->kind == Call::Kind::kAdd      ? request.mutable_add()->mutable_raw_items()
          : call->kind == Call::Kind::kRemove ? request.mutable_remove()->mutable_raw_items()
          : call->kind == Call::Kind::kCount  ? request.mutable_count()->mutable_raw_items()
                                             : request.mutable_might_contain()->mutable_raw_items();
      for (const std::string& item : call->items) items->Add()->assign(item);
      Operation& operation = in_flight_[request.id()];
      if (operation.calls.empty()) {
        operation.round = round;
        ++round_operations_[round];
      }
      operation.items += call->items.size();
      items_in_flight_ += call->items.size();
      operation.calls.push_back(std::move(call));
    }
    waiting_.clear();
    return batch;
  }

  void ReadAnswers(PipelineStream& stream) {
    // The server's headers say what it takes. It sends them when the stream opens (servers
    // that predate bloom-pipeline-count: with the first answer).
    stream.rw->WaitForInitialMetadata();
    const auto& headers = stream.context.GetServerInitialMetadata();
    auto it = headers.find("bloom-pipeline-more");
    stream.packs.store(it != headers.end() && it->second == "1");
    it = headers.find("bloom-pipeline-count");
    stream.counts.store(it != headers.end() && it->second == "1");
    PipelineResponse response;
    while (stream.rw->Read(&response)) {
      google::protobuf::RepeatedPtrField<PipelineResponse> more;
      more.Swap(response.mutable_more());
      Answered(stream, response);
      for (const PipelineResponse& part : more) Answered(stream, part);
    }
    // The stream is over (Read failed): no write can succeed any more. Stop the writer, then
    // finish with no write in progress.
    stream.StopWriter();
    stream.writer.join();
    grpc::Status status;
    {
      std::lock_guard<std::mutex> write_lock(stream.write_mu);
      status = stream.rw->Finish();
      stream.finished = true;
    }
    // A refused token is the caller's to fix, not a broken stream to retry.
    const bool refused = status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                         status.error_code() == grpc::StatusCode::PERMISSION_DENIED;
    std::lock_guard<std::mutex> lock(mu_);
    FailLocked(refused ? FromGrpcStatus(status)
                       : absl::UnavailableError(absl::StrCat(
                             "the Pipeline stream ended: ",
                             status.ok() ? "by the server" : status.error_message(), " (code ",
                             static_cast<int>(status.error_code()),
                             "); an add may be retried, a remove may have been made")));
    if (stream_.get() == &stream) stream_.reset();  // the next call opens a new one
  }

  // Delivers one operation's answer, and sends what waits once its round is answered.
  void Answered(PipelineStream& stream, const PipelineResponse& response) {
    Operation operation;
    std::vector<PipelineRequest> next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = in_flight_.find(response.id());
      if (it == in_flight_.end()) return;  // not ours: ignore
      operation = std::move(it->second);
      in_flight_.erase(it);
      items_in_flight_ -= operation.items;
      if (auto round = round_operations_.find(operation.round); --round->second == 0) {
        round_operations_.erase(round);  // the round is answered
      }
      if (response.has_error() && operation.calls.size() > 1 && RetryAlone(response)) {
        for (std::shared_ptr<Call>& call : operation.calls) {
          call->alone = true;
          waiting_.push_back(std::move(call));
        }
        operation.calls.clear();
      }
      if (!waiting_.empty() && MaySendLocked(&stream)) next = TakeBatchLocked();
    }
    if (!next.empty()) {
      if (SafeToWriteInline(next, stream.packs.load(std::memory_order_relaxed))) {
        stream.Write(std::move(next));
      } else {
        stream.Enqueue(std::move(next));
      }
    }
    Deliver(response, operation, options_.last_sequence);
  }

  // Whether the reader thread may write `batch` itself instead of handing it to the writer
  // thread (a thread hop that cost a quarter of the calls per second with 50 one-key callers).
  // A server stops reading a stream only with --pipeline_window operations (default 64) or
  // 4 MiB of requests unanswered, and it answers them even while this thread is not reading
  // answers when they are small (MaySendLocked allows a second round only then): a small
  // batch is read whole. Packed (`packs`), a batch of up to 1 MiB is one message, which the
  // server reads whole.
  static bool SafeToWriteInline(const std::vector<PipelineRequest>& batch, bool packs) {
    constexpr size_t kInlineOperations = 8, kInlineBytes = 1 << 20;
    if (!packs && batch.size() > kInlineOperations) return false;
    size_t bytes = 0;
    for (const PipelineRequest& request : batch) bytes += request.ByteSizeLong();
    return bytes <= kInlineBytes;
  }

  // Whether a merged operation's error may belong to one of its calls only.
  static bool RetryAlone(const PipelineResponse& response) {
    const auto code = static_cast<grpc::StatusCode>(response.error().code());
    return code == grpc::StatusCode::INVALID_ARGUMENT ||
           code == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }

  struct Operation {
    size_t items = 0;
    uint64_t round = 0;                        // TakeBatchLocked's
    std::vector<std::shared_ptr<Call>> calls;  // in item order
  };

  static void Deliver(const PipelineResponse& response, Operation& operation,
                      std::atomic<uint64_t>* last_sequence) {
    // Before the callers hear of their adds: a check they make next carries this sequence.
    if (last_sequence != nullptr && response.has_add()) {
      RaiseSequence(*last_sequence, response.add().sequence());
    } else if (last_sequence != nullptr && response.has_remove()) {
      RaiseSequence(*last_sequence, response.remove().sequence());
    }
    if (response.has_error()) {
      const absl::Status status(static_cast<absl::StatusCode>(response.error().code()),
                                response.error().message());
      for (const std::shared_ptr<Call>& call : operation.calls) call->Answer(status);
      return;
    }
    if (response.has_count()) {
      SplitAnswers(response.count().counts(), operation, [](Call& call, auto begin, auto end) {
        call.Answer(std::vector<bool>(), std::vector<uint32_t>(begin, end));
      });
      return;
    }
    const auto& answers = response.has_add()      ? response.add().added()
                          : response.has_remove() ? response.remove().removed()
                                                  : response.might_contain().present();
    SplitAnswers(answers, operation, [](Call& call, auto begin, auto end) {
      call.Answer(std::vector<bool>(begin, end));
    });
  }

  // Gives each call of `operation` its own items' answers, in item order, through `give`.
  template <typename Answer, typename Give>
  static void SplitAnswers(const google::protobuf::RepeatedField<Answer>& answers,
                           Operation& operation, Give give) {
    size_t next = 0;
    for (const std::shared_ptr<Call>& call : operation.calls) {
      if (next + call->items.size() > static_cast<size_t>(answers.size())) {
        call->Answer(absl::InternalError("the server answered fewer items than were sent"));
        continue;
      }
      give(*call, answers.begin() + next, answers.begin() + next + call->items.size());
      next += call->items.size();
    }
  }

  void FailLocked(const absl::Status& status) {
    for (auto& [id, operation] : in_flight_) {
      for (const std::shared_ptr<Call>& call : operation.calls) call->Answer(status);
    }
    in_flight_.clear();
    round_operations_.clear();
    items_in_flight_ = 0;
    for (const std::shared_ptr<Call>& call : waiting_) call->Answer(status);
    waiting_.clear();
  }

  bloom::v1::BloomFilterService::Stub* const stub_;
  const Options& options_;

  std::mutex mu_;
  std::deque<std::shared_ptr<Call>> waiting_;  // not yet sent
  // Rounds (batches) in flight at once, at most (Options::rounds). With one, client and server took
  // turns: while the server served a batch the calls gathering for the next waited, and while this
  // side delivered answers and sent the next batch the server idled (~40% of two shared cores idle
  // with 50 one-key callers on per-user filters). With two, the server serves one round while
  // this side handles the other's answers.
  static constexpr size_t kMaxRounds = 2;
  // A second round goes out only while the answers in flight are at most this big, well
  // inside HTTP/2's smallest flow-control window (64 KiB): the server can write them though
  // nobody reads them yet.
  static constexpr size_t kSecondRoundItems = 4096;
  static constexpr size_t kSecondRoundOperations = 1024;
  // The server's work is per operation (a lookup, a journal record) and per message: a round
  // of one-key calls on per-user filters keeps it busy long enough to overlap with, while calls
  // coalesced into a few operations are served at once and a second round would only split
  // them (one-key calls on one filter, scenario 3 of compare.sh: 20% more server CPU per key
  // for no more keys/s), and a second round of one call is a message for little (sent as
  // soon as one call waited: 8% more server CPU per key on per-user filters).
  static constexpr size_t kSecondRoundMinOperations = 8;

  absl::flat_hash_map<uint64_t, Operation> in_flight_;
  // Round -> its operations in flight: one entry per round in flight (the last answer of one
  // sends what waits).
  absl::flat_hash_map<uint64_t, size_t> round_operations_;
  size_t items_in_flight_ = 0;
  uint64_t next_round_ = 1;
  uint64_t next_id_ = 1;
  std::shared_ptr<PipelineStream> stream_;  // null until the first call, and once broken
  std::thread reader_;
  // Readers of broken streams, joined once they are done (or at the end).
  struct FinishedReader {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<FinishedReader> finished_readers_;
  std::shared_ptr<std::atomic<bool>> reader_done_;  // reader_'s
};

Coalescer::Coalescer(bloom::v1::BloomFilterService::Stub* stub, Options options)
    : options_(std::move(options)) {
  const size_t streams = options_.streams == 0 ? 1 : options_.streams;
  for (size_t i = 0; i < streams; ++i) lanes_.push_back(std::make_unique<Lane>(stub, options_));
}

Coalescer::~Coalescer() = default;

absl::StatusOr<std::vector<bool>> Coalescer::Add(absl::string_view name,
                                                 absl::Span<const std::string> items,
                                                 const bloom::v1::FilterSpec* create_if_missing) {
  auto call = std::make_shared<Call>();
  call->kind = Call::Kind::kAdd;
  call->name.assign(name.data(), name.size());
  if (create_if_missing != nullptr) call->create_if_missing = *create_if_missing;
  call->items.assign(items.begin(), items.end());
  return Submit(std::move(call));
}

absl::StatusOr<std::vector<bool>> Coalescer::MightContain(absl::string_view name,
                                                          absl::Span<const std::string> items,
                                                          bool absent_if_missing) {
  auto call = std::make_shared<Call>();
  call->name.assign(name.data(), name.size());
  call->absent_if_missing = absent_if_missing;
  call->items.assign(items.begin(), items.end());
  return Submit(std::move(call));
}

absl::StatusOr<std::vector<bool>> Coalescer::Remove(absl::string_view name,
                                                    absl::Span<const std::string> items) {
  auto call = std::make_shared<Call>();
  call->kind = Call::Kind::kRemove;
  call->name.assign(name.data(), name.size());
  call->items.assign(items.begin(), items.end());
  return Submit(std::move(call));
}

absl::StatusOr<absl::optional<std::vector<uint32_t>>> Coalescer::Count(
    absl::string_view name, absl::Span<const std::string> items) {
  auto call = std::make_shared<Call>();
  call->kind = Call::Kind::kCount;
  call->name.assign(name.data(), name.size());
  call->items.assign(items.begin(), items.end());
  absl::StatusOr<std::vector<bool>> done = Submit(call);
  if (!done.ok()) return done.status();
  std::lock_guard<std::mutex> lock(call->mu);
  if (call->count_not_sent) return absl::nullopt;
  return std::move(call->counts);
}

absl::StatusOr<std::vector<bool>> Coalescer::Submit(std::shared_ptr<Call> call) {
  Lane& lane = *lanes_[absl::Hash<std::string>()(call->name) % lanes_.size()];
  lane.Submit(call);
  std::unique_lock<std::mutex> lock(call->mu);
  if (!call->answered.wait_for(lock, absl::ToChronoNanoseconds(options_.timeout),
                               [&] { return call->done; })) {
    // The operation may still complete on the server; its answer is then dropped.
    return absl::DeadlineExceededError(
        absl::StrCat("no answer within ", absl::FormatDuration(options_.timeout)));
  }
  return std::move(call->result);
}

}  // namespace bloomclient

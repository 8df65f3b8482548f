// PipelineBatch: the operations one Pipeline stream read together, served against the store as
// few store calls as their order allows, with no gRPC in the way (pipeline.h streams them).
//
// Consecutive operations of one kind on one filter (and, for adds, one create_if_missing) form
// a run, served as one store call: a run of adds is one add of all their items (one journal
// record, one fsync with --sync), a run of checks one check. A merged run that fails is served
// again one operation at a time, so each operation gets the answer it would get alone (a full
// non-scaling filter may still hold the first operation's items; one bad request fails alone).
//
//   PipelineBatch batch(service, caller);
//   batch.Take(pending);                        // the operations read meanwhile
//   batch.Queue(*store_batch, abandoned);       // checks answered now, adds queued
//   store_batch->Flush();                       // one RocksDB write for the adds
//   batch.Answer(*store_batch);                 // the adds' answers
//   for (size_t i = 0; i < batch.size(); ++i) Send(batch.responses()[i]);
//
// With adds the store batch is the group committer's (storage/write/group_commit.h), shared with
// other streams and calls. Each operation's answer, or its error, is in responses()[i].
//
// Thread-safety: not thread-safe; one thread serves a batch at a time.
#ifndef SERVICE_PIPELINE_BATCH_H_
#define SERVICE_PIPELINE_BATCH_H_

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bloom/v1/bloom.pb.h"
#include "service/auth.h"
#include "service/direct_parse.h"
#include "service/shard_router.h"
#include "storage/write/operation_batch.h"

namespace service {

class BloomService;

class PipelineBatch {
 public:
  // One PipelineRequest as read: its operations as views (direct_parse.h) into its bytes,
  // which `bytes` keeps (the stream's received slice), or into `merged`.
  struct Message {
    std::shared_ptr<const void> bytes;
    std::deque<std::string> merged;
    std::vector<PipelineOperationView> operations;
  };
  // Reads the PipelineRequest in `bytes` (kept by `keep`): INVALID_ARGUMENT, naming the request's
  // id, when it is malformed, carries more than `max_operations` operations (0: no bound;
  // checked before it is parsed), has no operation, or nests operations in a `more`.
  static absl::StatusOr<std::shared_ptr<const Message>> Read(std::shared_ptr<const void> keep,
                                                             absl::string_view bytes,
                                                             size_t max_operations);

  // One operation as read: a message's own operation is followed by the `more` operations it
  // carried, which have bytes 0.
  struct Operation {
    std::shared_ptr<const Message> message;  // keeps what the view points into
    size_t index = 0;                        // in message->operations
    size_t bytes = 0;  // of the message it came in (0 for the operations in a message's `more`)
    size_t more = 0;   // operations that came in this one's `more`: the Operations right after it

    const PipelineOperationView& view() const { return message->operations[index]; }
  };

  // `service` (its limits, store and metrics) must outlive the batch; `caller` is the stream's,
  // whose role every add is checked against.
  PipelineBatch(BloomService* service, Caller caller);

  // Takes every operation of `pending` (which it empties) as the batch to serve, responses
  // cleared.
  void Take(std::vector<Operation>& pending);
  size_t size() const { return operations_.size(); }
  // Whether it has adds or removes (served through the store's group committer).
  bool has_writes() const;

  // Serves the batch into `store_batch`: checks and removes are answered now, adds are queued. Once
  // `abandoned` reads true (nobody will read the answers) the rest is dropped: size() shrinks.
  void Queue(storage::OperationBatch& store_batch, const std::atomic<bool>& abandoned);
  // After `store_batch` was flushed: the queued adds' answers.
  void Answer(storage::OperationBatch& store_batch);
  // Every operation answers `why` (the store batch could not be had).
  void Fail(const absl::Status& why);
  // Whether the answers must wait for the write-ahead log's fsync (adds under --sync).
  bool deferred_sync() const { return deferred_sync_; }

  // The operations Queue left unanswered because they name other groups' filters (a sharded
  // deployment): indices into operations(), ascending. The stream forwards them
  // (pipeline_forward.h).
  const std::vector<size_t>& forwarded() const { return forwarded_; }

  std::vector<Operation>& operations() { return operations_; }
  std::vector<bloom::v1::PipelineResponse>& responses() { return responses_; }
  void Clear();

 private:
  // A run of adds queued in the store batch: one ticket for all (merged), or one per operation.
  struct QueuedRun {
    QueuedRun(size_t begin, size_t end, absl::Time start) : begin(begin), end(end), start(start) {}
    size_t begin, end;
    absl::Time start;
    bool merged = false;
    std::vector<storage::OperationBatch::Ticket> tickets;  // merged: one; else per operation
    std::vector<size_t> ends;  // merged: the items of operation i end at ends[i]
    std::vector<bool> failed;  // not merged: answered with an error before queueing
  };
  using Run = absl::Span<const Operation>;
  using Responses = absl::Span<bloom::v1::PipelineResponse>;

  void QueueAdds(storage::OperationBatch& store_batch, Run run, Responses responses,
                 QueuedRun& queued);
  // One ticket per operation of the run; invalid ones are answered at once.
  void QueueEach(storage::OperationBatch& store_batch, Run run, Responses responses,
                 QueuedRun& queued);
  // Answers a queued run once the batch is written; a merged run that failed is queued again
  // one operation at a time.
  void TakeAdds(storage::OperationBatch& store_batch, Run run, Responses responses,
                QueuedRun& queued);
  // Removes (CUCKOO filters), one store call each, answered now.
  void AnswerRemoves(storage::OperationBatch& store_batch, Run run, Responses responses);
  // A count (CUCKOO filters), answered now.
  void AnswerCount(storage::OperationBatch& store_batch, const Operation& operation,
                   bloom::v1::PipelineResponse& response);
  // Checks of one filter: one store call for all, or one each if that fails.
  void AnswerChecks(storage::OperationBatch& store_batch, Run run, Responses responses);
  void RecordRun(size_t begin, size_t end, absl::Duration took);
  // Where a sharded deployment serves the operation (here when not sharded).
  ShardRouter::Decision RouteOf(const Operation& operation) const;
  // In a sharded deployment, after a run's writes were applied: those that succeeded answer
  // UNAVAILABLE instead if their filter's slot began moving meanwhile
  // (ShardRouter::SettleWrite).
  void SettleWrites(Run run, Responses responses);

  BloomService* const service_;
  const Caller caller_;
  std::vector<Operation> operations_;
  std::vector<bloom::v1::PipelineResponse> responses_;
  std::vector<QueuedRun> queued_;
  std::vector<size_t> forwarded_;
  bool deferred_sync_ = false;
};

// Puts `status` into `response` as its OperationError.
void SetOperationError(const absl::Status& status, bloom::v1::PipelineResponse& response);

}  // namespace service

#endif  // SERVICE_PIPELINE_BATCH_H_

// PipelineForwards: the operations of one Pipeline stream that name other groups' filters, in a
// sharded deployment. A client that does not route by the shard map opens its stream to any
// pod; the operations on filters of the pod's own group are served there (pipeline_batch.h),
// and the others go to their filter's group as the unary call each stands for (Add,
// MightContain, Remove, Count), one hop, with the stream's token (ShardRouter::Forward), to
// the group's primary (checks too: it holds every add the stream sent before them). The
// owner's answer, or its error as the operation's OperationError, comes back to the stream,
// which writes every answer in request order.
//
//   PipelineForwards forwards(router, context, limits.max_batch);
//   forwards.Send(operation_view, [](bloom::v1::PipelineResponse result) { ... });
//
// Order: the calls for one filter go one at a time, in the order the stream read them, so a
// check after an add of the same item sees it, as on a filter served here. Adds (or checks)
// of one filter that wait behind a call go together as one call with all their items; if that
// call fails, each goes again alone, so that each gets the answer it would get alone (one bad
// operation fails alone). Calls for different filters run at once: the stream's window bounds
// how many operations are unanswered.
//
// Where each call goes is decided as it is sent, so an operation that waited behind another
// follows the map as it is by then; one whose filter came to this pod's group meanwhile answers
// UNAVAILABLE, which clients retry.
//
// Thread-safety: thread-safe. Each `answered` callback runs once, on a gRPC thread or in Send;
// once a stream's last one has run nothing touches the stream (its context), which may end.
#ifndef SERVICE_PIPELINE_FORWARD_H_
#define SERVICE_PIPELINE_FORWARD_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "bloom/v1/bloom.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/direct_parse.h"
#include "service/shard_router.h"

namespace service {

class PipelineForwards {
 public:
  // Gets the operation's answer in the response's `result` (its id and `more` unset).
  using Answered = std::function<void(bloom::v1::PipelineResponse result)>;

  // `router` must outlive the forwards; `caller` (the stream's context) must stay valid while
  // an operation is unanswered. Calls merged from several operations carry at most
  // `max_items` items.
  PipelineForwards(ShardRouter* router, grpc::ServerContextBase* caller, size_t max_items);
  ~PipelineForwards();
  PipelineForwards(const PipelineForwards&) = delete;
  PipelineForwards& operator=(const PipelineForwards&) = delete;

  // Sends `operation` (copied: its views need not outlive this call) to its filter's group.
  void Send(const PipelineOperationView& operation, Answered answered);

  struct Shared;  // what the calls in flight keep (pipeline_forward.cc)

 private:
  std::shared_ptr<Shared> shared_;
};

// Moves the result of `answer` (its oneof) into `slot`, whose id and `more` stay.
void TakeResult(bloom::v1::PipelineResponse&& answer, bloom::v1::PipelineResponse& slot);

}  // namespace service

#endif  // SERVICE_PIPELINE_FORWARD_H_

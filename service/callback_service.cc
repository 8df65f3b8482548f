// BloomCallbackService (service/callback_service.h): the unary methods on gRPC's callback API.
#include "service/callback_service.h"

#include <string>
#include <utility>
#include <vector>

#include "common/rpcs.h"
#include "service/forwarder.h"
#include "service/shard_router.h"
#include "service/sharded_list.h"

namespace service {

namespace {

using Finish = BloomService::Finish;
// Serves a call on this pod: answers it through `finish`, at once or later from another thread.
using Serve = absl::AnyInvocable<void(Finish finish) &&>;

Finish FinishOf(grpc::ServerUnaryReactor* reactor) {
  return [reactor](grpc::Status status) { reactor->Finish(std::move(status)); };
}

// A call forwarded to the primary (a follower's write, or a read it could not answer in time):
// `reactor` (the call's) finishes with the primary's status and answer.
void ForwardMessage(Forwarder* forwarder, grpc::CallbackServerContext* context, const char* method,
                    const google::protobuf::Message& request, google::protobuf::Message* response,
                    grpc::ServerUnaryReactor* reactor) {
  forwarder->UnaryMessageAsync(context, method, request, response,
                               [reactor](const grpc::Status& status) { reactor->Finish(status); });
}

// `serve` run where the RPC table says the call runs: inline on this gRPC thread, or on the
// admin lane (call_lane.h; RESOURCE_EXHAUSTED at once when too many wait there already).
void ServeInLane(BloomService* core, const rpcs::RpcInfo& info, Serve serve,
                 grpc::ServerUnaryReactor* reactor) {
  if (info.lane != rpcs::Lane::kAdminLane) {
    std::move(serve)(FinishOf(reactor));
    return;
  }
  if (!core->admin_lane().Post(
          [reactor, serve = std::move(serve)]() mutable { std::move(serve)(FinishOf(reactor)); })) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "too many List and Stats calls are waiting; retry later"));
  }
}

// One unary call, run as the RPC table (common/rpcs.h) says. On a follower a write goes to the
// primary, and a read asking for `min_sequence` (read your writes) is served once this pod has
// applied that sequence (at once, on this thread, on a primary or a follower that has it), else
// by the primary. A follower holds no thread while the read waits (Forwarder::WhenApplied): a
// client cannot tie up the gRPC threads with sequences that never come.
//
// In a sharded deployment (ShardRouter) that is for a call naming filters of this pod's group;
// a call for another group's is forwarded there first (shard_router.h).
grpc::ServerUnaryReactor* Dispatch(BloomService* core, grpc::CallbackServerContext* context,
                                   rpcs::Rpc rpc, absl::Span<const absl::string_view> names,
                                   uint64_t min_sequence, const google::protobuf::Message* request,
                                   google::protobuf::Message* response, Serve serve) {
  const rpcs::RpcInfo& info = rpcs::Info(rpc);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (ShardRouter* router = core->hooks().router) {
    const ShardRouter::Decision route =
        router->Decide(info, names, context, /*fresh_read=*/min_sequence != 0);
    if (!route.refusal.ok()) {
      reactor->Finish(route.refusal);
      return reactor;
    }
    if (!route.here) {
      router->ForwardMessage(context, route, info.path, *request, response,
                             [reactor](const grpc::Status& status) { reactor->Finish(status); });
      return reactor;
    }
    if (info.access == rpcs::Access::kWrite && !names.empty()) {
      // Its answer waits for ShardRouter::SettleWrite: the slot may begin moving meanwhile.
      // The filter it writes is the first it names (Merge's target; its sources may be other
      // groups').
      serve = [core, context, inner = std::move(serve),
               filters =
                   std::vector<std::string>{std::string(names.front())}](Finish finish) mutable {
        const std::vector<absl::string_view> views(filters.begin(), filters.end());
        std::move(inner)(core->SettledWrite(views, context, std::move(finish)));
      };
    }
  }
  Forwarder* forwarder = core->hooks().forwarder;
  switch (info.forwarding) {
    case rpcs::Forwarding::kAlways:
      if (forwarder != nullptr) {
        ForwardMessage(forwarder, context, info.path, *request, response, reactor);
      } else {
        ServeInLane(core, info, std::move(serve), reactor);
      }
      return reactor;
    case rpcs::Forwarding::kUnlessApplied:
      core->WhenApplied(min_sequence, context,
                        [core, context, reactor, &info, request, response,
                         serve = std::move(serve)](bool applied) mutable {
                          if (applied) {
                            ServeInLane(core, info, std::move(serve), reactor);
                          } else {
                            ForwardMessage(core->hooks().forwarder, context, info.path, *request,
                                           response, reactor);
                          }
                        });
      return reactor;
    case rpcs::Forwarding::kWholeStream:
    case rpcs::Forwarding::kNever:
    case rpcs::Forwarding::kNotACall:
      break;
  }
  ServeInLane(core, info, std::move(serve), reactor);
  return reactor;
}

// A Merge's target, then its sources: the filters it touches.
std::vector<absl::string_view> MergeNames(const bloom::v1::MergeRequest& request) {
  std::vector<absl::string_view> names = {request.target()};
  for (const std::string& source : request.sources()) names.emplace_back(source);
  return names;
}

}  // namespace

grpc::ServerUnaryReactor* BloomCallbackService::Reserve(grpc::CallbackServerContext* context,
                                                        const bloom::v1::ReserveRequest* request,
                                                        bloom::v1::ReserveResponse* response) {
  return Dispatch(core_, context, rpcs::Rpc::kReserve, {request->name()}, 0, request, response,
                  [core = core_, context, request, response](Finish finish) {
                    core->HandleReserveThen(*request, response, context, std::move(finish));
                  });
}

grpc::ServerUnaryReactor* BloomCallbackService::Stats(grpc::CallbackServerContext* context,
                                                      const bloom::v1::StatsRequest* request,
                                                      bloom::v1::StatsResponse* response) {
  return Dispatch(core_, context, rpcs::Rpc::kStats, {request->name()}, request->min_sequence(),
                  request, response, [core = core_, context, request, response](Finish finish) {
                    std::move(finish)(core->HandleStats(*request, response, context));
                  });
}

grpc::ServerUnaryReactor* BloomCallbackService::Delete(grpc::CallbackServerContext* context,
                                                       const bloom::v1::DeleteRequest* request,
                                                       bloom::v1::DeleteResponse* response) {
  return Dispatch(core_, context, rpcs::Rpc::kDelete, {request->name()}, 0, request, response,
                  [core = core_, context, request, response](Finish finish) {
                    core->HandleDeleteThen(*request, response, context, std::move(finish));
                  });
}

grpc::ServerUnaryReactor* BloomCallbackService::Merge(grpc::CallbackServerContext* context,
                                                      const bloom::v1::MergeRequest* request,
                                                      bloom::v1::MergeResponse* response) {
  return Dispatch(core_, context, rpcs::Rpc::kMerge, MergeNames(*request), 0, request, response,
                  [core = core_, context, request, response](Finish finish) {
                    core->HandleMergeThen(*request, response, context, std::move(finish));
                  });
}

grpc::ServerUnaryReactor* BloomCallbackService::Remove(grpc::CallbackServerContext* context,
                                                       const bloom::v1::RemoveRequest* request,
                                                       bloom::v1::RemoveResponse* response) {
  return Dispatch(core_, context, rpcs::Rpc::kRemove, {request->name()}, 0, request, response,
                  [core = core_, context, request, response](Finish finish) {
                    core->HandleRemoveThen(*request, response, context, std::move(finish));
                  });
}

grpc::ServerUnaryReactor* BloomCallbackService::Count(grpc::CallbackServerContext* context,
                                                      const bloom::v1::CountRequest* request,
                                                      bloom::v1::CountResponse* response) {
  return Dispatch(core_, context, rpcs::Rpc::kCount, {request->name()}, request->min_sequence(),
                  request, response, [core = core_, context, request, response](Finish finish) {
                    std::move(finish)(core->HandleCount(*request, response, context));
                  });
}

grpc::ServerUnaryReactor* BloomCallbackService::List(grpc::CallbackServerContext* context,
                                                     const bloom::v1::ListRequest* request,
                                                     bloom::v1::ListResponse* response) {
  // In a sharded deployment, every group's filters (sharded_list.h), unless another pod or a
  // slot mover asked for this pod's only.
  return Dispatch(core_, context, rpcs::Rpc::kList, {}, request->min_sequence(), request, response,
                  [core = core_, context, request, response](Finish finish) {
                    if (core->hooks().router != nullptr && !ShardRouter::ForwardedByAPod(context) &&
                        !ShardRouter::MoverCall(context)) {
                      ListEveryGroup(core, context, *request, response, std::move(finish));
                      return;
                    }
                    std::move(finish)(core->HandleList(*request, response, context));
                  });
}

grpc::ServerUnaryReactor* BloomCallbackService::GetShardMap(
    grpc::CallbackServerContext* context, const bloom::v1::GetShardMapRequest* request,
    bloom::v1::GetShardMapResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(core_->HandleGetShardMap(*request, response, context));
  return reactor;
}

}  // namespace service

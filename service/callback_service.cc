// BloomCallbackService (service/callback_service.h): the unary methods on gRPC's callback API.
#include "service/callback_service.h"

#include <utility>

#include "service/forwarder.h"

namespace service {

namespace {

// A callback unary call answered through the `finish` that `handler` is given: at once, or
// later from another thread.
template <typename Handler>
grpc::ServerUnaryReactor* Later(grpc::CallbackServerContext* context, Handler handler) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  handler([reactor](const grpc::Status& status) { reactor->Finish(status); });
  return reactor;
}

// A callback unary call answered on `lane` (call_lane.h); RESOURCE_EXHAUSTED at once when too
// many wait there already.
template <typename Handler>
void OnLane(CallLane& lane, grpc::ServerUnaryReactor* reactor, Handler handler) {
  if (!lane.Post(
          [reactor, handler = std::move(handler)]() mutable { reactor->Finish(handler()); })) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "too many List and Stats calls are waiting; retry later"));
  }
}

// A call forwarded to the primary (a follower's write, or a read it could not answer in time):
// `reactor` (the call's) finishes with the primary's status and answer.
grpc::ServerUnaryReactor* ForwardMessage(Forwarder* forwarder, grpc::CallbackServerContext* context,
                                         const char* method,
                                         const google::protobuf::Message& request,
                                         google::protobuf::Message* response,
                                         grpc::ServerUnaryReactor* reactor) {
  forwarder->UnaryMessageAsync(context, method, request, response,
                               [reactor](const grpc::Status& status) { reactor->Finish(status); });
  return reactor;
}

// A read asking for `min_sequence` (read your writes): `serve(reactor)` answers it once this
// pod has applied that sequence (at once, on this thread, on a primary or a follower that has
// it), else the primary answers it. A follower holds no thread while the read waits
// (Forwarder::WhenApplied): a client cannot tie up the gRPC threads with sequences that never
// come.
template <typename Serve>
grpc::ServerUnaryReactor* AtSequence(BloomService* core, grpc::CallbackServerContext* context,
                                     uint64_t min_sequence, const char* method,
                                     const google::protobuf::Message* request,
                                     google::protobuf::Message* response, Serve serve) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  core->WhenApplied(min_sequence, context,
                    [core, context, reactor, method, request, response,
                     serve = std::move(serve)](bool applied) mutable {
                      if (applied) {
                        serve(reactor);
                      } else {
                        ForwardMessage(core->hooks().forwarder, context, method, *request, response,
                                       reactor);
                      }
                    });
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* BloomCallbackService::Reserve(grpc::CallbackServerContext* context,
                                                        const bloom::v1::ReserveRequest* request,
                                                        bloom::v1::ReserveResponse* response) {
  if (Forwarder* forwarder = core_->hooks().forwarder) {
    return ForwardMessage(forwarder, context, kReserveMethod, *request, response,
                          context->DefaultReactor());
  }
  return Later(context, [&](BloomService::Finish finish) {
    core_->HandleReserveThen(*request, response, context, std::move(finish));
  });
}

grpc::ServerUnaryReactor* BloomCallbackService::Stats(grpc::CallbackServerContext* context,
                                                      const bloom::v1::StatsRequest* request,
                                                      bloom::v1::StatsResponse* response) {
  return AtSequence(core_, context, request->min_sequence(), kStatsMethod, request, response,
                    [core = core_, context, request, response](grpc::ServerUnaryReactor* reactor) {
                      OnLane(core->admin_lane(), reactor, [core, context, request, response] {
                        return core->HandleStats(*request, response, context);
                      });
                    });
}

grpc::ServerUnaryReactor* BloomCallbackService::Delete(grpc::CallbackServerContext* context,
                                                       const bloom::v1::DeleteRequest* request,
                                                       bloom::v1::DeleteResponse* response) {
  if (Forwarder* forwarder = core_->hooks().forwarder) {
    return ForwardMessage(forwarder, context, kDeleteMethod, *request, response,
                          context->DefaultReactor());
  }
  return Later(context, [&](BloomService::Finish finish) {
    core_->HandleDeleteThen(*request, response, context, std::move(finish));
  });
}

grpc::ServerUnaryReactor* BloomCallbackService::Merge(grpc::CallbackServerContext* context,
                                                      const bloom::v1::MergeRequest* request,
                                                      bloom::v1::MergeResponse* response) {
  if (Forwarder* forwarder = core_->hooks().forwarder) {
    return ForwardMessage(forwarder, context, kMergeMethod, *request, response,
                          context->DefaultReactor());
  }
  return Later(context, [&](BloomService::Finish finish) {
    core_->HandleMergeThen(*request, response, context, std::move(finish));
  });
}

grpc::ServerUnaryReactor* BloomCallbackService::Remove(grpc::CallbackServerContext* context,
                                                       const bloom::v1::RemoveRequest* request,
                                                       bloom::v1::RemoveResponse* response) {
  if (Forwarder* forwarder = core_->hooks().forwarder) {
    return ForwardMessage(forwarder, context, kRemoveMethod, *request, response,
                          context->DefaultReactor());
  }
  return Later(context, [&](BloomService::Finish finish) {
    core_->HandleRemoveThen(*request, response, context, std::move(finish));
  });
}

grpc::ServerUnaryReactor* BloomCallbackService::Count(grpc::CallbackServerContext* context,
                                                      const bloom::v1::CountRequest* request,
                                                      bloom::v1::CountResponse* response) {
  return AtSequence(core_, context, request->min_sequence(), kCountMethod, request, response,
                    [core = core_, context, request, response](grpc::ServerUnaryReactor* reactor) {
                      reactor->Finish(core->HandleCount(*request, response, context));
                    });
}

grpc::ServerUnaryReactor* BloomCallbackService::List(grpc::CallbackServerContext* context,
                                                     const bloom::v1::ListRequest* request,
                                                     bloom::v1::ListResponse* response) {
  return AtSequence(core_, context, request->min_sequence(), kListMethod, request, response,
                    [core = core_, context, request, response](grpc::ServerUnaryReactor* reactor) {
                      OnLane(core->admin_lane(), reactor, [core, context, request, response] {
                        return core->HandleList(*request, response, context);
                      });
                    });
}

}  // namespace service

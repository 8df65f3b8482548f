// BloomCallbackService: the gRPC service that bloom-server registers, serving BloomService's
// handlers (bloom_service.h) through gRPC's callback API. Unary methods run inline on gRPC's
// threads, but for List and Stats, which queue on one lane (call_lane.h), and for calls a
// follower forwards to its primary (forwarder.h), which finish when the primary answers.
// Add and MightContain are left to its two subclasses in item_calls.h, which serve them on the
// callback API too (CallbackItemService, the default) or on the async API (AsyncItemService
// with ItemCalls), read straight from their wire bytes (direct_parse.h).
//
// Thread-safety: every method is thread-safe (BloomService's are).
#ifndef SERVICE_CALLBACK_SERVICE_H_
#define SERVICE_CALLBACK_SERVICE_H_

#include "bloom/v1/bloom.grpc.pb.h"
#include "service/bloom_service.h"

namespace service {

using CallbackUnaryBase = bloom::v1::BloomFilterService::WithCallbackMethod_Reserve<
    bloom::v1::BloomFilterService::WithCallbackMethod_Stats<
        bloom::v1::BloomFilterService::WithCallbackMethod_Delete<
            bloom::v1::BloomFilterService::WithCallbackMethod_Merge<
                bloom::v1::BloomFilterService::WithCallbackMethod_List<
                    bloom::v1::BloomFilterService::WithCallbackMethod_Remove<
                        bloom::v1::BloomFilterService::WithCallbackMethod_Count<
                            bloom::v1::BloomFilterService::WithCallbackMethod_GetShardMap<
                                StreamServiceBase>>>>>>>>;

// Every method but Add and MightContain, which its subclasses (item_calls.h) make callback or
// async methods: no method is left synchronous (gRPC would start a thread pool for those).
class BloomCallbackService : public CallbackUnaryBase {
 public:
  grpc::ServerUnaryReactor* Reserve(grpc::CallbackServerContext* context,
                                    const bloom::v1::ReserveRequest* request,
                                    bloom::v1::ReserveResponse* response) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* context,
                                  const bloom::v1::StatsRequest* request,
                                  bloom::v1::StatsResponse* response) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const bloom::v1::DeleteRequest* request,
                                   bloom::v1::DeleteResponse* response) override;
  grpc::ServerUnaryReactor* Merge(grpc::CallbackServerContext* context,
                                  const bloom::v1::MergeRequest* request,
                                  bloom::v1::MergeResponse* response) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const bloom::v1::ListRequest* request,
                                 bloom::v1::ListResponse* response) override;
  grpc::ServerUnaryReactor* Remove(grpc::CallbackServerContext* context,
                                   const bloom::v1::RemoveRequest* request,
                                   bloom::v1::RemoveResponse* response) override;
  grpc::ServerUnaryReactor* Count(grpc::CallbackServerContext* context,
                                  const bloom::v1::CountRequest* request,
                                  bloom::v1::CountResponse* response) override;
  grpc::ServerUnaryReactor* GetShardMap(grpc::CallbackServerContext* context,
                                        const bloom::v1::GetShardMapRequest* request,
                                        bloom::v1::GetShardMapResponse* response) override;
  grpc::ServerWriteReactor<bloom::v1::ExportChunk>* Export(
      grpc::CallbackServerContext* context, const bloom::v1::ExportRequest* request) override {
    return core_->Export(context, request);
  }
  grpc::ServerReadReactor<bloom::v1::ImportChunk>* Import(
      grpc::CallbackServerContext* context, bloom::v1::ImportResponse* response) override {
    return core_->Import(context, response);
  }
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Pipeline(
      grpc::CallbackServerContext* context) override {
    return core_->Pipeline(context);
  }

 protected:
  // Set by the subclass's constructor (gRPC's method wrappers in between construct only by
  // default); it must outlive the service.
  BloomService* core_ = nullptr;
};

}  // namespace service

#endif  // SERVICE_CALLBACK_SERVICE_H_

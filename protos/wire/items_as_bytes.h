// gRPC serialization of the bloom.v1 requests that carry items (AddRequest,
// MightContainRequest, RemoveRequest, CountRequest, PipelineRequest): as protobuf's, except that a
// request failing to parse only because a string is not valid UTF-8 is read again with
// items_as_bytes.proto's twins and served: an item is its bytes, whichever field carries it.
// gRPC 1.51's callback server answers a request it cannot parse with UNIMPLEMENTED and no message,
// which told a client that sent binary items in `items` nothing useful; a name that is not UTF-8
// now reaches name validation and gets its INVALID_ARGUMENT. Requests that are not protobuf at all
// still fail to parse.
//
// bloom-server reads Pipeline messages itself, as views of their bytes (service/direct_parse.h);
// the PipelineRequest traits serve other readers of the type. A PipelineRequest is counted before
// it is parsed: one carrying more operations (itself and those in `more`) than
// SetMaxPipelineOperations allows is not parsed at all (its operations would cost memory and CPU
// before any check could refuse them); it arrives as a request with only its id and a mark that
// RefusedOperationCount reads, so a reader can answer INVALID_ARGUMENT.
//
// Included into bloom.grpc.pb.h (protoc's additional_header_includes, protos/CMakeLists.txt),
// so every translation unit using the service sees these specializations before it uses them.
//
// Thread-safety: stateless functions.
#ifndef PROTOS_WIRE_ITEMS_AS_BYTES_H_
#define PROTOS_WIRE_ITEMS_AS_BYTES_H_

#include <grpcpp/impl/codegen/proto_buffer_reader.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "bloom/v1/bloom.pb.h"

namespace bloom::wire {

// Parses `encoding` (or the bytes `reader` yields) into `request`, falling back to the twin.
// Each returns false if neither parses.
bool ParseLeniently(const std::string& encoding, bloom::v1::AddRequest* request);
bool ParseLeniently(const std::string& encoding, bloom::v1::MightContainRequest* request);
bool ParseLeniently(const std::string& encoding, bloom::v1::RemoveRequest* request);
bool ParseLeniently(const std::string& encoding, bloom::v1::CountRequest* request);
bool ParseLeniently(const std::string& encoding, bloom::v1::PipelineRequest* request);
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::AddRequest* request);
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::MightContainRequest* request);
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::RemoveRequest* request);
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::CountRequest* request);
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::PipelineRequest* request);

// The most operations one PipelineRequest may carry, itself and those in its `more`
// (process-wide; the server sets it from --max_pipeline_operations before serving). 0, the
// default: no bound.
void SetMaxPipelineOperations(size_t limit);
// How many operations `request` carried (1 + its `more`) if it was refused for carrying more
// than the bound; 0 if it was parsed.
size_t RefusedOperationCount(const bloom::v1::PipelineRequest& request);

// Before parsing: true if `buffer` holds a PipelineRequest with more operations than the
// bound, which `request` is then made to say (its id and the mark); the buffer is cleared.
inline bool RefuseOversizedPipeline(grpc::ByteBuffer* /*buffer*/, void* /*request*/) {
  return false;  // other requests carry no `more`
}
bool RefuseOversizedPipeline(grpc::ByteBuffer* buffer, bloom::v1::PipelineRequest* request);

// gRPC's Deserialize for these requests: the protobuf parse, then the twin if that failed.
template <class Request>
grpc::Status Deserialize(grpc::ByteBuffer* buffer, Request* request) {
  if (buffer == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "No payload");
  if (RefuseOversizedPipeline(buffer, request)) return grpc::Status::OK;
  grpc::Status result;
  {
    grpc::ProtoBufferReader reader(buffer);
    if (!reader.status().ok()) return reader.status();
    if (!request->ParseFromZeroCopyStream(&reader)) {
      grpc::ProtoBufferReader again(buffer);  // reading does not consume the buffer
      if (!again.status().ok() || !ParseLeniently(&again, request)) {
        result = grpc::Status(grpc::StatusCode::INTERNAL, "Failed to parse the request");
      }
    }
  }
  buffer->Clear();
  return result;
}

}  // namespace bloom::wire

namespace grpc {

#define BLOOM_WIRE_ITEMS_AS_BYTES(Request)                                                        \
  template <>                                                                                     \
  class SerializationTraits<Request, void> {                                                      \
   public:                                                                                        \
    static Status Serialize(const protobuf::MessageLite& msg, ByteBuffer* bb, bool* own_buffer) { \
      return GenericSerialize<ProtoBufferWriter, Request>(msg, bb, own_buffer);                   \
    }                                                                                             \
    static Status Deserialize(ByteBuffer* buffer, protobuf::MessageLite* msg) {                   \
      return bloom::wire::Deserialize(buffer, static_cast<Request*>(msg));                        \
    }                                                                                             \
  };

BLOOM_WIRE_ITEMS_AS_BYTES(bloom::v1::AddRequest)
BLOOM_WIRE_ITEMS_AS_BYTES(bloom::v1::MightContainRequest)
BLOOM_WIRE_ITEMS_AS_BYTES(bloom::v1::RemoveRequest)
BLOOM_WIRE_ITEMS_AS_BYTES(bloom::v1::CountRequest)
BLOOM_WIRE_ITEMS_AS_BYTES(bloom::v1::PipelineRequest)
#undef BLOOM_WIRE_ITEMS_AS_BYTES

}  // namespace grpc

#endif  // PROTOS_WIRE_ITEMS_AS_BYTES_H_

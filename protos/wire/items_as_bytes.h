// gRPC serialization of the bloom.v1 requests that carry items (AddRequest,
// MightContainRequest, PipelineRequest): as protobuf's, except that a request failing to parse
// only because a string is not valid UTF-8 is read again with items_as_bytes.proto's twins and
// served: an item is its bytes, whichever field carries it. gRPC 1.51's callback server answers
// a request it cannot parse with UNIMPLEMENTED and no message, which told a client that sent
// binary items in `items` nothing useful; a name that is not UTF-8 now reaches name validation
// and gets its INVALID_ARGUMENT. Requests that are not protobuf at all still fail to parse.
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
bool ParseLeniently(const std::string& encoding, bloom::v1::PipelineRequest* request);
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::AddRequest* request);
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::MightContainRequest* request);
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::PipelineRequest* request);

// gRPC's Deserialize for these requests: the protobuf parse, then the twin if that failed.
template <class Request>
grpc::Status Deserialize(grpc::ByteBuffer* buffer, Request* request) {
  if (buffer == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "No payload");
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
BLOOM_WIRE_ITEMS_AS_BYTES(bloom::v1::PipelineRequest)
#undef BLOOM_WIRE_ITEMS_AS_BYTES

}  // namespace grpc

#endif  // PROTOS_WIRE_ITEMS_AS_BYTES_H_

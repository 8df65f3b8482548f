#include "wire/items_as_bytes.h"

#include <string>
#include <utility>

#include "wire/items_as_bytes.pb.h"

namespace bloom::wire {
namespace {

template <class Repeated>
void MoveAll(Repeated& from, Repeated* to) {
  to->Reserve(from.size());
  for (std::string& item : from) to->Add(std::move(item));
}

bool Convert(AddRequestBytes& twin, bloom::v1::AddRequest* request) {
  request->Clear();
  request->set_name(std::move(*twin.mutable_name()));
  MoveAll(*twin.mutable_items(), request->mutable_items());
  MoveAll(*twin.mutable_raw_items(), request->mutable_raw_items());
  if (twin.create_if_missing().empty()) return true;
  std::string merged;  // concatenated encodings parse as their merge
  for (const std::string& spec : twin.create_if_missing()) merged += spec;
  return request->mutable_create_if_missing()->ParseFromString(merged);
}

bool Convert(MightContainRequestBytes& twin, bloom::v1::MightContainRequest* request) {
  request->Clear();
  request->set_name(std::move(*twin.mutable_name()));
  MoveAll(*twin.mutable_items(), request->mutable_items());
  MoveAll(*twin.mutable_raw_items(), request->mutable_raw_items());
  request->set_absent_if_missing(twin.absent_if_missing());
  return true;
}

bool Convert(PipelineRequestBytes& twin, bloom::v1::PipelineRequest* request) {
  request->Clear();
  request->set_id(twin.id());
  switch (twin.op_case()) {
    case PipelineRequestBytes::kAdd:
      return ParseLeniently(twin.add(), request->mutable_add());
    case PipelineRequestBytes::kMightContain:
      return ParseLeniently(twin.might_contain(), request->mutable_might_contain());
    case PipelineRequestBytes::OP_NOT_SET:
      return true;
  }
  return true;
}

template <class Twin, class Request>
bool ParseString(const std::string& encoding, Request* request) {
  if (request->ParseFromString(encoding)) return true;
  Twin twin;
  return twin.ParseFromString(encoding) && Convert(twin, request);
}

template <class Twin, class Request>
bool ParseStream(grpc::ProtoBufferReader* reader, Request* request) {
  Twin twin;
  return twin.ParseFromZeroCopyStream(reader) && Convert(twin, request);
}

}  // namespace

bool ParseLeniently(const std::string& encoding, bloom::v1::AddRequest* request) {
  return ParseString<AddRequestBytes>(encoding, request);
}
bool ParseLeniently(const std::string& encoding, bloom::v1::MightContainRequest* request) {
  return ParseString<MightContainRequestBytes>(encoding, request);
}
bool ParseLeniently(const std::string& encoding, bloom::v1::PipelineRequest* request) {
  return ParseString<PipelineRequestBytes>(encoding, request);
}
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::AddRequest* request) {
  return ParseStream<AddRequestBytes>(reader, request);
}
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::MightContainRequest* request) {
  return ParseStream<MightContainRequestBytes>(reader, request);
}
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::PipelineRequest* request) {
  return ParseStream<PipelineRequestBytes>(reader, request);
}

}  // namespace bloom::wire

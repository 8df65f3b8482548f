#include "wire/items_as_bytes.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/wire_format_lite.h>

#include <atomic>
#include <climits>
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
  request->set_min_sequence(twin.min_sequence());
  return true;
}

bool Convert(RemoveRequestBytes& twin, bloom::v1::RemoveRequest* request) {
  request->Clear();
  request->set_name(std::move(*twin.mutable_name()));
  MoveAll(*twin.mutable_items(), request->mutable_items());
  MoveAll(*twin.mutable_raw_items(), request->mutable_raw_items());
  return true;
}

bool Convert(CountRequestBytes& twin, bloom::v1::CountRequest* request) {
  request->Clear();
  request->set_name(std::move(*twin.mutable_name()));
  MoveAll(*twin.mutable_items(), request->mutable_items());
  MoveAll(*twin.mutable_raw_items(), request->mutable_raw_items());
  request->set_min_sequence(twin.min_sequence());
  return true;
}

// A PipelineRequest's id and operation (not its `more`).
bool ConvertOperation(PipelineRequestBytes& twin, bloom::v1::PipelineRequest* request) {
  request->set_id(twin.id());
  switch (twin.op_case()) {
    case PipelineRequestBytes::kAdd:
      return ParseLeniently(twin.add(), request->mutable_add());
    case PipelineRequestBytes::kMightContain:
      return ParseLeniently(twin.might_contain(), request->mutable_might_contain());
    case PipelineRequestBytes::kRemove:
      return ParseLeniently(twin.remove(), request->mutable_remove());
    case PipelineRequestBytes::kCount:
      return ParseLeniently(twin.count(), request->mutable_count());
    case PipelineRequestBytes::OP_NOT_SET:
      return true;
  }
  return true;
}

// Each of a message's `more` is read as protobuf reads it, else with the twin; operations nest
// one level (a `more` of a `more` is dropped here; the server refuses those anyway).
bool Convert(PipelineRequestBytes& twin, bloom::v1::PipelineRequest* request) {
  request->Clear();
  if (!ConvertOperation(twin, request)) return false;
  for (const std::string& encoding : twin.more()) {
    bloom::v1::PipelineRequest* more = request->add_more();
    if (more->ParseFromString(encoding)) continue;
    PipelineRequestBytes more_twin;
    if (!more_twin.ParseFromString(encoding) || !ConvertOperation(more_twin, more)) return false;
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

std::atomic<size_t> max_pipeline_operations{0};

// The unknown field that marks a refused PipelineRequest: the largest field number protobuf
// allows, which no version of bloom.proto will use. Its value is the count of operations.
constexpr int kRefusedMoreField = (1 << 29) - 1;

using google::protobuf::internal::WireFormatLite;

// The top-level `more` entries of a PipelineRequest's encoding and its id, without parsing any
// operation; false if the encoding is malformed (the parse that follows then says so).
bool CountMore(grpc::ByteBuffer* buffer, size_t* count, uint64_t* id) {
  grpc::ProtoBufferReader reader(buffer);
  if (!reader.status().ok()) return false;
  google::protobuf::io::CodedInputStream in(&reader);
  in.SetTotalBytesLimit(INT_MAX);
  constexpr uint32_t kIdTag = WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_VARINT);
  constexpr uint32_t kMoreTag =
      WireFormatLite::MakeTag(4, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  *count = 0;
  while (const uint32_t tag = in.ReadTag()) {
    if (tag == kMoreTag) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) || !in.Skip(static_cast<int>(length))) return false;
      ++*count;
    } else if (tag == kIdTag) {
      if (!in.ReadVarint64(id)) return false;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

}  // namespace

void SetMaxPipelineOperations(size_t limit) { max_pipeline_operations.store(limit); }

size_t RefusedOperationCount(const bloom::v1::PipelineRequest& request) {
  const google::protobuf::UnknownFieldSet& unknown =
      request.GetReflection()->GetUnknownFields(request);
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (unknown.field(i).number() == kRefusedMoreField &&
        unknown.field(i).type() == google::protobuf::UnknownField::TYPE_VARINT) {
      return static_cast<size_t>(unknown.field(i).varint());
    }
  }
  return 0;
}

bool RefuseOversizedPipeline(grpc::ByteBuffer* buffer, bloom::v1::PipelineRequest* request) {
  const size_t limit = max_pipeline_operations.load(std::memory_order_relaxed);
  size_t count = 0;
  uint64_t id = 0;
  if (limit == 0 || !CountMore(buffer, &count, &id) || 1 + count <= limit) return false;
  request->Clear();
  request->set_id(id);
  request->GetReflection()->MutableUnknownFields(request)->AddVarint(kRefusedMoreField, 1 + count);
  buffer->Clear();
  return true;
}

bool ParseLeniently(const std::string& encoding, bloom::v1::AddRequest* request) {
  return ParseString<AddRequestBytes>(encoding, request);
}
bool ParseLeniently(const std::string& encoding, bloom::v1::MightContainRequest* request) {
  return ParseString<MightContainRequestBytes>(encoding, request);
}
bool ParseLeniently(const std::string& encoding, bloom::v1::RemoveRequest* request) {
  return ParseString<RemoveRequestBytes>(encoding, request);
}
bool ParseLeniently(const std::string& encoding, bloom::v1::CountRequest* request) {
  return ParseString<CountRequestBytes>(encoding, request);
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
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::RemoveRequest* request) {
  return ParseStream<RemoveRequestBytes>(reader, request);
}
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::CountRequest* request) {
  return ParseStream<CountRequestBytes>(reader, request);
}
bool ParseLeniently(grpc::ProtoBufferReader* reader, bloom::v1::PipelineRequest* request) {
  return ParseStream<PipelineRequestBytes>(reader, request);
}

}  // namespace bloom::wire

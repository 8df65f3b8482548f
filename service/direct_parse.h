// Reads bloom.v1.AddRequest, MightContainRequest, RemoveRequest, CountRequest and
// PipelineRequest straight from their wire bytes, and writes Add and MightContain responses,
// without protobuf messages: the items stay views into the received bytes.
//
// Why: protobuf's parse turns every item into a std::string (a heap allocation for each item
// longer than 15 bytes, freed again with the call) in a repeated field, a large share of a
// batched call's server CPU (benchmarks/parse_benchmark compares the two). The server reads its
// Add and MightContain calls (item_calls.h) and Pipeline messages (pipeline.h) with these
// functions. The wire format is
// protobuf's, unchanged: the parse accepts what protobuf's does for these messages (fields in any
// order and repeated, unknown fields skipped, a repeated scalar field's last value winning, a
// repeated message field merged) except groups, which proto3 has none of. `items` are read as
// bytes, as protos/wire/items_as_bytes.h does for the protobuf path.
//
// Thread-safety: stateless functions.
#ifndef SERVICE_DIRECT_PARSE_H_
#define SERVICE_DIRECT_PARSE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace service {

// An AddRequest or MightContainRequest as views into its wire bytes (which must outlive it).
struct ItemsRequestView {
  absl::string_view name;
  // The `items` (field 2) then the `raw_items` (field 3), each in wire order: the order of the
  // answers.
  std::vector<absl::string_view> items;
  size_t text_items = 0;  // how many of `items` came from field 2
  // MightContainRequest.absent_if_missing (field 4) and min_sequence (field 5);
  // CountRequest.min_sequence (field 4).
  bool absent_if_missing = false;
  uint64_t min_sequence = 0;
  // AddRequest.create_if_missing (field 4): a FilterSpec's encodings, to be merged in order
  // (protobuf merges a message field that appears more than once); empty if absent.
  std::vector<absl::string_view> create_if_missing;
};

// Parse `bytes` as an AddRequest / MightContainRequest into `*out`; false if they are not a
// well-formed message of that type (truncated, a bad varint or tag, a group).
bool ParseAddRequest(absl::string_view bytes, ItemsRequestView* out);
bool ParseMightContainRequest(absl::string_view bytes, ItemsRequestView* out);

// A RemoveRequest (fields 1-3 as the others'; nothing else is read).
bool ParseRemoveRequest(absl::string_view bytes, ItemsRequestView* out);
// A CountRequest (fields 1-3 as the others', and its min_sequence).
bool ParseCountRequest(absl::string_view bytes, ItemsRequestView* out);

// One operation of a bloom.v1.PipelineRequest: the message's own, or one of its `more`.
struct PipelineOperationView {
  enum class Kind { kNone, kAdd, kMightContain, kRemove, kCount };
  uint64_t id = 0;
  Kind kind = Kind::kNone;   // kNone: the message carried no operation
  ItemsRequestView request;  // its AddRequest, MightContainRequest, RemoveRequest or CountRequest
  // For an operation in `more`: the `more` entries it carried itself (operations nest one level
  // only: the stream refuses any).
  size_t nested_more = 0;
};

// The operations a PipelineRequest carries (1 + its `more` entries) and its id, read without
// parsing any operation (the bound is checked before the parse costs anything); false if the
// message is malformed at its top level.
bool CountPipelineOperations(absl::string_view bytes, size_t* operations, uint64_t* id);
// Parses a PipelineRequest into `*out`: its own operation first, then its `more`, in order.
// Views point into `bytes`, or into `merged` for an operation whose message came in more than
// one piece (protobuf merges them; no client sends that): both must outlive `*out`. False if the
// message is not well-formed (as protobuf would refuse it, nested `more` entries aside, which are
// counted, not parsed).
bool ParsePipelineRequest(absl::string_view bytes, std::vector<PipelineOperationView>* out,
                          std::deque<std::string>* merged);

// The FilterSpec fields that are messages (window and idle_ttl, google.protobuf.Durations):
// protobuf refuses a request in which one of them is malformed, so ParseAddRequest checks them.
// Every other FilterSpec field is a scalar. A new message field in FilterSpec must be added
// here (direct_parse_test compares this list with FilterSpec's descriptor).
inline constexpr uint32_t kFilterSpecDurationFields[] = {5, 7};

// The encoding of AddResponse.sequence (field 2, a varint): appended to the answers' bytes.
// Empty for 0 (proto3 writes nothing for a zero scalar).
std::string EncodeSequenceField(uint64_t sequence);

// The encoding of an AddResponse (field 1 `added`) or MightContainResponse (field 1
// `present`) of `count` values: both are one packed repeated bool field 1, whose payload is
// one byte of 0 or 1 per value, which is how C++ stores a bool.
size_t PackedBoolsSize(size_t count);
// Writes the field's tag and length into `out` (PackedBoolsSize(count) bytes) and returns
// where the `count` values go: the caller writes them there as bools.
bool* WritePackedBoolsHeader(size_t count, char* out);

}  // namespace service

#endif  // SERVICE_DIRECT_PARSE_H_

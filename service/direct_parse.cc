#include "service/direct_parse.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "absl/strings/str_join.h"

namespace service {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// A cursor over wire bytes; every read checks the bounds and fails rather than overruns.
class WireReader {
 public:
  explicit WireReader(absl::string_view bytes)
      : at_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  [[nodiscard]] bool AtEnd() const { return at_ == end_; }
  [[nodiscard]] size_t Remaining() const { return static_cast<size_t>(end_ - at_); }

  // A varint of at most `max_bytes` bytes (10 for 64-bit values) whose value fits 64 bits.
  bool ReadVarint(uint64_t* value, int max_bytes = 10) {
    uint64_t result = 0;
    for (int i = 0; i < max_bytes; ++i) {
      if (at_ == end_) return false;
      const auto byte = static_cast<uint8_t>(*at_++);
      result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) {
        // The tenth byte may only carry the top bit.
        if (i == 9 && byte > 1) return false;
        *value = result;
        return true;
      }
    }
    return false;
  }

  // A tag: at most 5 bytes and 32 bits (as protobuf reads tags), field number >= 1.
  bool ReadTag(uint32_t* field, uint32_t* wire_type) {
    uint64_t tag;
    if (!ReadVarint(&tag, 5) || tag > UINT32_MAX) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    return *field != 0;
  }

  bool ReadLengthDelimited(absl::string_view* value) {
    uint64_t length;
    if (!ReadVarint(&length) || length > static_cast<uint64_t>(end_ - at_)) return false;
    *value = absl::string_view(at_, static_cast<size_t>(length));
    at_ += length;
    return true;
  }

  bool Skip(size_t bytes) {
    if (bytes > static_cast<size_t>(end_ - at_)) return false;
    at_ += bytes;
    return true;
  }

  // Skips a field of `wire_type` (an unknown field, or a known one with another wire type,
  // which protobuf also keeps as unknown). Groups (3, 4) and types 6, 7 are malformed here.
  bool SkipField(uint32_t wire_type) {
    uint64_t ignored;
    absl::string_view ignored_bytes;
    switch (wire_type) {
      case kVarint:
        return ReadVarint(&ignored);
      case kFixed64:
        return Skip(8);
      case kLengthDelimited:
        return ReadLengthDelimited(&ignored_bytes);
      case kFixed32:
        return Skip(4);
      default:
        return false;
    }
  }

 private:
  const char* at_;
  const char* const end_;
};

// Fields 1-3 are the same in every items request; `field4` reads the request's own fields 4
// and 5 (given the field number).
template <typename Field4>
bool ParseItemsRequest(absl::string_view bytes, ItemsRequestView* out, Field4 field4) {
  *out = ItemsRequestView();
  // Items go into one vector in wire order, which is the answers' order when the request uses
  // one of the two item fields, as clients do. Growing it item by item, and then copying the
  // raw items behind the text ones, was a quarter of this parse's time for 1000 raw items
  // (parse_benchmark: 5.2-5.9 -> 3.9-4.1 us; 10 items 124-154 -> 59-92 ns): the first item's size
  // sizes the vector for the rest of the message (capped: a message of empty items would ask for
  // bytes / 2 entries).
  constexpr size_t kMaxReservedItems = 1 << 16;
  size_t raw_seen = 0;
  bool text_after_raw = false;
  WireReader reader(bytes);
  while (!reader.AtEnd()) {
    uint32_t field;
    uint32_t wire_type;
    if (!reader.ReadTag(&field, &wire_type)) return false;
    bool read;
    if (field >= 1 && field <= 3 && wire_type == kLengthDelimited) {
      absl::string_view value;
      read = reader.ReadLengthDelimited(&value);
      if (field == 1) out->name = value;  // a repeated singular field: the last one wins
      if (read && field >= 2) {
        if (out->items.empty()) {
          const size_t item_bytes = value.size() + 2;  // at least a tag and a length byte
          out->items.reserve(std::min(kMaxReservedItems, reader.Remaining() / item_bytes + 1));
        }
        out->items.push_back(value);
        if (field == 3) ++raw_seen;
        if (field == 2) {
          ++out->text_items;
          text_after_raw |= raw_seen > 0;
        }
      }
    } else if (field == 4 || field == 5) {
      read = field4(reader, field, wire_type);
    } else {
      read = reader.SkipField(wire_type);
    }
    if (!read) return false;
  }
  if (text_after_raw) {
    // Both fields, interleaved on the wire: the text items answer first. Read them again in
    // that order (a request nobody's client sends; the parse above already checked it).
    std::vector<absl::string_view> ordered;
    ordered.reserve(out->items.size());
    for (uint32_t wanted : {2u, 3u}) {
      WireReader again(bytes);
      bool read = true;
      while (read && !again.AtEnd()) {
        uint32_t field = 0;
        uint32_t wire_type = 0;
        if (!again.ReadTag(&field, &wire_type)) break;
        if (field == wanted && wire_type == kLengthDelimited) {
          absl::string_view value;
          read = again.ReadLengthDelimited(&value);
          ordered.push_back(value);
        } else {
          read = again.SkipField(wire_type);  // field 4 too: its value was taken above
        }
      }
    }
    out->items = std::move(ordered);
  }
  return true;
}

// Whether `bytes` are a well-formed message of scalar fields only (a google.protobuf.Duration).
bool WellFormedScalars(absl::string_view bytes) {
  WireReader reader(bytes);
  while (!reader.AtEnd()) {
    uint32_t field;
    uint32_t wire_type;
    if (!reader.ReadTag(&field, &wire_type) || !reader.SkipField(wire_type)) return false;
  }
  return true;
}

// Whether `bytes` are a well-formed FilterSpec: protobuf refuses a request whose embedded
// message is malformed, at any depth, so this parse does too. FilterSpec's fields are scalars
// except `window` (5) and `idle_ttl` (7), Durations, which protobuf parses when they come
// length-delimited (with another wire type they are unknown fields, skipped like any other).
bool WellFormedFilterSpec(absl::string_view bytes) {
  WireReader reader(bytes);
  while (!reader.AtEnd()) {
    uint32_t field;
    uint32_t wire_type;
    if (!reader.ReadTag(&field, &wire_type)) return false;
    const bool duration =
        std::find(std::begin(kFilterSpecDurationFields), std::end(kFilterSpecDurationFields),
                  field) != std::end(kFilterSpecDurationFields);
    if (duration && wire_type == kLengthDelimited) {
      absl::string_view duration;
      if (!reader.ReadLengthDelimited(&duration) || !WellFormedScalars(duration)) return false;
    } else if (!reader.SkipField(wire_type)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool ParseAddRequest(absl::string_view bytes, ItemsRequestView* out) {
  return ParseItemsRequest(
      bytes, out, [out](WireReader& reader, uint32_t field, uint32_t wire_type) {
        if (field != 4 || wire_type != kLengthDelimited) {
          return reader.SkipField(wire_type);
        }
        absl::string_view spec;
        if (!reader.ReadLengthDelimited(&spec) || !WellFormedFilterSpec(spec)) {
          return false;
        }
        out->create_if_missing.push_back(spec);
        return true;
      });
}

bool ParseMightContainRequest(absl::string_view bytes, ItemsRequestView* out) {
  return ParseItemsRequest(bytes, out,
                           [out](WireReader& reader, uint32_t field, uint32_t wire_type) {
                             if (wire_type != kVarint) return reader.SkipField(wire_type);
                             uint64_t value;
                             if (!reader.ReadVarint(&value)) return false;
                             if (field == 4) out->absent_if_missing = value != 0;
                             if (field == 5) out->min_sequence = value;
                             return true;
                           });
}

bool ParseRemoveRequest(absl::string_view bytes, ItemsRequestView* out) {
  return ParseItemsRequest(bytes, out,
                           [](WireReader& reader, uint32_t /*field*/, uint32_t wire_type) {
                             return reader.SkipField(wire_type);
                           });
}

bool ParseCountRequest(absl::string_view bytes, ItemsRequestView* out) {
  return ParseItemsRequest(bytes, out,
                           [out](WireReader& reader, uint32_t field, uint32_t wire_type) {
                             if (field != 4 || wire_type != kVarint) {
                               return reader.SkipField(wire_type);
                             }
                             return reader.ReadVarint(&out->min_sequence);
                           });
}

namespace {

// PipelineRequest's fields.
constexpr uint32_t kPipelineId = 1;
constexpr uint32_t kPipelineAdd = 2;
constexpr uint32_t kPipelineMightContain = 3;
constexpr uint32_t kPipelineMore = 4;
constexpr uint32_t kPipelineRemove = 5;
constexpr uint32_t kPipelineCount = 6;

// One PipelineRequest's own fields into `op`; its `more` entries into `more` (null: count them
// in op->nested_more). The oneof's message comes in one piece as clients send it; protobuf
// merges a message field that appears more than once, each piece a message of its own (and a
// later member of the oneof replaces an earlier one), so each piece of one field must parse, and
// the pieces are joined in `merged` and read together.
bool ParseOperation(absl::string_view bytes, PipelineOperationView* op,
                    std::vector<absl::string_view>* more, std::deque<std::string>* merged) {
  uint32_t chosen = 0;
  std::vector<absl::string_view> pieces;
  WireReader reader(bytes);
  while (!reader.AtEnd()) {
    uint32_t field;
    uint32_t wire_type;
    if (!reader.ReadTag(&field, &wire_type)) return false;
    bool read;
    if (field == kPipelineId && wire_type == kVarint) {
      read = reader.ReadVarint(&op->id);
    } else if ((field == kPipelineAdd || field == kPipelineMightContain ||
                field == kPipelineRemove || field == kPipelineCount) &&
               wire_type == kLengthDelimited) {
      absl::string_view value;
      read = reader.ReadLengthDelimited(&value);
      if (field != chosen) pieces.clear();
      chosen = field;
      pieces.push_back(value);
    } else if (field == kPipelineMore && wire_type == kLengthDelimited) {
      absl::string_view value;
      read = reader.ReadLengthDelimited(&value);
      if (more != nullptr) {
        more->push_back(value);
      } else {
        ++op->nested_more;
      }
    } else {
      read = reader.SkipField(wire_type);
    }
    if (!read) return false;
  }
  if (chosen == 0) return true;  // no operation (the stream says so)
  bool (*parse)(absl::string_view, ItemsRequestView*) = nullptr;
  switch (chosen) {
    case kPipelineAdd:
      op->kind = PipelineOperationView::Kind::kAdd;
      parse = ParseAddRequest;
      break;
    case kPipelineMightContain:
      op->kind = PipelineOperationView::Kind::kMightContain;
      parse = ParseMightContainRequest;
      break;
    case kPipelineRemove:
      op->kind = PipelineOperationView::Kind::kRemove;
      parse = ParseRemoveRequest;
      break;
    default:
      op->kind = PipelineOperationView::Kind::kCount;
      parse = ParseCountRequest;
  }
  if (pieces.size() == 1) return parse(pieces.front(), &op->request);
  // Protobuf parses each piece as a message of its own before merging them: a piece that is
  // not one fails the request even when the pieces joined would parse.
  for (absl::string_view piece : pieces) {
    if (!parse(piece, &op->request)) return false;
  }
  return parse(merged->emplace_back(absl::StrJoin(pieces, "")), &op->request);
}

}  // namespace

bool CountPipelineOperations(absl::string_view bytes, size_t* operations, uint64_t* id) {
  *operations = 1;
  *id = 0;
  WireReader reader(bytes);
  while (!reader.AtEnd()) {
    uint32_t field;
    uint32_t wire_type;
    if (!reader.ReadTag(&field, &wire_type)) return false;
    if (field == kPipelineId && wire_type == kVarint) {
      if (!reader.ReadVarint(id)) return false;
      continue;
    }
    if (field == kPipelineMore && wire_type == kLengthDelimited) ++*operations;
    if (!reader.SkipField(wire_type)) return false;
  }
  return true;
}

bool ParsePipelineRequest(absl::string_view bytes, std::vector<PipelineOperationView>* out,
                          std::deque<std::string>* merged) {
  out->clear();
  std::vector<absl::string_view> more;
  out->emplace_back();
  if (!ParseOperation(bytes, &out->back(), &more, merged)) return false;
  out->reserve(1 + more.size());
  for (absl::string_view entry : more) {
    out->emplace_back();
    if (!ParseOperation(entry, &out->back(), nullptr, merged)) return false;
  }
  return true;
}

namespace {

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

}  // namespace

std::string EncodeSequenceField(uint64_t sequence) {
  std::string out;
  if (sequence == 0) return out;
  out.push_back(static_cast<char>((2 << 3) | kVarint));
  while (sequence >= 0x80) {
    out.push_back(static_cast<char>((sequence & 0x7f) | 0x80));
    sequence >>= 7;
  }
  out.push_back(static_cast<char>(sequence));
  return out;
}

size_t PackedBoolsSize(size_t count) {
  if (count == 0) return 0;  // proto3 writes nothing for an empty repeated field
  return 1 + VarintSize(count) + count;
}

bool* WritePackedBoolsHeader(size_t count, char* out) {
  if (count == 0) return reinterpret_cast<bool*>(out);
  *out++ = static_cast<char>((1 << 3) | kLengthDelimited);
  uint64_t length = count;
  while (length >= 0x80) {
    *out++ = static_cast<char>((length & 0x7f) | 0x80);
    length >>= 7;
  }
  *out++ = static_cast<char>(length);
  static_assert(sizeof(bool) == 1, "a bool is the byte protobuf writes for it");
  return reinterpret_cast<bool*>(out);
}

}  // namespace service

#include "service/direct_parse.h"

#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bloom/v1/bloom.pb.h"
#include "gtest/gtest.h"
#include "wire/items_as_bytes.h"

namespace service {
namespace {

std::string RandomBytes(std::mt19937_64& random, size_t max_size) {
  std::string bytes(random() % (max_size + 1), '\0');
  for (char& c : bytes) c = static_cast<char>(random() & 0xff);
  return bytes;
}

std::vector<absl::string_view> ItemsOf(const bloom::v1::AddRequest& r) {
  std::vector<absl::string_view> items(r.items().begin(), r.items().end());
  items.insert(items.end(), r.raw_items().begin(), r.raw_items().end());
  return items;
}

// Messages protobuf writes read back the same, items and raw_items in answer order.
TEST(DirectParseTest, ReadsWhatProtobufWrites) {
  std::mt19937_64 random(7);
  for (int round = 0; round < 2000; ++round) {
    bloom::v1::AddRequest add;
    add.set_name(absl::StrCat("filter-", round));
    for (uint64_t i = random() % 40; i > 0; --i) add.add_items(absl::StrCat("item-", random()));
    for (uint64_t i = random() % 40; i > 0; --i) add.add_raw_items(RandomBytes(random, 100));
    if (random() % 2) {
      add.mutable_create_if_missing()->set_capacity(random() % 100000);
      add.mutable_create_if_missing()->set_error_rate(0.01);
      if (random() % 2) add.mutable_create_if_missing()->mutable_window()->set_seconds(3600);
      if (random() % 2) add.mutable_create_if_missing()->mutable_idle_ttl()->set_nanos(7);
    }
    ItemsRequestView view;  // views into `wire`, which must outlive it
    const std::string wire = add.SerializeAsString();
    ASSERT_TRUE(ParseAddRequest(wire, &view));
    EXPECT_EQ(view.name, add.name());
    EXPECT_EQ(view.items, ItemsOf(add));
    EXPECT_EQ(view.text_items, static_cast<size_t>(add.items_size()));
    bloom::v1::FilterSpec spec;
    ASSERT_TRUE(spec.ParseFromString(absl::StrJoin(view.create_if_missing, "")));
    EXPECT_EQ(!view.create_if_missing.empty(), add.has_create_if_missing());
    EXPECT_EQ(spec.SerializeAsString(), add.create_if_missing().SerializeAsString());

    bloom::v1::MightContainRequest check;
    check.set_name(add.name());
    *check.mutable_items() = add.items();
    *check.mutable_raw_items() = add.raw_items();
    check.set_absent_if_missing(random() % 2);
    const std::string check_wire = check.SerializeAsString();
    ASSERT_TRUE(ParseMightContainRequest(check_wire, &view));
    EXPECT_EQ(view.name, check.name());
    EXPECT_EQ(view.items, ItemsOf(add));
    EXPECT_EQ(view.absent_if_missing, check.absent_if_missing());
  }
}

// Fields in any order and repeated, unknown fields of every wire type, a known field with the
// wrong wire type: read as protobuf reads them.
TEST(DirectParseTest, FieldOrderRepeatsAndUnknownFieldsAsProtobuf) {
  // clang-format off
  static constexpr char kWire[] =
      "\x12\x01" "a"           // items: "a"
      "\x1a\x02\xff\x00"       // raw_items: ff 00
      "\x0a\x01" "f"           // name: "f"
      "\x28\x05"               // min_sequence: 5
      "\x12\x01" "b"           // items: "b"
      "\x20\x02"               // absent_if_missing: 2 (true)
      "\x31" "12345678"        // field 6 fixed64 (unknown)
      "\x3d" "1234"            // field 7 fixed32 (unknown)
      "\x0a\x01" "g"           // name again: the last wins
      "\x08\x01"               // name with the varint wire type: unknown to protobuf
      "\x42\x03" "xyz";        // field 8 bytes (unknown)
  // clang-format on
  const std::string bytes(kWire, sizeof(kWire) - 1);
  ItemsRequestView view;
  ASSERT_TRUE(ParseMightContainRequest(bytes, &view));
  bloom::v1::MightContainRequest proto;
  ASSERT_TRUE(bloom::wire::ParseLeniently(bytes, &proto));
  EXPECT_EQ(view.name, "g");
  EXPECT_EQ(view.name, proto.name());
  EXPECT_EQ(view.items,
            (std::vector<absl::string_view>{"a", "b", absl::string_view("\xff\x00", 2)}));
  EXPECT_EQ(view.text_items, 2u);
  EXPECT_TRUE(view.absent_if_missing);
  EXPECT_EQ(proto.absent_if_missing(), view.absent_if_missing);
  EXPECT_EQ(view.min_sequence, 5u);
  EXPECT_EQ(proto.min_sequence(), view.min_sequence);
}

// A check or a count with `items` that are not UTF-8 is read by protobuf's twin with items as
// bytes (items_as_bytes.h): it keeps min_sequence (read-your-writes through a follower) as the
// direct parse does.
TEST(DirectParseTest, ItemsThatAreNotUtf8KeepTheMinSequence) {
  const std::string binary("\xff\xfe", 2);
  bloom::v1::MightContainRequest check;
  check.set_name("f");
  check.add_items(binary);  // C++ protobuf serializes it; its parse refuses it
  check.set_min_sequence(9);
  bloom::v1::CountRequest count;
  count.set_name("f");
  count.add_items(binary);
  count.set_min_sequence(11);
  // The views point into these: they outlive them.
  const std::string check_wire = check.SerializeAsString();
  const std::string count_wire = count.SerializeAsString();
  ItemsRequestView view;
  bloom::v1::MightContainRequest check_read;
  ASSERT_FALSE(check_read.ParseFromString(check_wire));
  ASSERT_TRUE(bloom::wire::ParseLeniently(check_wire, &check_read));
  ASSERT_TRUE(ParseMightContainRequest(check_wire, &view));
  EXPECT_EQ(check_read.min_sequence(), 9u);
  EXPECT_EQ(view.min_sequence, 9u);
  bloom::v1::CountRequest count_read;
  ASSERT_TRUE(bloom::wire::ParseLeniently(count_wire, &count_read));
  ASSERT_TRUE(ParseCountRequest(count_wire, &view));
  EXPECT_EQ(count_read.min_sequence(), 11u);
  EXPECT_EQ(view.min_sequence, 11u);
  EXPECT_EQ(view.items, (std::vector<absl::string_view>{binary}));
}

// Text and raw items interleaved on the wire, in an AddRequest with its spec between them: the
// text items still answer first, and the spec is read once.
TEST(DirectParseTest, InterleavedItemFieldsKeepTheAnswerOrderAndOneSpec) {
  // clang-format off
  static constexpr char kWire[] =
      "\x1a\x01" "r"           // raw_items: "r"
      "\x12\x01" "a"           // items: "a"
      "\x22\x02\x08\x07"       // create_if_missing: {capacity: 7}
      "\x1a\x01" "s"           // raw_items: "s"
      "\x12\x01" "b"           // items: "b"
      "\x0a\x01" "f";          // name: "f"
  // clang-format on
  const std::string bytes(kWire, sizeof(kWire) - 1);
  ItemsRequestView view;
  ASSERT_TRUE(ParseAddRequest(bytes, &view));
  bloom::v1::AddRequest proto;
  ASSERT_TRUE(bloom::wire::ParseLeniently(bytes, &proto));
  EXPECT_EQ(view.items, (std::vector<absl::string_view>{"a", "b", "r", "s"}));
  EXPECT_EQ(view.items, ItemsOf(proto));
  EXPECT_EQ(view.text_items, 2u);
  ASSERT_EQ(view.create_if_missing.size(), 1u);
  EXPECT_EQ(view.name, "f");
}

// Every prefix of a message, and every single-byte corruption: never accepted where protobuf
// refuses, and read as protobuf reads it where both accept.
TEST(DirectParseTest, TruncatedAndCorruptedMessagesNeverDisagreeWithProtobuf) {
  bloom::v1::AddRequest add;
  add.set_name("users");
  add.add_items("alice");
  add.add_raw_items(std::string("\x00\x80\xff", 3));
  add.mutable_create_if_missing()->set_capacity(1000);
  add.mutable_create_if_missing()->set_error_rate(0.01);
  // Embedded Durations: protobuf refuses the request when one of them is malformed.
  add.mutable_create_if_missing()->mutable_window()->set_seconds(604800);
  add.mutable_create_if_missing()->mutable_window()->set_nanos(5);
  add.mutable_create_if_missing()->mutable_idle_ttl()->set_seconds(86400);
  const std::string whole = add.SerializeAsString();
  std::vector<std::string> inputs;
  for (size_t n = 0; n <= whole.size(); ++n) inputs.push_back(whole.substr(0, n));
  for (size_t i = 0; i < whole.size(); ++i) {
    for (int value : {0x00, 0x01, 0x07, 0x0b, 0x0c, 0x7f, 0x80, 0xff}) {
      std::string corrupt = whole;
      corrupt[i] = static_cast<char>(value);
      inputs.push_back(corrupt);
    }
  }
  int accepted = 0;
  int refused = 0;
  for (const std::string& input : inputs) {
    ItemsRequestView view;
    bloom::v1::AddRequest proto;
    const bool proto_ok = bloom::wire::ParseLeniently(input, &proto);
    if (!ParseAddRequest(input, &view)) {
      ++refused;
      continue;
    }
    ++accepted;
    ASSERT_TRUE(proto_ok) << "accepted what protobuf refuses: " << absl::CEscape(input);
    EXPECT_EQ(view.name, proto.name());
    EXPECT_EQ(view.items, ItemsOf(proto));
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

// The direct parse knows which FilterSpec fields are messages that protobuf parses (and so
// refuses when malformed): exactly the Durations, each a message of scalars only. A new message
// field in FilterSpec fails here until the parser checks it too.
TEST(DirectParseTest, KnowsEveryMessageFieldOfFilterSpec) {
  const google::protobuf::Descriptor* spec = bloom::v1::FilterSpec::descriptor();
  std::vector<uint32_t> message_fields;
  for (int i = 0; i < spec->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = spec->field(i);
    if (field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE) continue;
    message_fields.push_back(static_cast<uint32_t>(field->number()));
    EXPECT_EQ(field->message_type()->full_name(), "google.protobuf.Duration") << field->name();
    for (int j = 0; j < field->message_type()->field_count(); ++j) {
      EXPECT_NE(field->message_type()->field(j)->type(),
                google::protobuf::FieldDescriptor::TYPE_MESSAGE);
    }
  }
  EXPECT_EQ(message_fields, std::vector<uint32_t>(std::begin(kFilterSpecDurationFields),
                                                  std::end(kFilterSpecDurationFields)));
}

TEST(DirectParseTest, RefusesGroupsBadVarintsAndOverlongLengths) {
  ItemsRequestView view;
  EXPECT_FALSE(ParseAddRequest(std::string("\x0b\x0c", 2), &view));  // a group
  EXPECT_FALSE(ParseAddRequest(std::string("\x00\x01", 2), &view));  // field 0
  EXPECT_FALSE(ParseAddRequest(std::string("\x12\x05"
                                           "abc",
                                           5),
                               &view));                                  // length > rest
  EXPECT_FALSE(ParseAddRequest(std::string("\x28\xff\xff", 3), &view));  // unended varint
  EXPECT_FALSE(ParseAddRequest(std::string(12, '\xff'), &view));         // 12-byte varint
  // A tag of six bytes (protobuf reads at most five), then a fixed32: protobuf refuses it.
  EXPECT_FALSE(ParseAddRequest(std::string("\x85\x85\x85\x85\x85\x00\x00\x00\x00\x06", 10), &view));
  EXPECT_TRUE(ParseAddRequest("", &view));  // the empty message: no items (the handler refuses)
  EXPECT_TRUE(view.items.empty());
}

// The answers parse as protobuf's AddResponse / MightContainResponse, at every length class.
// gRPC's deserializer for PipelineRequest counts the operations before parsing any: past the
// bound it yields only the id and the count (the stream answers INVALID_ARGUMENT).
TEST(DirectParseTest, PipelineRequestsOverTheOperationBoundAreNotParsed) {
  bloom::v1::PipelineRequest request;
  request.set_id(7);
  request.mutable_add()->set_name("f");
  request.mutable_add()->add_items("x");
  for (int i = 0; i < 10; ++i) *request.add_more() = request;  // 1 + 10 operations
  auto roundtrip = [&](size_t limit, bloom::v1::PipelineRequest* out) {
    bloom::wire::SetMaxPipelineOperations(limit);
    grpc::ByteBuffer buffer;
    bool own = false;
    EXPECT_TRUE(
        grpc::SerializationTraits<bloom::v1::PipelineRequest>::Serialize(request, &buffer, &own)
            .ok());
    grpc::Status status =
        grpc::SerializationTraits<bloom::v1::PipelineRequest>::Deserialize(&buffer, out);
    bloom::wire::SetMaxPipelineOperations(0);
    return status;
  };
  bloom::v1::PipelineRequest parsed;
  ASSERT_TRUE(roundtrip(11, &parsed).ok());
  EXPECT_EQ(bloom::wire::RefusedOperationCount(parsed), 0u);
  EXPECT_EQ(parsed.more_size(), 10);
  ASSERT_TRUE(roundtrip(0, &parsed).ok());  // no bound
  EXPECT_EQ(parsed.more_size(), 10);
  ASSERT_TRUE(roundtrip(10, &parsed).ok());
  EXPECT_EQ(bloom::wire::RefusedOperationCount(parsed), 11u);
  EXPECT_EQ(parsed.id(), 7u);
  EXPECT_EQ(parsed.more_size(), 0);
  EXPECT_FALSE(parsed.has_add());
}

TEST(DirectParseTest, PackedBoolsAreProtobufsEncoding) {
  std::mt19937_64 random(11);
  for (size_t count : {0, 1, 2, 127, 128, 129, 16383, 16384, 100000}) {
    std::vector<bool> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = random() % 2;
    std::string encoded(PackedBoolsSize(count), '\0');
    bool* payload = WritePackedBoolsHeader(count, encoded.data());
    for (size_t i = 0; i < count; ++i) payload[i] = values[i];
    bloom::v1::MightContainResponse response;
    ASSERT_TRUE(response.ParseFromString(encoded)) << count;
    ASSERT_EQ(static_cast<size_t>(response.present_size()), count);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(response.present(i), values[i]) << i;
    bloom::v1::MightContainResponse expected;
    for (bool v : values) expected.add_present(v);
    EXPECT_EQ(encoded, expected.SerializeAsString()) << count;
  }
}

}  // namespace
}  // namespace service

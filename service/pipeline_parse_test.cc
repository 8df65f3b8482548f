// PipelineRequest read as views (direct_parse.h, PipelineBatch::Read): it reads what protobuf
// writes, merges and replaces oneof pieces as protobuf does, never accepts what protobuf
// refuses, and refuses what a stream must not serve, naming why.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bloom/v1/bloom.pb.h"
#include "gtest/gtest.h"
#include "service/direct_parse.h"
#include "service/pipeline_batch.h"
#include "wire/items_as_bytes.h"

namespace service {
namespace {

using bloom::v1::PipelineRequest;
using Kind = PipelineOperationView::Kind;

// The items of whichever request `request` carries, in answer order, and its name.
struct Expected {
  uint64_t id = 0;
  Kind kind = Kind::kNone;
  std::string name;
  std::vector<std::string> items;
  size_t text_items = 0;
  uint64_t min_sequence = 0;  // a check's or a count's
};

template <typename Request>
Expected ExpectedOf(uint64_t id, Kind kind, const Request& request) {
  Expected expected{id, kind, request.name(), {}, static_cast<size_t>(request.items_size())};
  expected.items.assign(request.items().begin(), request.items().end());
  expected.items.insert(expected.items.end(), request.raw_items().begin(),
                        request.raw_items().end());
  return expected;
}

Expected ExpectedOf(const PipelineRequest& request) {
  switch (request.op_case()) {
    case PipelineRequest::kAdd:
      return ExpectedOf(request.id(), Kind::kAdd, request.add());
    case PipelineRequest::kMightContain: {
      Expected expected = ExpectedOf(request.id(), Kind::kMightContain, request.might_contain());
      expected.min_sequence = request.might_contain().min_sequence();
      return expected;
    }
    case PipelineRequest::kRemove:
      return ExpectedOf(request.id(), Kind::kRemove, request.remove());
    case PipelineRequest::kCount: {
      Expected expected = ExpectedOf(request.id(), Kind::kCount, request.count());
      expected.min_sequence = request.count().min_sequence();
      return expected;
    }
    default:
      return Expected{request.id()};
  }
}

// Compares every operation parsed with the one protobuf parsed (`contents`: their names and
// items too, not only their ids and kinds).
void ExpectSame(const std::vector<PipelineOperationView>& read, const PipelineRequest& proto,
                bool contents = true) {
  ASSERT_EQ(read.size(), 1u + proto.more_size()) << proto.DebugString();
  for (size_t i = 0; i < read.size(); ++i) {
    const Expected expected = ExpectedOf(i == 0 ? proto : proto.more(static_cast<int>(i - 1)));
    EXPECT_EQ(read[i].id, expected.id) << i;
    EXPECT_EQ(read[i].kind, expected.kind) << i;
    if (expected.kind == Kind::kNone || !contents) continue;
    EXPECT_EQ(read[i].request.name, expected.name) << i;
    EXPECT_EQ(std::vector<std::string>(read[i].request.items.begin(), read[i].request.items.end()),
              expected.items)
        << i;
    EXPECT_EQ(read[i].request.text_items, expected.text_items) << i;
    EXPECT_EQ(read[i].request.min_sequence, expected.min_sequence) << i;
  }
}

// One operation, with no `more`.
PipelineRequest RandomOperation(std::mt19937_64& random) {
  PipelineRequest request;
  request.set_id(random() % 3 == 0 ? random() : random() % 1000);
  const int items = static_cast<int>(random() % 4);
  auto fill = [&](auto* op) {
    op->set_name(absl::StrCat("filter-", random() % 5));
    for (int i = 0; i < items; ++i) op->add_items(absl::StrCat("item-", random() % 100));
    if (random() % 2 == 0) op->add_raw_items(std::string("\x00\xff\x80", 3));
  };
  switch (random() % 4) {
    case 0: {
      bloom::v1::AddRequest* add = request.mutable_add();
      fill(add);
      if (random() % 2 == 0) {
        add->mutable_create_if_missing()->set_capacity(1000);
        add->mutable_create_if_missing()->set_error_rate(0.01);
      }
      break;
    }
    case 1: {
      bloom::v1::MightContainRequest* check = request.mutable_might_contain();
      fill(check);
      check->set_absent_if_missing(random() % 2 == 0);
      check->set_min_sequence(random() % 3);
      break;
    }
    case 2:
      fill(request.mutable_remove());
      break;
    default: {
      bloom::v1::CountRequest* count = request.mutable_count();
      fill(count);
      count->set_min_sequence(random() % 3);
    }
  }
  return request;
}

// One operation and up to three more in its `more`.
PipelineRequest RandomRequest(std::mt19937_64& random) {
  PipelineRequest request = RandomOperation(random);
  const int more = static_cast<int>(random() % 4);
  for (int i = 0; i < more; ++i) *request.add_more() = RandomOperation(random);
  return request;
}

TEST(PipelineParseTest, ReadsWhatProtobufWrites) {
  std::mt19937_64 random(20261127);
  for (int round = 0; round < 500; ++round) {
    const PipelineRequest request = RandomRequest(random);
    const std::string bytes = request.SerializeAsString();
    std::vector<PipelineOperationView> read;
    std::deque<std::string> merged;
    ASSERT_TRUE(ParsePipelineRequest(bytes, &read, &merged)) << absl::CEscape(bytes);
    ExpectSame(read, request);
    size_t operations = 0;
    uint64_t id = 0;
    ASSERT_TRUE(CountPipelineOperations(bytes, &operations, &id));
    EXPECT_EQ(operations, 1u + request.more_size());
    EXPECT_EQ(id, request.id());
    EXPECT_TRUE(merged.empty());
  }
}

// Protobuf merges a message field that comes twice, and a later member of a oneof replaces an
// earlier one; so does the direct parse.
TEST(PipelineParseTest, OneofPiecesMergeAndALaterMemberReplaces) {
  PipelineRequest first;
  first.mutable_add()->set_name("users");
  first.mutable_add()->add_items("alice");
  PipelineRequest second;
  second.mutable_add()->add_items("bob");
  PipelineRequest check;
  check.mutable_might_contain()->set_name("other");
  check.mutable_might_contain()->add_items("carol");

  const std::string pieces = first.SerializeAsString() + second.SerializeAsString();
  PipelineRequest proto;
  ASSERT_TRUE(proto.ParseFromString(pieces));
  std::vector<PipelineOperationView> read;
  std::deque<std::string> merged;
  ASSERT_TRUE(ParsePipelineRequest(pieces, &read, &merged));
  ExpectSame(read, proto);
  EXPECT_EQ(read[0].request.items.size(), 2u);
  EXPECT_EQ(merged.size(), 1u);

  const std::string replaced = pieces + check.SerializeAsString();
  ASSERT_TRUE(proto.ParseFromString(replaced));
  ASSERT_TRUE(ParsePipelineRequest(replaced, &read, &merged));
  ExpectSame(read, proto);
  EXPECT_EQ(read[0].kind, Kind::kMightContain);
}

// Every prefix of a message, and every single-byte corruption: never accepted where protobuf
// refuses, and read as protobuf reads it where both accept.
TEST(PipelineParseTest, TruncatedAndCorruptedMessagesNeverDisagreeWithProtobuf) {
  std::mt19937_64 random(7);
  PipelineRequest request = RandomOperation(random);
  request.set_id(300);
  *request.add_more() = RandomOperation(random);
  *request.add_more() = RandomOperation(random);
  const std::string whole = request.SerializeAsString();
  std::vector<std::string> inputs;
  for (size_t n = 0; n <= whole.size(); ++n) inputs.push_back(whole.substr(0, n));
  for (size_t i = 0; i < whole.size(); ++i) {
    for (int value : {0x00, 0x01, 0x07, 0x0b, 0x0c, 0x22, 0x7f, 0x80, 0xff}) {
      std::string corrupt = whole;
      corrupt[i] = static_cast<char>(value);
      inputs.push_back(corrupt);
    }
  }
  int accepted = 0;
  int refused = 0;
  for (const std::string& input : inputs) {
    std::vector<PipelineOperationView> read;
    std::deque<std::string> merged;
    PipelineRequest proto;
    // Items are bytes here: where protobuf refuses a string that is not UTF-8, its reading of
    // items as bytes (items_as_bytes.h) must accept too. That twin keeps only the last piece of
    // an operation sent in pieces (protobuf merges them, as the direct parse does), so contents
    // are compared only where protobuf itself parsed the message.
    const bool strict = proto.ParseFromString(input);
    const bool proto_ok = strict || bloom::wire::ParseLeniently(input, &proto);
    if (!ParsePipelineRequest(input, &read, &merged)) {
      ++refused;
      continue;
    }
    // A `more` nesting its own is refused by the stream whatever it holds; only its count is
    // read, so protobuf may refuse what it holds.
    bool nested = false;
    for (const PipelineOperationView& op : read) nested |= op.nested_more > 0;
    if (nested) continue;
    ++accepted;
    ASSERT_TRUE(proto_ok) << "accepted what protobuf refuses: " << absl::CEscape(input);
    ExpectSame(read, proto, /*contents=*/strict);
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

// What a stream refuses, before or after parsing, with INVALID_ARGUMENT naming the request.
TEST(PipelineParseTest, ReadRefusesWhatAStreamMustNotServe) {
  auto read = [](const std::string& bytes, size_t max_operations) {
    auto kept = std::make_shared<const std::string>(bytes);
    return PipelineBatch::Read(kept, *kept, max_operations);
  };
  PipelineRequest none;
  none.set_id(7);
  absl::StatusOr<std::shared_ptr<const PipelineBatch::Message>> refused =
      read(none.SerializeAsString(), 0);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "id 7 has no operation"));

  PipelineRequest packed;
  packed.set_id(8);
  packed.mutable_might_contain()->set_name("f");
  packed.mutable_might_contain()->add_items("x");
  packed.add_more()->set_id(9);  // no operation
  refused = read(packed.SerializeAsString(), 0);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "more (id 9) has no operation"));

  PipelineRequest* inner = packed.mutable_more(0);
  *inner->mutable_might_contain() = packed.might_contain();
  *inner->add_more() = *inner;  // nested one level too deep
  refused = read(packed.SerializeAsString(), 0);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "nest one level only"));

  packed.mutable_more(0)->clear_more();
  for (int i = 0; i < 4; ++i) *packed.add_more() = packed.more(0);
  refused = read(packed.SerializeAsString(), 5);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "id 8 carries 6 operations"))
      << refused.status();
  absl::StatusOr<std::shared_ptr<const PipelineBatch::Message>> served =
      read(packed.SerializeAsString(), 6);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ((*served)->operations.size(), 6u);

  refused = read(std::string("\x0a\xff", 2), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
}

}  // namespace
}  // namespace service

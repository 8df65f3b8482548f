// The Pipeline stream's contract against the real bloom-server: order and ids, per-operation
// errors that leave the stream going, roles, stream-level errors, back-pressure on a client
// that stops reading, cancellation and shutdown.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloom::v1::BloomFilterService;
using bloom::v1::PipelineRequest;
using bloom::v1::PipelineResponse;
using bloomtest::ServerProcess;
using Stream = grpc::ClientReaderWriter<PipelineRequest, PipelineResponse>;

PipelineRequest AddOp(uint64_t id, const std::string& name, std::vector<std::string> items) {
  PipelineRequest request;
  request.set_id(id);
  request.mutable_add()->set_name(name);
  for (std::string& item : items) request.mutable_add()->add_items(std::move(item));
  return request;
}

PipelineRequest CheckOp(uint64_t id, const std::string& name, std::vector<std::string> items) {
  PipelineRequest request;
  request.set_id(id);
  request.mutable_might_contain()->set_name(name);
  for (std::string& item : items) request.mutable_might_contain()->add_items(std::move(item));
  return request;
}

// A thread writing to a stream. Join() on the normal path; on a failed ASSERT the destructor
// cancels the stream first, so the thread cannot stay blocked in a write.
class StreamWriter {
 public:
  StreamWriter(grpc::ClientContext& context, std::function<void()> body)
      : context_(context), thread_(std::move(body)) {}
  ~StreamWriter() {
    if (thread_.joinable()) {
      context_.TryCancel();
      thread_.join();
    }
  }
  void Join() { thread_.join(); }

 private:
  grpc::ClientContext& context_;
  std::thread thread_;
};

// Each test runs against the default server and one with --item_call_threads, whose queue
// threads poll the connections (gRPC's "poll" strategy) and hand a stream's reads to the
// callback threads.
class PipelineTest : public ::testing::TestWithParam<bool> {
 protected:
  void Start(std::vector<std::string> args = {}) {
    args.push_back("--max_item_bytes=1024");
    if (GetParam()) args.push_back("--item_call_threads=2");
    server_ = ServerProcess::Start(data_.path(), args);
    ASSERT_NE(server_, nullptr);
    stub_ = BloomFilterService::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  void Reserve(const std::string& name, uint64_t capacity, bool non_scaling = false) {
    bloom::v1::ReserveRequest request;
    request.set_name(name);
    request.mutable_spec()->set_capacity(capacity);
    request.mutable_spec()->set_error_rate(0.01);
    request.mutable_spec()->set_non_scaling(non_scaling);
    bloom::v1::ReserveResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Reserve(&context, request, &response).ok());
  }

  // Sends one operation and reads its answer.
  static PipelineResponse RoundTrip(Stream& stream, const PipelineRequest& request) {
    PipelineResponse response;
    EXPECT_TRUE(stream.Write(request));
    EXPECT_TRUE(stream.Read(&response));
    EXPECT_EQ(response.id(), request.id());
    return response;
  }

  bloomtest::TempDir data_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<BloomFilterService::Stub> stub_;
};

TEST_P(PipelineTest, AnswersEveryOperationInOrderWithItsId) {
  Start();
  Reserve("a", 10000);
  Reserve("b", 10000);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  // Sent without waiting, so the server serves many together; each check follows the add of
  // the same item, so it must see it.
  constexpr int kOps = 600;
  StreamWriter writer(context, [&] {
    for (int i = 0; i < kOps; i += 3) {
      const std::string filter = i % 2 == 0 ? "a" : "b";
      if (!stream->Write(AddOp(1000 + i, filter, {absl::StrCat("x", i)})) ||
          !stream->Write(AddOp(1000 + i + 1, filter, {absl::StrCat("x", i)})) ||
          !stream->Write(
              CheckOp(1000 + i + 2, filter, {absl::StrCat("x", i), absl::StrCat("never", i)}))) {
        return;
      }
    }
    stream->WritesDone();
  });
  int false_positives = 0;
  for (int i = 0; i < kOps; ++i) {
    PipelineResponse response;
    ASSERT_TRUE(stream->Read(&response)) << "answer " << i;
    ASSERT_EQ(response.id(), static_cast<uint64_t>(1000 + i));
    switch (i % 3) {
      case 0:  // first add of the item: new (or a rare false positive)
        ASSERT_TRUE(response.has_add()) << response.DebugString();
        ASSERT_EQ(response.add().added_size(), 1);
        false_positives += response.add().added(0) ? 0 : 1;
        break;
      case 1:  // the same item again: never new
        ASSERT_TRUE(response.has_add());
        ASSERT_EQ(response.add().added_size(), 1);
        EXPECT_FALSE(response.add().added(0)) << "answer " << i;
        break;
      default:
        ASSERT_TRUE(response.has_might_contain());
        ASSERT_EQ(response.might_contain().present_size(), 2);
        EXPECT_TRUE(response.might_contain().present(0)) << "false negative, answer " << i;
        false_positives += response.might_contain().present(1) ? 1 : 0;
    }
  }
  writer.Join();
  PipelineResponse extra;
  EXPECT_FALSE(stream->Read(&extra));
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_LT(false_positives, 20);  // 400 chances at about 1%
}

TEST_P(PipelineTest, AFailingOperationGetsItsErrorAndTheStreamGoesOn) {
  Start();
  Reserve("full", 10, /*non_scaling=*/true);
  Reserve("ok", 100);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);

  PipelineResponse missing = RoundTrip(*stream, CheckOp(1, "missing", {"x"}));
  ASSERT_TRUE(missing.has_error());
  EXPECT_EQ(missing.error().code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(missing.error().message(), "missing")) << missing.error().message();

  PipelineResponse big = RoundTrip(*stream, AddOp(2, "ok", {"fine", std::string(2000, 'x')}));
  ASSERT_TRUE(big.has_error());
  EXPECT_EQ(big.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(big.error().message(), "items[1]")) << big.error().message();

  PipelineResponse empty = RoundTrip(*stream, AddOp(3, "ok", {}));
  ASSERT_TRUE(empty.has_error());
  EXPECT_EQ(empty.error().code(), grpc::StatusCode::INVALID_ARGUMENT);

  PipelineResponse bad_name = RoundTrip(*stream, AddOp(4, "no spaces", {"x"}));
  ASSERT_TRUE(bad_name.has_error());
  EXPECT_EQ(bad_name.error().code(), grpc::StatusCode::INVALID_ARGUMENT);

  std::vector<std::string> many;
  for (int i = 0; i < 100; ++i) many.push_back(absl::StrCat("item", i));
  PipelineResponse full = RoundTrip(*stream, AddOp(5, "full", many));
  ASSERT_TRUE(full.has_error());
  EXPECT_EQ(full.error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Nothing of the failed operations was added; the stream still serves.
  PipelineResponse after = RoundTrip(*stream, CheckOp(6, "ok", {"fine"}));
  ASSERT_TRUE(after.has_might_contain());
  EXPECT_FALSE(after.might_contain().present(0));
  PipelineResponse added = RoundTrip(*stream, AddOp(7, "ok", {"fine"}));
  ASSERT_TRUE(added.has_add());
  EXPECT_TRUE(added.add().added(0));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// absent_if_missing: checks of a filter that does not exist answer all absent, and
// plain checks beside them, written together so the server may merge them, still NOT_FOUND.
TEST_P(PipelineTest, AbsentIfMissingAnswersAbsentWhilePlainChecksGetNotFound) {
  Start();
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  for (uint64_t id = 1; id <= 8; ++id) {
    PipelineRequest check = CheckOp(id, "user:42", {absl::StrCat("item", id), "other"});
    check.mutable_might_contain()->set_absent_if_missing(id % 2 == 0);
    ASSERT_TRUE(stream->Write(check));
  }
  for (uint64_t id = 1; id <= 8; ++id) {
    PipelineResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.id(), id);
    if (id % 2 == 0) {
      ASSERT_TRUE(response.has_might_contain()) << response.DebugString();
      ASSERT_EQ(response.might_contain().present_size(), 2);
      EXPECT_FALSE(response.might_contain().present(0));
      EXPECT_FALSE(response.might_contain().present(1));
    } else {
      ASSERT_TRUE(response.has_error()) << response.DebugString();
      EXPECT_EQ(response.error().code(), grpc::StatusCode::NOT_FOUND);
    }
  }
  // Nothing was created; once the filter exists the flag changes nothing.
  Reserve("user:42", 100);
  ASSERT_TRUE(RoundTrip(*stream, AddOp(9, "user:42", {"item2"})).has_add());
  PipelineRequest check = CheckOp(10, "user:42", {"item2"});
  check.mutable_might_contain()->set_absent_if_missing(true);
  PipelineResponse found = RoundTrip(*stream, check);
  ASSERT_TRUE(found.has_might_contain());
  EXPECT_TRUE(found.might_contain().present(0));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Per-user windowed filters made by the stream's adds (create_if_missing with a window and an
// idle_ttl): they answer like unary calls, Stats shows the window, a bad window is that
// operation's INVALID_ARGUMENT and the stream goes on.
TEST_P(PipelineTest, WindowedFiltersCreatedByTheStream) {
  Start();
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(100);
  spec.set_error_rate(0.01);
  spec.mutable_window()->set_seconds(3600);
  spec.mutable_idle_ttl()->set_seconds(86400);
  for (uint64_t user = 1; user <= 4; ++user) {
    PipelineRequest add = AddOp(user, absl::StrCat("seen:", user), {"a", "b"});
    *add.mutable_add()->mutable_create_if_missing() = spec;
    ASSERT_TRUE(RoundTrip(*stream, add).has_add());
  }
  PipelineResponse found = RoundTrip(*stream, CheckOp(5, "seen:3", {"a", "b", "c"}));
  ASSERT_TRUE(found.has_might_contain()) << found.DebugString();
  EXPECT_TRUE(found.might_contain().present(0));
  EXPECT_TRUE(found.might_contain().present(1));
  EXPECT_FALSE(found.might_contain().present(2));
  PipelineRequest bad = AddOp(6, "seen:bad", {"a"});
  *bad.mutable_add()->mutable_create_if_missing() = spec;
  bad.mutable_add()->mutable_create_if_missing()->mutable_window()->set_seconds(0);
  bad.mutable_add()->mutable_create_if_missing()->mutable_window()->set_nanos(1000);
  PipelineResponse refused = RoundTrip(*stream, bad);
  ASSERT_TRUE(refused.has_error()) << refused.DebugString();
  EXPECT_EQ(refused.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(refused.error().message(), "create_if_missing.window"))
      << refused.error().message();
  ASSERT_TRUE(RoundTrip(*stream, CheckOp(7, "seen:1", {"a"})).has_might_contain());
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  grpc::ClientContext stats_context;
  bloom::v1::StatsRequest stats_request;
  stats_request.set_name("seen:2");
  bloom::v1::StatsResponse stats;
  ASSERT_TRUE(stub_->Stats(&stats_context, stats_request, &stats).ok());
  EXPECT_EQ(stats.stats().spec().window().seconds(), 3600);
  EXPECT_EQ(stats.stats().spec().window_slices(), 8u);
  EXPECT_TRUE(stats.stats().has_expires_at());
  EXPECT_TRUE(stats.stats().has_window_start());
}

// A message's `more` (many users' filters in one message): each operation is served as if it
// had come alone right after its leader, with its own answer or error, and every answer comes
// back in the leader's response, in order. The server says it packs in its response headers.
TEST_P(PipelineTest, OperationsInMoreAreAnsweredInOneResponseInOrder) {
  Start();
  Reserve("full", 2, /*non_scaling=*/true);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  constexpr int kUsers = 300;
  PipelineRequest message = AddOp(1, "user:0", {"seen-0"});
  message.mutable_add()->mutable_create_if_missing()->set_capacity(100);
  message.mutable_add()->mutable_create_if_missing()->set_error_rate(0.01);
  for (int user = 1; user < kUsers; ++user) {
    PipelineRequest* add = message.add_more();
    *add = AddOp(1 + user, absl::StrCat("user:", user), {absl::StrCat("seen-", user)});
    *add->mutable_add()->mutable_create_if_missing() = message.add().create_if_missing();
  }
  // Each check follows the add of its item in the same message: it must see it.
  *message.add_more() = CheckOp(1000, "user:7", {"seen-7", "unseen"});
  *message.add_more() = CheckOp(1001, "missing", {"x"});
  *message.add_more() = AddOp(1002, "full", {"a", "b", "c"});
  *message.add_more() = AddOp(1003, "full", {"a", "b"});
  ASSERT_TRUE(stream->Write(message));
  PipelineResponse response;
  ASSERT_TRUE(stream->Read(&response));
  const auto& headers = context.GetServerInitialMetadata();
  ASSERT_NE(headers.find("bloom-pipeline-more"), headers.end());
  EXPECT_EQ(headers.find("bloom-pipeline-more")->second, "1");
  EXPECT_EQ(response.id(), 1u);
  ASSERT_TRUE(response.has_add()) << response.DebugString();
  EXPECT_TRUE(response.add().added(0));
  ASSERT_EQ(response.more_size(), kUsers - 1 + 4);
  for (int user = 1; user < kUsers; ++user) {
    const PipelineResponse& answer = response.more(user - 1);
    EXPECT_EQ(answer.id(), static_cast<uint64_t>(1 + user));
    ASSERT_TRUE(answer.has_add()) << answer.DebugString();
    EXPECT_TRUE(answer.add().added(0)) << "user " << user;
    EXPECT_EQ(answer.more_size(), 0);
  }
  const PipelineResponse& check = response.more(kUsers - 1);
  EXPECT_EQ(check.id(), 1000u);
  ASSERT_TRUE(check.has_might_contain());
  EXPECT_TRUE(check.might_contain().present(0)) << "a check must see the add before it";
  const PipelineResponse& missing = response.more(kUsers);
  ASSERT_TRUE(missing.has_error());
  EXPECT_EQ(missing.error().code(), grpc::StatusCode::NOT_FOUND);
  const PipelineResponse& too_many = response.more(kUsers + 1);
  ASSERT_TRUE(too_many.has_error());
  EXPECT_EQ(too_many.error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  const PipelineResponse& fits = response.more(kUsers + 2);
  ASSERT_TRUE(fits.has_add()) << fits.DebugString();
  EXPECT_EQ(fits.add().added_size(), 2);

  // A plain message after it is answered on its own, and everything added is durable.
  PipelineResponse later = RoundTrip(*stream, CheckOp(2000, "user:299", {"seen-299"}));
  ASSERT_TRUE(later.has_might_contain());
  EXPECT_TRUE(later.might_contain().present(0));
  EXPECT_EQ(later.more_size(), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  server_->Kill();
  Start();
  grpc::ClientContext again;
  std::unique_ptr<Stream> reopened = stub_->Pipeline(&again);
  for (int user = 0; user < kUsers; user += 37) {
    PipelineResponse seen = RoundTrip(*reopened, CheckOp(3000 + user, absl::StrCat("user:", user),
                                                         {absl::StrCat("seen-", user)}));
    ASSERT_TRUE(seen.has_might_contain()) << seen.DebugString();
    EXPECT_TRUE(seen.might_contain().present(0)) << "lost after kill -9: user " << user;
  }
  reopened->WritesDone();
  EXPECT_TRUE(reopened->Finish().ok());
}

// Items that are not UTF-8, sent in `items` (a string field), are served as their bytes in a
// message's own operation and in its `more`: the server reads Pipeline messages as bytes
// (direct_parse.h). Read with protobuf, such a message parsed only as the items-as-bytes twin,
// which had no `more`: those operations were dropped, unanswered.
TEST_P(PipelineTest, ItemsThatAreNotUtf8AreServedInEveryOperationOfAMessage) {
  Start();
  Reserve("f", 1000);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  const std::string binary("\xff\xfe\x80", 3);
  PipelineRequest message = AddOp(1, "f", {binary});
  *message.add_more() = AddOp(2, "f", {"plain", binary + "2"});
  *message.add_more() = CheckOp(3, "f", {binary, binary + "2", "plain", "absent"});
  ASSERT_TRUE(stream->Write(message));
  PipelineResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.id(), 1u);
  ASSERT_TRUE(response.has_add()) << response.DebugString();
  EXPECT_TRUE(response.add().added(0));
  ASSERT_EQ(response.more_size(), 2) << response.DebugString();
  ASSERT_TRUE(response.more(0).has_add()) << response.DebugString();
  EXPECT_EQ(response.more(0).id(), 2u);
  EXPECT_EQ(response.more(0).add().added_size(), 2);
  ASSERT_TRUE(response.more(1).has_might_contain()) << response.DebugString();
  const std::vector<bool> present(response.more(1).might_contain().present().begin(),
                                  response.more(1).might_contain().present().end());
  EXPECT_EQ(present, (std::vector<bool>{true, true, true, false}));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(PipelineTest, MoreNestsOneLevelAndEachMustHaveAnOperation) {
  Start();
  Reserve("f", 100);
  for (const bool nested_more : {false, true}) {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
    ASSERT_TRUE(stream->Write(AddOp(1, "f", {"a"})));
    PipelineRequest message = AddOp(2, "f", {"b"});
    PipelineRequest* inner = message.add_more();
    inner->set_id(3);
    if (nested_more) {
      inner->mutable_add()->set_name("f");
      inner->mutable_add()->add_items("c");
      *inner->add_more() = AddOp(4, "f", {"d"});
    }
    ASSERT_TRUE(stream->Write(message));
    PipelineResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.id(), 1u);
    EXPECT_FALSE(stream->Read(&response));
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(status.error_message(), "id 3")) << status.error_message();
  }
}

TEST_P(PipelineTest, ARequestWithoutAnOperationEndsTheStreamAfterEarlierAnswers) {
  Start();
  Reserve("f", 100);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  ASSERT_TRUE(stream->Write(AddOp(1, "f", {"a"})));
  PipelineRequest nothing;
  nothing.set_id(2);
  ASSERT_TRUE(stream->Write(nothing));
  PipelineResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.id(), 1u);
  EXPECT_TRUE(response.has_add());
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "id 2")) << status.error_message();
}

TEST_P(PipelineTest, TokensAreCheckedAtStartAndRolesPerOperation) {
  bloomtest::TempDir secrets;
  const std::string tokens = secrets.path() + "/tokens";
  std::ofstream(tokens) << absl::StrCat(bloomtest::TokenDigest("reader-token"), " read reader\n",
                                        bloomtest::TokenDigest("writer-token"), " write writer\n");
  Start({"--auth_token_file=" + tokens});
  auto open = [&](grpc::ClientContext& context, const std::string& token) {
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    return stub_->Pipeline(&context);
  };
  {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = open(context, "");
    PipelineResponse response;
    EXPECT_FALSE(stream->Read(&response));  // ended before anything was read
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = open(context, "wrong-token");
    stream->Write(AddOp(1, "f", {"a"}));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = open(context, "writer-token");
    PipelineRequest create = AddOp(1, "f", {"a"});
    create.mutable_add()->mutable_create_if_missing()->set_capacity(100);
    create.mutable_add()->mutable_create_if_missing()->set_error_rate(0.01);
    PipelineResponse response = RoundTrip(*stream, create);
    EXPECT_TRUE(response.has_add()) << response.DebugString();
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = open(context, "reader-token");
    PipelineResponse denied = RoundTrip(*stream, AddOp(1, "f", {"b"}));
    ASSERT_TRUE(denied.has_error());
    EXPECT_EQ(denied.error().code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_TRUE(absl::StrContains(denied.error().message(), "reader")) << denied.error().message();
    PipelineResponse check = RoundTrip(*stream, CheckOp(2, "f", {"a", "b"}));
    ASSERT_TRUE(check.has_might_contain());
    EXPECT_TRUE(check.might_contain().present(0));
    EXPECT_FALSE(check.might_contain().present(1));  // the denied add added nothing
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
}

// A client that writes without reading: the server holds at most its window of operations
// (the small answers wait in transport buffers), keeps serving everyone else, and everything
// is answered in order once the client reads.
TEST_P(PipelineTest, AClientThatWritesWithoutReadingLosesNothing) {
  Start({"--pipeline_window=8"});
  Reserve("f", 100000);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  constexpr int kOps = 20000;
  std::atomic<int> written{0};
  StreamWriter writer(context, [&] {
    for (int i = 0; i < kOps; ++i) {
      if (!stream->Write(AddOp(i, "f", {absl::StrCat("item-", i, std::string(200, 'p'))}))) return;
      ++written;
    }
    stream->WritesDone();
  });
  // Far more than the window written and unread: the server has stopped reading this stream.
  ASSERT_TRUE(bloomtest::WaitFor([&] { return written.load() >= 200; })) << written.load();
  // Meanwhile the server serves other calls.
  bloom::v1::MightContainRequest check;
  check.set_name("f");
  check.add_items("item-0");
  bloom::v1::MightContainResponse present;
  grpc::ClientContext unary;
  unary.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(stub_->MightContain(&unary, check, &present).ok());
  for (int i = 0; i < kOps; ++i) {
    PipelineResponse response;
    ASSERT_TRUE(stream->Read(&response)) << "answer " << i;
    ASSERT_EQ(response.id(), static_cast<uint64_t>(i));
    ASSERT_TRUE(response.has_add()) << response.ShortDebugString();
  }
  writer.Join();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(PipelineTest, CancelledStreamsLeaveTheServerServing) {
  Start();
  Reserve("f", 1000);
  for (int round = 0; round < 20; ++round) {
    grpc::ClientContext context;
    std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
    for (int i = 0; i < 50; ++i) stream->Write(AddOp(i, "f", {absl::StrCat(round, "-", i)}));
    context.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  PipelineResponse response = RoundTrip(*stream, CheckOp(1, "f", {"x"}));
  EXPECT_TRUE(response.has_might_contain());
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// SIGTERM: open streams answer what they read and end UNAVAILABLE, at once rather than after
// the grace period; acknowledged adds survive the restart.
TEST_P(PipelineTest, ShutdownEndsOpenStreamsUnavailableAndKeepsTheirAdds) {
  Start({"--shutdown_grace=30s"});
  Reserve("f", 1000);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  PipelineResponse added = RoundTrip(*stream, AddOp(1, "f", {"kept"}));
  ASSERT_TRUE(added.has_add());
  const absl::Time start = absl::Now();
  server_->Signal(SIGTERM);
  PipelineResponse more;
  EXPECT_FALSE(stream->Read(&more));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server_->Terminate(), 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  Start();
  grpc::ClientContext again;
  std::unique_ptr<Stream> reopened = stub_->Pipeline(&again);
  PipelineResponse check = RoundTrip(*reopened, CheckOp(2, "f", {"kept"}));
  ASSERT_TRUE(check.has_might_contain());
  EXPECT_TRUE(check.might_contain().present(0));
  reopened->WritesDone();
  EXPECT_TRUE(reopened->Finish().ok());
}

// With --sync the server keeps the callback model: adds (unary and Pipeline) are written at
// once and answered after a group fsync, from the WAL syncer's thread. Checks read behind adds
// still answer in request order, after them.
TEST_P(PipelineTest, SyncAnswersAddsAfterASharedFsyncInOrder) {
  Start({"--sync", "--metrics_listen=127.0.0.1:0"});
  Reserve("f", 10'000);
  constexpr int kStreams = 4, kOps = 300;
  std::vector<std::thread> streams;
  std::atomic<int> failures{0};
  for (int s = 0; s < kStreams; ++s) {
    streams.emplace_back([&, s] {
      grpc::ClientContext context;
      std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
      StreamWriter writer(context, [&] {
        for (int i = 0; i < kOps; ++i) {
          const std::string item = absl::StrCat("s", s, "-", i);
          // Odd ids check the item the add before them added: answered after that add.
          if (!stream->Write(AddOp(2 * i, "f", {item})) ||
              !stream->Write(CheckOp(2 * i + 1, "f", {item}))) {
            return;
          }
        }
        stream->WritesDone();
      });
      for (int i = 0; i < 2 * kOps; ++i) {
        PipelineResponse response;
        if (!stream->Read(&response) || response.id() != static_cast<uint64_t>(i) ||
            (i % 2 == 0 ? !response.has_add() : !response.might_contain().present(0))) {
          failures.fetch_add(1);
          context.TryCancel();
          break;
        }
      }
      writer.Join();
      if (!stream->Finish().ok()) failures.fetch_add(1);
    });
  }
  // Unary adds at the same time, from other threads.
  std::vector<std::thread> unary;
  for (int t = 0; t < 4; ++t) {
    unary.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        bloom::v1::AddRequest request;
        request.set_name("f");
        request.add_items(absl::StrCat("u", t, "-", i));
        bloom::v1::AddResponse response;
        grpc::ClientContext context;
        if (!stub_->Add(&context, request, &response).ok() || response.added_size() != 1) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : streams) thread.join();
  for (std::thread& thread : unary) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(absl::StrContains(server_->ReadLog(), "callback model"));
  const std::string metrics = bloomtest::HttpGet(server_->metrics_port(), "/metrics");
  const double syncs = bloomtest::PrometheusSample(metrics, "bloom_wal_syncs_total");
  const double requests = bloomtest::PrometheusSample(metrics, "bloom_wal_sync_requests_total");
  EXPECT_GE(syncs, 1) << metrics;
  EXPECT_LE(syncs, requests);
  EXPECT_GE(requests, 4 * 50 + 1);  // every unary add, and at least one Pipeline batch
  // The streams' batches with adds went through the group committer.
  const double commits = bloomtest::PrometheusSample(metrics, "bloom_group_commits_total");
  const double committed = bloomtest::PrometheusSample(metrics, "bloom_group_commit_batches_total");
  EXPECT_GE(commits, 1) << metrics;
  EXPECT_LE(commits, committed);
  EXPECT_GE(committed, kStreams);
  // kill -9: every answered add is there after the restart.
  server_->Kill();
  server_ = ServerProcess::Start(data_.path(), {"--sync"});
  ASSERT_NE(server_, nullptr);
  stub_ = BloomFilterService::NewStub(
      grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  bloom::v1::MightContainRequest request;
  request.set_name("f");
  for (int s = 0; s < kStreams; ++s) {
    for (int i = 0; i < kOps; ++i) request.add_items(absl::StrCat("s", s, "-", i));
  }
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 50; ++i) request.add_items(absl::StrCat("u", t, "-", i));
  }
  bloom::v1::MightContainResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->MightContain(&context, request, &response).ok());
  ASSERT_EQ(response.present_size(), request.items_size());
  for (int i = 0; i < response.present_size(); ++i) {
    EXPECT_TRUE(response.present(i)) << request.items(i);
  }
}

// The sync server model was retired: a command line that still asks for it starts, warns, and
// serves --sync on the callback model.
TEST_P(PipelineTest, TheRetiredSyncModelFlagServesTheCallbackModel) {
  Start({"--sync", "--server_model=sync", "--max_threads=8"});
  Reserve("f", 1000);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub_->Pipeline(&context);
  for (int i = 0; i < 20; ++i) {
    const PipelineResponse response = RoundTrip(*stream, AddOp(i, "f", {absl::StrCat("s", i)}));
    ASSERT_TRUE(response.has_add()) << response.DebugString();
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  const std::string log = server_->ReadLog();
  EXPECT_TRUE(absl::StrContains(log, "callback model")) << log;
  EXPECT_TRUE(absl::StrContains(log, "--server_model=sync is retired")) << log;
  EXPECT_TRUE(absl::StrContains(log, "--max_threads is retired")) << log;
}

INSTANTIATE_TEST_SUITE_P(Served, PipelineTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "ItemCallThreads" : "Default";
                         });

}  // namespace

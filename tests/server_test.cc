// Integration tests: the real bloom-server binary, a fresh data dir, port 0.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include <atomic>
#include <cmath>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/bloom_client.h"
#include "grpc/health/v1/health.pb.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloomclient::BloomClient;
using bloomtest::ServerProcess;

bloom::v1::FilterSpec Spec(uint64_t capacity, double error_rate, uint32_t expansion = 0,
                           bool non_scaling = false) {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(capacity);
  spec.set_error_rate(error_rate);
  spec.set_expansion(expansion);
  spec.set_non_scaling(non_scaling);
  return spec;
}

std::vector<std::string> Items(absl::string_view prefix, int n) {
  std::vector<std::string> items;
  for (int i = 0; i < n; ++i) items.push_back(absl::StrCat(prefix, i));
  return items;
}

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(const std::vector<std::string>& args = {},
                   const std::vector<std::string>& env = {}) {
    server_.reset();
    server_ = ServerProcess::Start(data_dir_.path(), args, env);
    ASSERT_NE(server_, nullptr);
    client_ = BloomClient::Connect(server_->target());
  }
  void SetUp() override { StartServer({"--max_batch=1000", "--max_item_bytes=1024"}); }

  // Every item reads as present (no false negative).
  void ExpectAllPresent(absl::string_view filter, const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<bool>> present = client_->MightContain(filter, items);
    ASSERT_OK(present.status());
    for (size_t i = 0; i < items.size(); ++i) {
      ASSERT_TRUE((*present)[i]) << "false negative for " << items[i];
    }
  }

  // The server still answers, and the canary filter is intact.
  void ExpectStillServing() {
    absl::StatusOr<std::vector<bool>> present = client_->MightContain("canary", {"alive"});
    ASSERT_OK(present.status());
    EXPECT_TRUE((*present)[0]);
  }

  bloomtest::TempDir data_dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<BloomClient> client_;
};

TEST_F(ServerTest, EveryRpcEndToEnd) {
  absl::StatusOr<bloom::v1::ReserveResponse> reserved = client_->Reserve("users", Spec(1000, 0.01));
  ASSERT_OK(reserved.status());
  EXPECT_TRUE(reserved->created());
  EXPECT_EQ(reserved->stats().spec().expansion(), 2u);
  EXPECT_EQ(reserved->stats().sub_filters(), 1u);

  absl::StatusOr<std::vector<bool>> added = client_->Add("users", {"alice", "bob", "alice"});
  ASSERT_OK(added.status());
  EXPECT_EQ(*added, (std::vector<bool>{true, true, false}));
  absl::StatusOr<std::vector<bool>> present = client_->MightContain("users", {"bob", "carol"});
  ASSERT_OK(present.status());
  EXPECT_EQ(*present, (std::vector<bool>{true, false}));

  absl::StatusOr<bloom::v1::FilterStats> stats = client_->Stats("users");
  ASSERT_OK(stats.status());
  EXPECT_EQ(stats->name(), "users");
  EXPECT_EQ(stats->items_added(), 2u);
  EXPECT_EQ(stats->estimated_cardinality(), 2u);
  EXPECT_EQ(stats->checks(), 2u);
  EXPECT_EQ(stats->check_hits(), 1u);
  EXPECT_GT(stats->size_bytes(), 0u);
  EXPECT_GT(stats->created_at().seconds(), 1'600'000'000);
  ASSERT_EQ(stats->sub_filter_stats_size(), 1);
  EXPECT_EQ(stats->sub_filter_stats(0).items_added(), 2u);

  ASSERT_OK(client_->Reserve("teams", Spec(10, 0.1)).status());
  absl::StatusOr<bloom::v1::ListResponse> list = client_->List("", 1);
  ASSERT_OK(list.status());
  ASSERT_EQ(list->filters_size(), 1);
  EXPECT_EQ(list->filters(0).name(), "teams");
  list = client_->List("", 1, list->next_page_token());
  ASSERT_OK(list.status());
  EXPECT_EQ(list->filters(0).name(), "users");
  EXPECT_TRUE(list->next_page_token().empty());

  std::stringstream dump;
  ASSERT_OK(client_->Export("users", dump));
  absl::StatusOr<bloom::v1::FilterStats> imported = client_->Import("users-copy", dump);
  ASSERT_OK(imported.status());
  EXPECT_EQ(imported->items_added(), 2u);
  EXPECT_EQ(*client_->MightContain("users-copy", {"alice", "carol"}),
            (std::vector<bool>{true, false}));

  ASSERT_OK(client_->Delete("users"));
  EXPECT_TRUE(absl::IsNotFound(client_->Stats("users").status()));
  EXPECT_TRUE(absl::IsNotFound(client_->Delete("users")));
}

TEST_F(ServerTest, TextAndBytesAreTheSameItemAndResultsKeepRequestOrder) {
  ASSERT_OK(client_->Reserve("mixed", Spec(100, 0.01)).status());
  grpc::ClientContext context;
  bloom::v1::AddRequest add;
  add.set_name("mixed");
  add.add_items("a");
  add.add_raw_items(std::string("\x00\xff", 2));
  add.add_raw_items("a");  // the same item as the text "a"
  bloom::v1::AddResponse added;
  ASSERT_TRUE(client_->stub().Add(&context, add, &added).ok());
  ASSERT_EQ(added.added_size(), 3);
  EXPECT_TRUE(added.added(0));
  EXPECT_TRUE(added.added(1));
  EXPECT_FALSE(added.added(2));
  // Integers are sent as decimal strings: 1001 and "1001" match.
  ASSERT_OK(client_->AddIntegers("mixed", {1001}).status());
  EXPECT_EQ(*client_->MightContain("mixed", {"1001", "1002"}), (std::vector<bool>{true, false}));
  EXPECT_EQ(*client_->MightContainIntegers("mixed", {1001}), std::vector<bool>{true});
}

// C++ protobuf serializes a string field that is not UTF-8, which proto3 parsing refuses. An item
// is its bytes, whichever field carries it (protos/wire/items_as_bytes.h), so such items are
// served; a name that is not UTF-8 is refused INVALID_ARGUMENT, naming it, never UNIMPLEMENTED
// with no message.
TEST_F(ServerTest, ItemsThatAreNotUtf8AreServedAsTheirBytes) {
  const std::string binary("\xff\xfe\x00", 3);
  {
    grpc::ClientContext context;
    bloom::v1::AddRequest add;
    add.set_name("binary");
    add.add_items(binary);
    *add.mutable_create_if_missing() = Spec(100, 0.01);
    bloom::v1::AddResponse added;
    grpc::Status status = client_->stub().Add(&context, add, &added);
    ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
    ASSERT_EQ(added.added_size(), 1);
    EXPECT_TRUE(added.added(0));
  }
  {
    grpc::ClientContext context;
    bloom::v1::MightContainRequest check;
    check.set_name("binary");
    check.add_items(binary);
    check.add_items(std::string("\xfe", 1));
    check.add_raw_items(binary);
    bloom::v1::MightContainResponse present;
    grpc::Status status = client_->stub().MightContain(&context, check, &present);
    ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
    ASSERT_EQ(present.present_size(), 3);
    EXPECT_TRUE(present.present(0));
    EXPECT_TRUE(present.present(2));
  }
  {
    grpc::ClientContext context;
    bloom::v1::MightContainRequest check;
    check.set_name("\xff");
    check.add_items("a");
    bloom::v1::MightContainResponse present;
    grpc::Status status = client_->stub().MightContain(&context, check, &present);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(status.error_message(), "name")) << status.error_message();
  }
  {
    grpc::ClientContext context;
    auto stream = client_->stub().Pipeline(&context);
    bloom::v1::PipelineRequest request;
    request.set_id(7);
    request.mutable_add()->set_name("binary");
    request.mutable_add()->add_items(std::string("\xfd\xfc", 2));
    ASSERT_TRUE(stream->Write(request));
    stream->WritesDone();
    bloom::v1::PipelineResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.id(), 7u);
    ASSERT_TRUE(response.has_add()) << response.DebugString();
    EXPECT_TRUE(response.add().added(0));
    grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(*client_->MightContain("binary", {std::string("\xfd\xfc", 2)}),
            std::vector<bool>{true});
}

struct BadRequest {
  std::string description;
  std::function<grpc::Status(bloom::v1::BloomFilterService::Stub&)> call;
  grpc::StatusCode code;
  std::string message_contains;
};

template <typename Request, typename Response>
std::function<grpc::Status(bloom::v1::BloomFilterService::Stub&)> Unary(
    grpc::Status (bloom::v1::BloomFilterService::Stub::*method)(grpc::ClientContext*,
                                                                const Request&, Response*),
    Request request) {
  return [method, request](bloom::v1::BloomFilterService::Stub& stub) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    Response response;
    return (stub.*method)(&context, request, &response);
  };
}

bloom::v1::ReserveRequest ReserveOf(const std::string& name, double error_rate,
                                    uint64_t capacity = 100, uint32_t expansion = 0,
                                    bool non_scaling = false) {
  bloom::v1::ReserveRequest r;
  r.set_name(name);
  *r.mutable_spec() = Spec(capacity, error_rate, expansion, non_scaling);
  return r;
}

template <typename Request>
Request WithItems(const std::string& name, int count, size_t item_bytes = 4, bool raw = false) {
  Request r;
  r.set_name(name);
  for (int i = 0; i < count; ++i) {
    std::string item = absl::StrCat(i, std::string(item_bytes, 'x')).substr(0, item_bytes);
    raw ? r.add_raw_items(item) : r.add_items(item);
  }
  return r;
}

TEST_F(ServerTest, EveryMalformedRequestGetsItsCodeAndTheServerKeepsServing) {
  const bloom::v1::FilterSpec canary_spec = Spec(100, 0.01);
  ASSERT_OK(client_->Add("canary", {"alive"}, &canary_spec).status());
  ASSERT_OK(client_->Reserve("fixed", Spec(10, 0.01, 0, true)).status());
  ASSERT_OK(client_->Add("fixed", Items("f", 9)).status());
  using S = bloom::v1::BloomFilterService::Stub;
  const double nan = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  bloom::v1::ReserveRequest no_spec;
  no_spec.set_name("x");
  bloom::v1::AddRequest create_bad = WithItems<bloom::v1::AddRequest>("new", 1);
  *create_bad.mutable_create_if_missing() = Spec(10, 2.0);
  bloom::v1::ListRequest bad_token;
  bad_token.set_page_token("not a token!");
  bloom::v1::StatsRequest stats_missing, stats_bad;
  stats_missing.set_name("missing");
  stats_bad.set_name("no spaces");
  bloom::v1::DeleteRequest delete_missing;
  delete_missing.set_name("missing");
  const grpc::StatusCode kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  const std::vector<BadRequest> cases = {
      {"empty name", Unary(&S::Reserve, ReserveOf("", 0.01)), kInvalid, "name"},
      {"256-char name", Unary(&S::Reserve, ReserveOf(std::string(256, 'n'), 0.01)), kInvalid,
       "name"},
      {"space in name", Unary(&S::Reserve, ReserveOf("a b", 0.01)), kInvalid, "name"},
      {"unicode name", Unary(&S::Reserve, ReserveOf("caf\xc3\xa9", 0.01)), kInvalid, "name"},
      {"missing spec", Unary(&S::Reserve, no_spec), kInvalid, "spec"},
      {"capacity 0", Unary(&S::Reserve, ReserveOf("x", 0.01, 0)), kInvalid, "spec.capacity"},
      {"error_rate 0", Unary(&S::Reserve, ReserveOf("x", 0)), kInvalid, "spec.error_rate"},
      {"error_rate 1", Unary(&S::Reserve, ReserveOf("x", 1)), kInvalid, "spec.error_rate"},
      {"error_rate -1", Unary(&S::Reserve, ReserveOf("x", -1)), kInvalid, "spec.error_rate"},
      {"error_rate NaN", Unary(&S::Reserve, ReserveOf("x", nan)), kInvalid, "spec.error_rate"},
      {"error_rate inf", Unary(&S::Reserve, ReserveOf("x", inf)), kInvalid, "spec.error_rate"},
      {"expansion 32769", Unary(&S::Reserve, ReserveOf("x", 0.01, 100, 32769)), kInvalid,
       "spec.expansion"},
      {"non_scaling with expansion", Unary(&S::Reserve, ReserveOf("x", 0.01, 100, 2, true)),
       kInvalid, "spec.expansion"},
      {"huge capacity", Unary(&S::Reserve, ReserveOf("x", 1e-9, 1ULL << 62)),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "capacity"},
      {"other spec", Unary(&S::Reserve, ReserveOf("canary", 0.5)), grpc::StatusCode::ALREADY_EXISTS,
       "different spec"},
      {"add to missing", Unary(&S::Add, WithItems<bloom::v1::AddRequest>("missing", 1)),
       grpc::StatusCode::NOT_FOUND, "missing"},
      {"add nothing", Unary(&S::Add, WithItems<bloom::v1::AddRequest>("canary", 0)), kInvalid,
       "items"},
      {"add too many", Unary(&S::Add, WithItems<bloom::v1::AddRequest>("canary", 1001)), kInvalid,
       "items"},
      {"add item too big", Unary(&S::Add, WithItems<bloom::v1::AddRequest>("canary", 2, 1025)),
       kInvalid, "items[0]"},
      {"add raw item too big",
       Unary(&S::Add, WithItems<bloom::v1::AddRequest>("canary", 1, 1025, true)), kInvalid,
       "raw_items[0]"},
      {"create with bad spec", Unary(&S::Add, create_bad), kInvalid,
       "create_if_missing.error_rate"},
      {"add to full non_scaling", Unary(&S::Add, WithItems<bloom::v1::AddRequest>("fixed", 5)),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "full"},
      {"check missing",
       Unary(&S::MightContain, WithItems<bloom::v1::MightContainRequest>("missing", 1)),
       grpc::StatusCode::NOT_FOUND, "missing"},
      {"check nothing",
       Unary(&S::MightContain, WithItems<bloom::v1::MightContainRequest>("canary", 0)), kInvalid,
       "items"},
      {"check bad name",
       Unary(&S::MightContain, WithItems<bloom::v1::MightContainRequest>("a b", 1)), kInvalid,
       "name"},
      {"stats missing", Unary(&S::Stats, stats_missing), grpc::StatusCode::NOT_FOUND, "missing"},
      {"stats bad name", Unary(&S::Stats, stats_bad), kInvalid, "name"},
      {"delete missing", Unary(&S::Delete, delete_missing), grpc::StatusCode::NOT_FOUND, "missing"},
      {"list bad token", Unary(&S::List, bad_token), kInvalid, "page_token"},
  };
  for (const BadRequest& c : cases) {
    const grpc::Status status = c.call(client_->stub());
    EXPECT_EQ(status.error_code(), c.code) << c.description << ": " << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), c.message_contains))
        << c.description << ": " << status.error_message();
    ExpectStillServing();
  }
  // The full non-scaling filter took nothing from the refused request.
  EXPECT_EQ(client_->Stats("fixed")->items_added(), 9u);
  EXPECT_TRUE(absl::IsNotFound(client_->Stats("new").status()));
}

TEST_F(ServerTest, ExportOfMissingFilterAndBadImportsCreateNothing) {
  const bloom::v1::FilterSpec canary_spec = Spec(100, 0.01);
  ASSERT_OK(client_->Add("canary", {"alive"}, &canary_spec).status());
  std::stringstream out;
  EXPECT_TRUE(absl::IsNotFound(client_->Export("missing", out)));
  std::stringstream dump;
  ASSERT_OK(client_->Export("canary", dump));
  const std::string bytes = dump.str();
  std::string corrupt = bytes;
  corrupt[corrupt.size() / 2] ^= 0x40;
  std::stringstream corrupt_in(corrupt), truncated_in(bytes.substr(0, bytes.size() - 3)),
      junk_in("definitely not a dump"), taken_in(bytes), bad_name_in(bytes);
  EXPECT_EQ(client_->Import("c1", corrupt_in).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(client_->Import("c2", truncated_in).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Import("c3", junk_in).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Import("canary", taken_in).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(client_->Import("bad name", bad_name_in).status().code(),
            absl::StatusCode::kInvalidArgument);
  // An Import stream with no chunk at all.
  grpc::ClientContext context;
  bloom::v1::ImportResponse response;
  auto writer = client_->stub().Import(&context, &response);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (const char* name : {"c1", "c2", "c3"}) {
    EXPECT_TRUE(absl::IsNotFound(client_->Stats(name).status())) << name;
  }
  ExpectStillServing();
}

TEST_F(ServerTest, ManyClientsRacingToCreateTheSameFilterCreateItOnce) {
  constexpr int kClients = 16;
  std::atomic<int> created{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      auto client = BloomClient::Connect(server_->target());
      absl::StatusOr<bloom::v1::ReserveResponse> r = client->Reserve("shared", Spec(5000, 0.01));
      ASSERT_OK(r.status());
      created += r->created();
      const bloom::v1::FilterSpec spec = Spec(5000, 0.01);
      ASSERT_OK(client->Add("lazy", Items(absl::StrCat("c", t, "-"), 100), &spec).status());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(created.load(), 1);
  for (int t = 0; t < kClients; ++t)
    ExpectAllPresent("lazy", Items(absl::StrCat("c", t, "-"), 100));
  EXPECT_GE(client_->Stats("lazy")->items_added(), static_cast<uint64_t>(kClients * 99));
}

TEST_F(ServerTest, DataSurvivesSigtermAndKillNine) {
  ASSERT_OK(client_->Reserve("persist", Spec(2000, 0.01)).status());
  const std::vector<std::string> first = Items("p", 1000);
  ASSERT_OK(client_->Add("persist", first).status());
  // The client stays connected (idle) across the shutdown, as in a real deployment: the server
  // must still stop promptly rather than wait out its grace period for idle connections.
  const absl::Time stop_start = absl::Now();
  EXPECT_EQ(server_->Terminate(), 0);
  EXPECT_LT(absl::Now() - stop_start, absl::Seconds(3));
  EXPECT_TRUE(absl::StrContains(server_->ReadLog(), "shut down cleanly")) << server_->ReadLog();
  StartServer();
  EXPECT_TRUE(absl::StrContains(server_->ReadLog(), "loaded 1 filters")) << server_->ReadLog();

  ExpectAllPresent("persist", first);

  const std::vector<std::string> second = Items("q", 1000);
  ASSERT_OK(client_->Add("persist", second).status());
  server_->Kill();  // no checkpoint, no clean close: the journal must carry the adds
  StartServer();
  ExpectAllPresent("persist", first);
  ExpectAllPresent("persist", second);
  EXPECT_GE(client_->Stats("persist")->items_added(), 1990u);
}

// Merge over the wire: filters reserved alike unite, the union survives kill -9, and every bad
// request gets its code and a message naming the problem.
TEST_F(ServerTest, MergeUnitesFiltersMadeAlikeAndRefusesBadRequests) {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(10'000);
  spec.set_error_rate(0.01);
  ASSERT_OK(client_->Reserve("all", spec).status());
  ASSERT_OK(client_->ReserveLike("shard-1", "all").status());
  ASSERT_OK(client_->ReserveLike("shard-2", "all").status());
  std::vector<std::string> first, second;
  for (int i = 0; i < 500; ++i) {
    first.push_back(absl::StrCat("one-", i));
    second.push_back(absl::StrCat("two-", i));
  }
  ASSERT_OK(client_->Add("shard-1", first).status());
  ASSERT_OK(client_->Add("shard-2", second).status());
  absl::StatusOr<bloom::v1::FilterStats> merged = client_->Merge("all", {"shard-1", "shard-2"});
  ASSERT_OK(merged.status());
  EXPECT_EQ(merged->items_added(), 1000u);
  EXPECT_NEAR(merged->estimated_cardinality(), 1000, 50);
  server_->Kill();
  StartServer();
  ExpectAllPresent("all", first);
  ExpectAllPresent("all", second);

  auto stub = bloom::v1::BloomFilterService::NewStub(
      grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  auto reserve = [&](const std::string& name, bool with_spec, const std::string& like) {
    grpc::ClientContext context;
    bloom::v1::ReserveRequest request;
    request.set_name(name);
    if (with_spec) *request.mutable_spec() = spec;
    request.set_like(like);
    bloom::v1::ReserveResponse response;
    return stub->Reserve(&context, request, &response);
  };
  auto merge = [&](const std::string& target, const std::vector<std::string>& sources) {
    grpc::ClientContext context;
    bloom::v1::MergeRequest request;
    request.set_target(target);
    for (const std::string& source : sources) request.add_sources(source);
    bloom::v1::MergeResponse response;
    return stub->Merge(&context, request, &response);
  };
  struct Refused {
    grpc::Status status;
    grpc::StatusCode code;
    const char* says;
  };
  const std::vector<Refused> refused = {
      {reserve("x", true, "all"), grpc::StatusCode::INVALID_ARGUMENT, "spec or like, not both"},
      {reserve("x", false, ""), grpc::StatusCode::INVALID_ARGUMENT, "spec (or like) is required"},
      {reserve("x", false, "nope"), grpc::StatusCode::NOT_FOUND, "'nope'"},
      {reserve("x", false, "bad name!"), grpc::StatusCode::INVALID_ARGUMENT, "like"},
      {merge("all", {}), grpc::StatusCode::INVALID_ARGUMENT, "sources must not be empty"},
      {merge("all", std::vector<std::string>(65, "shard-1")), grpc::StatusCode::INVALID_ARGUMENT,
       "at most 64"},
      {merge("all", {"shard-1", "shard-1"}), grpc::StatusCode::INVALID_ARGUMENT, "twice"},
      {merge("all", {"all"}), grpc::StatusCode::INVALID_ARGUMENT, "itself"},
      {merge("", {"shard-1"}), grpc::StatusCode::INVALID_ARGUMENT, "target"},
      {merge("missing", {"shard-1"}), grpc::StatusCode::NOT_FOUND, "'missing'"},
      {merge("all", {"missing"}), grpc::StatusCode::NOT_FOUND, "'missing'"},
  };
  for (const Refused& r : refused) {
    EXPECT_EQ(r.status.error_code(), r.code) << r.status.error_message();
    EXPECT_TRUE(absl::StrContains(r.status.error_message(), r.says)) << r.status.error_message();
  }
  ASSERT_OK(client_->Reserve("stranger", spec).status());
  const grpc::Status stranger = merge("all", {"stranger"});
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(stranger.error_message(), "another seed"))
      << stranger.error_message();
  EXPECT_EQ(client_->Stats("all")->items_added(), 1000u);  // refusals changed nothing
}

TEST_F(ServerTest, HealthIsServingAndReflectionListsTheService) {
  auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  // grpc.health.v1.Health/Check, as Kubernetes' gRPC probes and grpcurl call it.
  absl::StatusOr<bool> serving = client_->Serving();
  ASSERT_OK(serving.status());
  EXPECT_TRUE(*serving);

  // grpc.reflection.v1alpha.ServerReflection: list_services (field 7, empty string).
  grpc::ClientContext reflection_context;
  grpc::CompletionQueue cq;
  auto call = generic.PrepareCall(
      &reflection_context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::Slice list_services(std::string("\x3a\x00", 2));
  grpc::ByteBuffer list_request(&list_services, 1);
  call->Write(list_request, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::ByteBuffer list_response;
  call->Read(&list_response, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(list_response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_TRUE(absl::StrContains(bytes, "bloom.v1.BloomFilterService")) << bytes;
  EXPECT_TRUE(absl::StrContains(bytes, "grpc.health.v1.Health")) << bytes;
  call->WritesDone(reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  grpc::Status finish;
  call->Finish(&finish, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

// grpc.health.v1 is the server's own service (service/health.h): Check knows the server ("")
// and its service and sends the server's version, NOT_FOUND for other names, INVALID_ARGUMENT for a
// request over 1 KiB; Watch streams SERVING, then NOT_SERVING when the server shuts down.
TEST_F(ServerTest, HealthCheckAndWatchFollowTheProtocol) {
  auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  auto request = [](const std::string& service) {
    grpc::health::v1::HealthCheckRequest message;
    message.set_service(service);
    grpc::Slice bytes(message.SerializeAsString());
    return grpc::ByteBuffer(&bytes, 1);
  };
  auto status_of = [](const grpc::ByteBuffer& response) {
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (response.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    grpc::health::v1::HealthCheckResponse message;
    return message.ParseFromString(bytes) ? static_cast<int>(message.status()) : -1;
  };
  std::string version;  // the last Check's bloom-server-version header
  auto check = [&](const grpc::ByteBuffer& body, grpc::ByteBuffer* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::CompletionQueue cq;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
        generic.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", body, &cq);
    call->StartCall();
    grpc::Status status;
    call->Finish(response, &status, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    const auto header = context.GetServerInitialMetadata().find("bloom-server-version");
    version = header == context.GetServerInitialMetadata().end()
                  ? ""
                  : std::string(header->second.data(), header->second.size());
    return status;
  };
  grpc::ByteBuffer response;
  ASSERT_TRUE(check(request(""), &response).ok());
  EXPECT_EQ(status_of(response), 1);  // SERVING
  EXPECT_EQ(version, BLOOM_VERSION);  // the release this server is, for operators
  ASSERT_TRUE(check(request("bloom.v1.BloomFilterService"), &response).ok());
  EXPECT_EQ(status_of(response), 1);
  EXPECT_EQ(check(request("nope"), &response).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Slice big(std::string(2048, 'x'));
  EXPECT_EQ(check(grpc::ByteBuffer(&big, 1), &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext watch_context;
  watch_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::CompletionQueue cq;
  auto watch = generic.PrepareCall(&watch_context, "/grpc.health.v1.Health/Watch", &cq);
  void* tag;
  bool ok;
  watch->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  watch->WriteLast(request(""), grpc::WriteOptions(), reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::ByteBuffer update;
  watch->Read(&update, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  EXPECT_EQ(status_of(update), 1);  // SERVING
  server_->Signal(SIGTERM);
  watch->Read(&update, reinterpret_cast<void*>(4));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  EXPECT_EQ(status_of(update), 2);  // NOT_SERVING
  grpc::Status finish;
  watch->Finish(&finish, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(ServerTest, SecondServerOnTheSameDataDirFailsFast) {
  std::string output;
  const int status =
      ServerProcess::RunToExit({"--listen=127.0.0.1:0", "--data_dir=" + data_dir_.path()}, &output);
  EXPECT_NE(status, 0);
  EXPECT_TRUE(absl::StrContains(output, "in use by another bloom-server")) << output;
  ASSERT_OK(client_->Reserve("still-here", Spec(10, 0.01)).status());
}

TEST_F(ServerTest, EnvironmentVariablesConfigureTheServerAndFlagsWin) {
  StartServer({}, {"BLOOM_MAX_BATCH=3", "BLOOM_LOG_LEVEL=debug"});
  ASSERT_OK(client_->Reserve("env", Spec(10, 0.01)).status());
  EXPECT_EQ(client_->Add("env", Items("e", 4)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_OK(client_->Add("env", Items("e", 3)).status());
  EXPECT_TRUE(absl::StrContains(server_->ReadLog(), "rpc Add name=env")) << server_->ReadLog();
  StartServer({"--max_batch=5"}, {"BLOOM_MAX_BATCH=3"});
  EXPECT_OK(client_->Add("env", Items("e", 5)).status());
  std::string output;
  EXPECT_EQ(ServerProcess::RunToExit({"--memory_limit=lots"}, &output), 2);
  EXPECT_TRUE(absl::StrContains(output, "memory_limit")) << output;
}

TEST_F(ServerTest, MemoryLimitRefusesFiltersThatDoNotFit) {
  StartServer({"--memory_limit=1Mi"});
  absl::Status status = client_->Reserve("big", Spec(10'000'000, 0.01)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(status.message(), "memory limit")) << status;
  EXPECT_OK(client_->Reserve("small", Spec(1000, 0.01)).status());

  // A share of the container's memory (Kubernetes passes the limit through the downward API).
  StartServer({"--memory_limit=50%"}, {"BLOOM_CONTAINER_MEMORY_BYTES=4000000"});
  EXPECT_TRUE(absl::StrContains(server_->ReadLog(), "memory_limit=2000000")) << server_->ReadLog();
  EXPECT_EQ(client_->Reserve("too-big", Spec(2'000'000, 0.01)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_OK(client_->Reserve("fits", Spec(100'000, 0.01)).status());
}

}  // namespace

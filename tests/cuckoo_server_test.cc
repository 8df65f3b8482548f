// CUCKOO filters over the wire: the real bloom-server binary, a fresh data dir, port 0.
// Reserve and Add with kind CUCKOO, Remove, Count, Stats, Pipeline removes and counts, kill -9,
// and every refusal with its code and message.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/bloom_client.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloomclient::BloomClient;
using bloomtest::ServerProcess;

bloom::v1::FilterSpec CuckooSpec(uint64_t capacity, double error_rate) {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(capacity);
  spec.set_error_rate(error_rate);
  spec.set_kind(bloom::v1::FILTER_KIND_CUCKOO);
  return spec;
}

std::vector<std::string> Items(absl::string_view prefix, int begin, int end) {
  std::vector<std::string> items;
  for (int i = begin; i < end; ++i) items.push_back(absl::StrCat(prefix, i));
  return items;
}

int CountTrue(const std::vector<bool>& values) {
  return static_cast<int>(std::count(values.begin(), values.end(), true));
}

class CuckooServerTest : public ::testing::Test {
 protected:
  void StartServer(const std::vector<std::string>& args = {"--max_batch=1000"}) {
    server_.reset();
    server_ = ServerProcess::Start(data_dir_.path(), args);
    ASSERT_NE(server_, nullptr);
    client_ = BloomClient::Connect(server_->target());
    stub_ = bloom::v1::BloomFilterService::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }
  void SetUp() override { StartServer(); }
  // Sends `request` alone on a new Pipeline stream and returns the one response to it.
  absl::StatusOr<bloom::v1::PipelineResponse> PipelineOnce(
      const bloom::v1::PipelineRequest& request) {
    grpc::ClientContext context;
    auto stream = stub_->Pipeline(&context);
    if (!stream->Write(request)) return absl::UnavailableError("the request was not written");
    stream->WritesDone();
    bloom::v1::PipelineResponse response;
    const bool read = stream->Read(&response);
    RETURN_IF_ERROR(bloomclient::FromGrpcStatus(stream->Finish()));
    if (!read) return absl::InternalError("the stream ended without a response");
    return response;
  }

  bloomtest::TempDir data_dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<BloomClient> client_;
  std::unique_ptr<bloom::v1::BloomFilterService::Stub> stub_;
};

TEST_F(CuckooServerTest, AddRemoveCountAndStatsSurviveKillNine) {
  absl::StatusOr<bloom::v1::ReserveResponse> reserved =
      client_->Reserve("blocked", CuckooSpec(10'000, 0.001));
  ASSERT_OK(reserved.status());
  EXPECT_EQ(reserved->stats().spec().kind(), bloom::v1::FILTER_KIND_CUCKOO);
  const std::vector<std::string> kept = Items("kept-", 0, 1000);
  const std::vector<std::string> lifted = Items("lifted-", 0, 1000);
  ASSERT_OK(client_->Add("blocked", kept).status());
  absl::StatusOr<std::vector<bool>> added = client_->Add("blocked", lifted);
  ASSERT_OK(added.status());
  EXPECT_EQ(CountTrue(*added), 1000) << "every add of a cuckoo filter adds a copy";
  ASSERT_OK(client_->Add("blocked", {"twice", "twice"}).status());
  absl::StatusOr<std::vector<bool>> removed = client_->Remove("blocked", lifted);
  ASSERT_OK(removed.status());
  EXPECT_EQ(CountTrue(*removed), 1000);
  EXPECT_EQ(*client_->Remove("blocked", {"never-added-1"}), std::vector<bool>{false});

  server_->Kill();
  StartServer();
  EXPECT_EQ(CountTrue(*client_->MightContain("blocked", kept)), 1000);
  EXPECT_LE(CountTrue(*client_->MightContain("blocked", lifted)), 5);
  absl::StatusOr<std::vector<uint32_t>> counts = client_->Count("blocked", {"twice", "kept-1"});
  ASSERT_OK(counts.status());
  EXPECT_EQ(*counts, (std::vector<uint32_t>{2, 1}));
  absl::StatusOr<bloom::v1::FilterStats> stats = client_->Stats("blocked");
  ASSERT_OK(stats.status());
  EXPECT_EQ(stats->spec().kind(), bloom::v1::FILTER_KIND_CUCKOO);
  EXPECT_EQ(stats->items_added(), 1002u);
  ASSERT_EQ(stats->sub_filter_stats_size(), 1);
  // 0.1% * 0.5 for the first table of a scaling chain: 14-bit fingerprints.
  EXPECT_EQ(stats->sub_filter_stats(0).fingerprint_bits(), 14u);
  EXPECT_GT(stats->sub_filter_stats(0).buckets(), 10'000u / 4);
  EXPECT_NEAR(stats->fill_ratio(),
              1002.0 / (4.0 * static_cast<double>(stats->sub_filter_stats(0).buckets())), 1e-9);

  absl::StatusOr<bloom::v1::ListResponse> list = client_->List("blocked");
  ASSERT_OK(list.status());
  ASSERT_EQ(list->filters_size(), 1);
  EXPECT_EQ(list->filters(0).spec().kind(), bloom::v1::FILTER_KIND_CUCKOO);
}

// With --sync a Remove is answered after the fsync it shares with other writes (made outside
// the filter's lock), and what it answered survives kill -9.
TEST_F(CuckooServerTest, UnderSyncARemoveAnsweredSurvivesKillNine) {
  StartServer({"--sync"});
  ASSERT_OK(client_->Reserve("blocked", CuckooSpec(1000, 0.001)).status());
  ASSERT_OK(client_->Add("blocked", Items("x-", 0, 100)).status());
  absl::StatusOr<std::vector<bool>> removed = client_->Remove("blocked", Items("x-", 0, 50));
  ASSERT_OK(removed.status());
  EXPECT_EQ(CountTrue(*removed), 50);
  server_->Kill();
  StartServer({"--sync"});
  absl::StatusOr<std::vector<uint32_t>> gone = client_->Count("blocked", Items("x-", 0, 50));
  ASSERT_OK(gone.status());
  EXPECT_LE(std::count_if(gone->begin(), gone->end(), [](uint32_t c) { return c > 0; }), 1);
  EXPECT_EQ(CountTrue(*client_->MightContain("blocked", Items("x-", 50, 100))), 50);
}

TEST_F(CuckooServerTest, CreateIfMissingAndPipelineRemoves) {
  const bloom::v1::FilterSpec spec = CuckooSpec(1000, 0.01);
  ASSERT_OK(client_->Add("feed:u1", {"a", "b", "c"}, &spec).status());
  bloom::v1::PipelineRequest request;
  request.set_id(1);
  request.mutable_remove()->set_name("feed:u1");
  request.mutable_remove()->add_items("a");
  request.mutable_remove()->add_items("z");
  bloom::v1::PipelineRequest* check = request.add_more();
  check->set_id(2);
  check->mutable_might_contain()->set_name("feed:u1");
  check->mutable_might_contain()->add_items("a");
  check->mutable_might_contain()->add_items("b");
  bloom::v1::PipelineRequest* on_bloom = request.add_more();
  on_bloom->set_id(3);
  on_bloom->mutable_remove()->set_name("missing");
  on_bloom->mutable_remove()->add_items("a");
  absl::StatusOr<bloom::v1::PipelineResponse> answered = PipelineOnce(request);
  ASSERT_OK(answered.status());
  const bloom::v1::PipelineResponse& response = *answered;
  ASSERT_TRUE(response.has_remove()) << response.DebugString();
  EXPECT_EQ(
      std::vector<bool>(response.remove().removed().begin(), response.remove().removed().end()),
      (std::vector<bool>{true, false}));
  EXPECT_GT(response.remove().sequence(), 0u);
  ASSERT_EQ(response.more_size(), 2);
  EXPECT_EQ(std::vector<bool>(response.more(0).might_contain().present().begin(),
                              response.more(0).might_contain().present().end()),
            (std::vector<bool>{false, true}));
  EXPECT_EQ(response.more(1).error().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
}

// A Pipeline count answers what the unary Count would, after the adds and removes sent before
// it on the stream, and fails alone as the unary call fails; the stream's headers say the
// server takes counts (older servers end the stream on one).
TEST_F(CuckooServerTest, PipelineCountsSeeTheOperationsBeforeThemAndFailAlone) {
  const bloom::v1::FilterSpec spec = CuckooSpec(1000, 0.01);
  bloom::v1::FilterSpec bloom_spec;
  bloom_spec.set_capacity(1000);
  bloom_spec.set_error_rate(0.01);
  ASSERT_OK(client_->Reserve("bloom", bloom_spec).status());
  uint64_t next_id = 1;
  bloom::v1::PipelineRequest request;
  auto operation = [&]() -> bloom::v1::PipelineRequest* {
    bloom::v1::PipelineRequest* op = next_id == 1 ? &request : request.add_more();
    op->set_id(next_id++);
    return op;
  };
  auto count = [&](const std::string& name, const std::vector<std::string>& items) {
    bloom::v1::CountRequest* count = operation()->mutable_count();
    count->set_name(name);
    for (const std::string& item : items) count->add_raw_items(item);
  };
  bloom::v1::AddRequest* add = operation()->mutable_add();
  add->set_name("feed:u2");
  for (const char* item : {"a", "a", "b"}) add->add_items(item);
  *add->mutable_create_if_missing() = spec;
  count("feed:u2", {"a", "b", "z"});  // 1: after the add
  bloom::v1::RemoveRequest* remove = operation()->mutable_remove();
  remove->set_name("feed:u2");
  remove->add_items("a");
  count("feed:u2", {"a"});  // 3: after the remove
  count("bloom", {"a"});
  count("missing", {"a"});
  count("feed:u2", std::vector<std::string>(1001, "x"));  // --max_batch=1000
  count("feed:u2", {"b"});                                // the stream goes on

  grpc::ClientContext context;
  auto stream = stub_->Pipeline(&context);
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  bloom::v1::PipelineResponse response;
  ASSERT_TRUE(stream->Read(&response));
  const grpc::Status finished = stream->Finish();
  ASSERT_TRUE(finished.ok()) << finished.error_message();
  const auto& headers = context.GetServerInitialMetadata();
  ASSERT_NE(headers.find("bloom-pipeline-count"), headers.end());
  EXPECT_EQ(headers.find("bloom-pipeline-count")->second, "1");

  ASSERT_EQ(response.more_size(), 7) << response.DebugString();
  auto counts = [&](int more) {
    const bloom::v1::PipelineResponse& answer = response.more(more);
    EXPECT_TRUE(answer.has_count()) << more << ": " << answer.DebugString();
    return std::vector<uint32_t>(answer.count().counts().begin(), answer.count().counts().end());
  };
  ASSERT_TRUE(response.has_add()) << response.DebugString();
  EXPECT_EQ(counts(0), (std::vector<uint32_t>{2, 1, 0}));
  EXPECT_EQ(response.more(1).remove().removed_size(), 1);
  EXPECT_EQ(counts(2), (std::vector<uint32_t>{1}));
  const struct {
    int more;
    grpc::StatusCode code;
    const char* says;
  } kRefused[] = {{3, grpc::StatusCode::FAILED_PRECONDITION, "BLOOM filter"},
                  {4, grpc::StatusCode::NOT_FOUND, "'missing'"},
                  {5, grpc::StatusCode::INVALID_ARGUMENT, "items"}};
  for (const auto& refused : kRefused) {
    const bloom::v1::PipelineResponse& answer = response.more(refused.more);
    ASSERT_TRUE(answer.has_error()) << refused.more << ": " << answer.DebugString();
    EXPECT_EQ(answer.error().code(), static_cast<int>(refused.code)) << answer.error().message();
    EXPECT_TRUE(absl::StrContains(answer.error().message(), refused.says))
        << answer.error().message();
  }
  EXPECT_EQ(counts(6), (std::vector<uint32_t>{1}));
  // The unary call agrees.
  EXPECT_EQ(*client_->Count("feed:u2", {"a", "b", "z"}), (std::vector<uint32_t>{1, 1, 0}));
}

// An item is its bytes whichever field carries it: `items` that are not valid UTF-8 (C++
// protobuf sends them) are removed and counted as their bytes, unary and in Pipeline
// (protos/wire/items_as_bytes.h), not refused with an empty UNIMPLEMENTED.
TEST_F(CuckooServerTest, ItemsThatAreNotUtf8AreRemovedAndCountedAsTheirBytes) {
  const std::string binary("\xff\xfe\x00", 3), other("\xfd\xfc", 2);
  ASSERT_OK(client_->Reserve("binary", CuckooSpec(1000, 0.01)).status());
  ASSERT_OK(client_->Add("binary", {binary, binary, other}).status());
  {
    grpc::ClientContext context;
    bloom::v1::CountRequest request;
    request.set_name("binary");
    request.add_items(binary);
    request.add_raw_items(other);
    bloom::v1::CountResponse response;
    const grpc::Status status = stub_->Count(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
    EXPECT_EQ(std::vector<uint32_t>(response.counts().begin(), response.counts().end()),
              (std::vector<uint32_t>{2, 1}));
  }
  {
    grpc::ClientContext context;
    bloom::v1::RemoveRequest request;
    request.set_name("binary");
    request.add_items(binary);
    bloom::v1::RemoveResponse response;
    const grpc::Status status = stub_->Remove(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
    ASSERT_EQ(response.removed_size(), 1);
    EXPECT_TRUE(response.removed(0));
  }
  {
    bloom::v1::PipelineRequest request;
    request.set_id(7);
    request.mutable_remove()->set_name("binary");
    request.mutable_remove()->add_items(other);
    absl::StatusOr<bloom::v1::PipelineResponse> response = PipelineOnce(request);
    ASSERT_OK(response.status());
    ASSERT_TRUE(response->has_remove()) << response->DebugString();
    EXPECT_TRUE(response->remove().removed(0));
  }
  EXPECT_EQ(*client_->Count("binary", {binary, other}), (std::vector<uint32_t>{1, 0}));
}

TEST_F(CuckooServerTest, RefusalsNameTheProblem) {
  bloom::v1::FilterSpec bloom_spec;
  bloom_spec.set_capacity(1000);
  bloom_spec.set_error_rate(0.01);
  ASSERT_OK(client_->Reserve("bloom", bloom_spec).status());
  ASSERT_OK(client_->Reserve("cuckoo", CuckooSpec(1000, 0.01)).status());
  auto remove = [&](const std::string& name, const std::vector<std::string>& items) {
    grpc::ClientContext context;
    bloom::v1::RemoveRequest request;
    request.set_name(name);
    for (const std::string& item : items) request.add_items(item);
    bloom::v1::RemoveResponse response;
    return stub_->Remove(&context, request, &response);
  };
  auto count = [&](const std::string& name, const std::vector<std::string>& items) {
    grpc::ClientContext context;
    bloom::v1::CountRequest request;
    request.set_name(name);
    for (const std::string& item : items) request.add_items(item);
    bloom::v1::CountResponse response;
    return stub_->Count(&context, request, &response);
  };
  auto reserve = [&](bloom::v1::FilterSpec spec) {
    grpc::ClientContext context;
    bloom::v1::ReserveRequest request;
    request.set_name("new");
    *request.mutable_spec() = spec;
    bloom::v1::ReserveResponse response;
    return stub_->Reserve(&context, request, &response);
  };
  bloom::v1::FilterSpec windowed = CuckooSpec(1000, 0.01);
  windowed.mutable_window()->set_seconds(3600);
  bloom::v1::FilterSpec unknown_kind = CuckooSpec(1000, 0.01);
  unknown_kind.set_kind(static_cast<bloom::v1::FilterKind>(7));
  bloom::v1::FilterSpec too_fine = CuckooSpec(1000, 1e-12);
  struct Refused {
    grpc::Status status;
    grpc::StatusCode code;
    const char* says;
  };
  const std::vector<Refused> refused = {
      {remove("bloom", {"a"}), grpc::StatusCode::FAILED_PRECONDITION, "BLOOM filter"},
      {count("bloom", {"a"}), grpc::StatusCode::FAILED_PRECONDITION, "BLOOM filter"},
      {remove("missing", {"a"}), grpc::StatusCode::NOT_FOUND, "'missing'"},
      {count("missing", {"a"}), grpc::StatusCode::NOT_FOUND, "'missing'"},
      {remove("cuckoo", {}), grpc::StatusCode::INVALID_ARGUMENT, "items"},
      {count("cuckoo", std::vector<std::string>(1001, "x")), grpc::StatusCode::INVALID_ARGUMENT,
       "items"},
      {remove("bad name!", {"a"}), grpc::StatusCode::INVALID_ARGUMENT, "name"},
      {reserve(windowed), grpc::StatusCode::INVALID_ARGUMENT, "window"},
      {reserve(unknown_kind), grpc::StatusCode::INVALID_ARGUMENT, "kind"},
      {reserve(too_fine), grpc::StatusCode::RESOURCE_EXHAUSTED, "fingerprints"},
      {reserve(bloom_spec), grpc::StatusCode::OK, ""},
  };
  for (const Refused& r : refused) {
    EXPECT_EQ(r.status.error_code(), r.code) << r.status.error_message();
    EXPECT_TRUE(absl::StrContains(r.status.error_message(), r.says)) << r.status.error_message();
  }
  // A cuckoo filter is not a Bloom filter of the same numbers.
  absl::Status other_kind = client_->Reserve("cuckoo", bloom_spec).status();
  EXPECT_TRUE(absl::IsAlreadyExists(other_kind)) << other_kind;
  EXPECT_TRUE(absl::IsFailedPrecondition(client_->Merge("cuckoo", {"bloom"}).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(client_->Merge("bloom", {"cuckoo"}).status()));
  // A cuckoo filter's dump imports as a cuckoo filter, and is not merged into another.
  ASSERT_OK(client_->Add("cuckoo", {"x", "x"}).status());
  std::stringstream dump;
  ASSERT_OK(client_->Export("cuckoo", dump));
  absl::StatusOr<bloom::v1::FilterStats> copy = client_->Import("cuckoo-copy", dump);
  ASSERT_OK(copy.status());
  EXPECT_EQ(copy->spec().kind(), bloom::v1::FILTER_KIND_CUCKOO);
  EXPECT_EQ(*client_->Count("cuckoo-copy", {"x"}), std::vector<uint32_t>{2});
  dump.clear();
  dump.seekg(0);
  EXPECT_TRUE(absl::IsFailedPrecondition(client_->Import("cuckoo", dump, true).status()));
}

}  // namespace

// PipelineBatch without gRPC: runs of operations on one filter are served together and each
// operation still gets the answer it would get alone (a merged run that fails is served again
// one by one), answers stay in request order, roles are checked per add, counts see the adds
// before them, and an abandoned batch stops.
#include "service/pipeline_batch.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/bloom_service.h"
#include "tests/support/testing.h"

namespace service {
namespace {

using bloom::v1::PipelineRequest;
using bloom::v1::PipelineResponse;

// An operation as the stream reads it: the request's encoding, read as views.
PipelineBatch::Operation OperationOf(const PipelineRequest& request) {
  auto bytes = std::make_shared<const std::string>(request.SerializeAsString());
  absl::StatusOr<std::shared_ptr<const PipelineBatch::Message>> message =
      PipelineBatch::Read(bytes, *bytes, /*max_operations=*/0);
  EXPECT_TRUE(message.ok()) << message.status();
  PipelineBatch::Operation operation;
  operation.message = *std::move(message);
  operation.bytes = operation.message == nullptr ? 0 : bytes->size();
  return operation;
}

PipelineBatch::Operation AddOf(const std::string& name, const std::vector<std::string>& items,
                               bool create = false) {
  PipelineRequest request;
  bloom::v1::AddRequest* add = request.mutable_add();
  add->set_name(name);
  for (const std::string& item : items) add->add_items(item);
  if (create) {
    add->mutable_create_if_missing()->set_capacity(1000);
    add->mutable_create_if_missing()->set_error_rate(0.01);
  }
  return OperationOf(request);
}

PipelineBatch::Operation CheckOf(const std::string& name, const std::vector<std::string>& items,
                                 bool absent_if_missing = false) {
  PipelineRequest request;
  bloom::v1::MightContainRequest* check = request.mutable_might_contain();
  check->set_name(name);
  for (const std::string& item : items) check->add_items(item);
  check->set_absent_if_missing(absent_if_missing);
  return OperationOf(request);
}

PipelineBatch::Operation CountOf(const std::string& name, const std::vector<std::string>& items) {
  PipelineRequest request;
  bloom::v1::CountRequest* count = request.mutable_count();
  count->set_name(name);
  for (const std::string& item : items) count->add_items(item);
  return OperationOf(request);
}

std::vector<bool> Added(const PipelineResponse& response) {
  return {response.add().added().begin(), response.add().added().end()};
}
std::vector<bool> Present(const PipelineResponse& response) {
  return {response.might_contain().present().begin(), response.might_contain().present().end()};
}

class PipelineBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = false;
    absl::StatusOr<std::unique_ptr<storage::FilterStore>> store =
        storage::FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
    service_ = std::make_unique<BloomService>(store_.get(), ServiceLimits{100, 64});
  }

  // Serves `operations` as the group committer would: queue, one write, answers.
  std::vector<PipelineResponse> Serve(std::vector<PipelineBatch::Operation> operations,
                                      Role role = Role::kWrite) {
    PipelineBatch batch(service_.get(), Caller{role, "test"});
    batch.Take(operations);
    EXPECT_TRUE(operations.empty());
    absl::StatusOr<std::unique_ptr<storage::OperationBatch>> store_batch = store_->StartBatch();
    EXPECT_OK(store_batch.status());
    const std::atomic<bool> abandoned{false};
    batch.Queue(**store_batch, abandoned);
    (*store_batch)->Flush();
    batch.Answer(**store_batch);
    return batch.responses();
  }

  bloomtest::TempDir dir_;
  std::unique_ptr<storage::FilterStore> store_;
  std::unique_ptr<BloomService> service_;
};

TEST_F(PipelineBatchTest, ARunOfAddsAnswersEachOperationItsOwnItems) {
  std::vector<PipelineBatch::Operation> operations;
  operations.push_back(AddOf("f", {"a", "b"}, /*create=*/true));
  operations.push_back(AddOf("f", {"c"}, true));
  operations.push_back(AddOf("f", {"a", "d", "e"}, true));
  operations.push_back(CheckOf("f", {"a", "z"}));
  const std::vector<PipelineResponse> responses = Serve(std::move(operations));
  ASSERT_EQ(responses.size(), 4u);
  EXPECT_EQ(Added(responses[0]), (std::vector<bool>{true, true}));
  EXPECT_EQ(Added(responses[1]), (std::vector<bool>{true}));
  EXPECT_EQ(Added(responses[2]), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(Present(responses[3]), (std::vector<bool>{true, false}));  // sees the adds before it
}

TEST_F(PipelineBatchTest, AFailingMergedRunIsServedOneByOne) {
  bloom::FilterParams full{2, 0.01, 0, /*non_scaling=*/true};
  ASSERT_OK(store_->Reserve("small", full).status());
  std::vector<PipelineBatch::Operation> operations;
  operations.push_back(AddOf("small", {"x", "y"}));  // fits alone
  operations.push_back(AddOf("small", {"z"}));       // the filter is full then
  operations.push_back(AddOf("small", {}));          // invalid: no items
  const std::vector<PipelineResponse> responses = Serve(std::move(operations));
  ASSERT_EQ(responses.size(), 3u);
  EXPECT_EQ(Added(responses[0]), (std::vector<bool>{true, true}));
  EXPECT_EQ(responses[1].error().code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(responses[2].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
}

TEST_F(PipelineBatchTest, ChecksOfAMissingFilterAnswerAsTheirOwnAbsentIfMissingSays) {
  std::vector<PipelineBatch::Operation> operations;
  operations.push_back(CheckOf("nobody", {"a", "b"}, /*absent_if_missing=*/true));
  operations.push_back(CheckOf("nobody", {"a"}, false));
  operations.push_back(CheckOf("nobody", {"c"}, true));
  const std::vector<PipelineResponse> responses = Serve(std::move(operations));
  ASSERT_EQ(responses.size(), 3u);
  EXPECT_EQ(Present(responses[0]), (std::vector<bool>{false, false}));
  EXPECT_EQ(responses[1].error().code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(Present(responses[2]), (std::vector<bool>{false}));
  EXPECT_EQ(store_->num_filters(), 0u);  // nothing created
}

TEST_F(PipelineBatchTest, AReadTokensAddsAreRefusedAndItsChecksServed) {
  ASSERT_OK(store_->Reserve("f", {1000, 0.01}).status());
  ASSERT_OK(store_->Add("f", {"a"}, nullptr).status());
  std::vector<PipelineBatch::Operation> operations;
  operations.push_back(AddOf("f", {"b"}));
  operations.push_back(CheckOf("f", {"a", "b"}));
  const std::vector<PipelineResponse> responses = Serve(std::move(operations), Role::kRead);
  EXPECT_EQ(responses[0].error().code(), static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(Present(responses[1]), (std::vector<bool>{true, false}));  // b was not added
}

// A count sees the adds queued before it in the batch (they are flushed first, as for a check),
// fails alone as the unary call would, and needs only a read token.
TEST_F(PipelineBatchTest, CountsSeeTheAddsBeforeThemAndFailAlone) {
  bloom::FilterParams cuckoo{1000, 0.01};
  cuckoo.kind = bloom::FilterKind::kCuckoo;
  ASSERT_OK(store_->Reserve("c", cuckoo).status());
  ASSERT_OK(store_->Reserve("b", {1000, 0.01}).status());
  std::vector<PipelineBatch::Operation> operations;
  operations.push_back(AddOf("c", {"a", "a", "b"}));
  operations.push_back(CountOf("c", {"a", "b", "z"}));
  operations.push_back(CountOf("c", {"b"}));  // not merged with the one before
  operations.push_back(CountOf("b", {"a"}));
  operations.push_back(CountOf("nobody", {"a"}));
  operations.push_back(CountOf("c", {}));
  std::vector<PipelineResponse> responses = Serve(std::move(operations));
  ASSERT_EQ(responses.size(), 6u);
  auto counts = [](const PipelineResponse& response) {
    return std::vector<uint32_t>(response.count().counts().begin(),
                                 response.count().counts().end());
  };
  EXPECT_EQ(counts(responses[1]), (std::vector<uint32_t>{2, 1, 0}));
  EXPECT_EQ(counts(responses[2]), (std::vector<uint32_t>{1}));
  EXPECT_EQ(responses[3].error().code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(responses[4].error().code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(responses[5].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));

  operations.clear();
  operations.push_back(CountOf("c", {"a"}));
  responses = Serve(std::move(operations), Role::kRead);
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(counts(responses[0]), (std::vector<uint32_t>{2}));
}

TEST_F(PipelineBatchTest, AnAbandonedBatchStopsAndFailAnswersEveryOperation) {
  PipelineBatch batch(service_.get(), Caller{Role::kWrite, ""});
  std::vector<PipelineBatch::Operation> operations;
  operations.push_back(AddOf("f", {"a"}, true));
  operations.push_back(CheckOf("f", {"a"}));
  batch.Take(operations);
  EXPECT_TRUE(batch.has_writes());
  absl::StatusOr<std::unique_ptr<storage::OperationBatch>> store_batch = store_->StartBatch();
  ASSERT_OK(store_batch.status());
  const std::atomic<bool> abandoned{true};
  batch.Queue(**store_batch, abandoned);
  EXPECT_EQ(batch.size(), 0u);
  (*store_batch)->Flush();
  EXPECT_EQ(store_->num_filters(), 0u);  // nothing was served

  batch.Take(operations);  // empty now
  operations.push_back(CheckOf("f", {"a"}));
  operations.push_back(CheckOf("g", {"a"}));
  batch.Take(operations);
  EXPECT_FALSE(batch.has_writes());
  batch.Fail(absl::UnavailableError("closing"));
  for (const PipelineResponse& response : batch.responses()) {
    EXPECT_EQ(response.error().code(), static_cast<int>(absl::StatusCode::kUnavailable));
    EXPECT_EQ(response.error().message(), "closing");
  }
}

}  // namespace
}  // namespace service

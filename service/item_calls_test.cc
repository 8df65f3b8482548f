// ItemCalls through a BloomServer in this process, with gRPC's "poll" strategy as bloom-server
// runs it: many connections served by fewer queue threads get their own answers, a request that
// does not parse gets its code, and a shutdown while clients keep adding answers every call and
// keeps every add it acknowledged.
#include "service/item_calls.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "tests/support/testing.h"

namespace service {
namespace {

// As bloom-server's main() does, before gRPC starts (static initialisation, before main).
const bool poll_strategy_set = [] { return setenv("GRPC_POLL_STRATEGY", "poll", 1) == 0; }();

class ItemCallsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(poll_strategy_set);
    OpenStore();
  }

  void OpenStore() {
    storage::StoreOptions options;
    options.data_dir = dir_.path();
    absl::StatusOr<std::unique_ptr<storage::FilterStore>> store =
        storage::FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
  }

  void StartServer(int threads, const TokenAuthenticator* auth = nullptr) {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.item_call_threads = threads;
    options.hooks.auth = auth;
    absl::StatusOr<std::unique_ptr<BloomServer>> server = BloomServer::Start(store_.get(), options);
    ASSERT_OK(server.status());
    server_ = *std::move(server);
  }

  // A stub on a connection of its own (channels with different arguments share none).
  std::unique_ptr<bloom::v1::BloomFilterService::Stub> Connect(int connection) {
    grpc::ChannelArguments arguments;
    arguments.SetInt("bloom.test.connection", connection);
    return bloom::v1::BloomFilterService::NewStub(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                  grpc::InsecureChannelCredentials(), arguments));
  }

  static void SetCreatingSpec(bloom::v1::AddRequest& add) {
    add.set_name("f");
    bloom::v1::FilterSpec* spec = add.mutable_create_if_missing();
    spec->set_capacity(100'000);
    spec->set_error_rate(1e-6);
  }

  bloomtest::TempDir dir_;
  std::unique_ptr<storage::FilterStore> store_;
  std::unique_ptr<BloomServer> server_;
};

TEST_F(ItemCallsTest, ManyConnectionsOnTwoThreadsGetTheirOwnAnswers) {
  StartServer(2);
  constexpr int kClients = 8;
  constexpr int kCalls = 40;
  constexpr int kBatch = 25;
  std::vector<std::thread> clients;
  clients.reserve(kClients);
  std::vector<std::string> failures(kClients);
  for (int client = 0; client < kClients; ++client) {
    clients.emplace_back([&, client] {
      std::unique_ptr<bloom::v1::BloomFilterService::Stub> stub = Connect(client);
      for (int call = 0; call < kCalls; ++call) {
        bloom::v1::AddRequest add;
        SetCreatingSpec(add);
        bloom::v1::MightContainRequest check;
        check.set_name("f");
        for (int i = 0; i < kBatch; ++i) {
          add.add_items(absl::StrCat("c", client, "-", call, "-", i));
          check.add_items(absl::StrCat("c", client, "-", call, "-", i));
          check.add_items(absl::StrCat("never-", client, "-", call, "-", i));
        }
        grpc::ClientContext add_context;
        bloom::v1::AddResponse added;
        grpc::Status status = stub->Add(&add_context, add, &added);
        if (!status.ok() || added.added_size() != kBatch || added.sequence() == 0) {
          failures[client] = absl::StrCat("add ", call, ": ", status.error_message(), " (",
                                          added.added_size(), " answers)");
          return;
        }
        grpc::ClientContext check_context;
        bloom::v1::MightContainResponse present;
        status = stub->MightContain(&check_context, check, &present);
        if (!status.ok() || present.present_size() != 2 * kBatch) {
          failures[client] = absl::StrCat("check ", call, ": ", status.error_message());
          return;
        }
        for (int i = 0; i < kBatch; ++i) {
          // Added items read present; at 1e-6, the never-added ones read absent.
          if (!present.present(2 * i) || present.present(2 * i + 1)) {
            failures[client] = absl::StrCat("check ", call, " item ", i, " answered wrong");
            return;
          }
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  for (int client = 0; client < kClients; ++client) EXPECT_EQ(failures[client], "") << client;
}

TEST_F(ItemCallsTest, RequestsThatDoNotParseGetInvalidArgument) {
  StartServer(1);
  grpc::GenericStub stub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                             grpc::InsecureChannelCredentials()));
  const std::string garbage = "\x0a\xff\xff\xff\xff\x0f not a message";
  for (const char* method :
       {"/bloom.v1.BloomFilterService/Add", "/bloom.v1.BloomFilterService/MightContain"}) {
    grpc::Slice slice(garbage);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    std::mutex mu;
    std::condition_variable done_cv;
    bool done = false;
    grpc::Status status;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status answered) {
                     std::lock_guard<std::mutex> lock(mu);
                     status = std::move(answered);
                     done = true;
                     done_cv.notify_one();
                   });
    std::unique_lock<std::mutex> lock(mu);
    done_cv.wait(lock, [&] { return done; });
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_NE(status.error_message().find("not a well-formed bloom.v1."), std::string::npos)
        << status.error_message();
  }
  // The server still serves.
  std::unique_ptr<bloom::v1::BloomFilterService::Stub> client = Connect(0);
  bloom::v1::AddRequest add;
  SetCreatingSpec(add);
  add.add_items("x");
  grpc::ClientContext context;
  bloom::v1::AddResponse added;
  ASSERT_TRUE(client->Add(&context, add, &added).ok());
}

TEST_F(ItemCallsTest, TokensAndRolesApplyToAsyncCalls) {
  const std::string tokens = dir_.path() + "/tokens";
  std::ofstream(tokens) << TokenAuthenticator::HashToken("writer-token") << " write\n"
                        << TokenAuthenticator::HashToken("reader-token") << " read\n";
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Load(tokens);
  ASSERT_OK(auth.status());
  StartServer(2, auth->get());
  std::unique_ptr<bloom::v1::BloomFilterService::Stub> stub = Connect(0);
  const auto add = [&](const char* token) {
    bloom::v1::AddRequest request;
    SetCreatingSpec(request);
    request.add_items("x");
    grpc::ClientContext context;
    if (token != nullptr) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    bloom::v1::AddResponse response;
    return stub->Add(&context, request, &response).error_code();
  };
  const auto check = [&](const char* token) {
    bloom::v1::MightContainRequest request;
    request.set_name("f");
    request.add_items("x");
    grpc::ClientContext context;
    if (token != nullptr) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    bloom::v1::MightContainResponse response;
    const grpc::Status status = stub->MightContain(&context, request, &response);
    return status.ok() && response.present_size() == 1 && response.present(0)
               ? grpc::StatusCode::OK
               : (status.ok() ? grpc::StatusCode::DATA_LOSS : status.error_code());
  };
  EXPECT_EQ(add(nullptr), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(add("wrong-token"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(add("reader-token"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(add("writer-token"), grpc::StatusCode::OK);
  EXPECT_EQ(check(nullptr), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(check("reader-token"), grpc::StatusCode::OK);  // and the add is there
  server_.reset();  // the server goes before the authenticator it uses
}

TEST_F(ItemCallsTest, ShutdownWhileAddingAnswersEveryCallAndKeepsWhatItAcknowledged) {
  StartServer(2);
  constexpr int kClients = 4;
  std::vector<std::vector<std::string>> acknowledged(kClients);
  std::vector<std::string> unexpected(kClients);
  // Calls acknowledged so far, per client: on a loaded machine one client's first call can come
  // after the others' hundredth, so the shutdown waits for each of them.
  std::vector<std::atomic<int>> answered(kClients);
  std::vector<std::thread> clients;
  clients.reserve(kClients);
  for (int client = 0; client < kClients; ++client) {
    clients.emplace_back([&, client] {
      std::unique_ptr<bloom::v1::BloomFilterService::Stub> stub = Connect(client);
      for (int call = 0;; ++call) {
        bloom::v1::AddRequest add;
        SetCreatingSpec(add);
        for (int i = 0; i < 10; ++i) add.add_items(absl::StrCat("c", client, "-", call, "-", i));
        grpc::ClientContext context;
        // A call the shutdown left unanswered would fail this test by its deadline.
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
        bloom::v1::AddResponse added;
        const grpc::Status status = stub->Add(&context, add, &added);
        if (status.ok()) {
          acknowledged[client].insert(acknowledged[client].end(), add.items().begin(),
                                      add.items().end());
          answered[client].fetch_add(1);
          continue;
        }
        // Refused while draining, cut by the transport's shutdown, or no server any more.
        if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
            status.error_code() != grpc::StatusCode::CANCELLED) {
          unexpected[client] = absl::StrCat(status.error_code(), ": ", status.error_message());
        }
        return;
      }
    });
  }
  // Shut down in the middle of the load: once every client's calls are being answered.
  EXPECT_TRUE(bloomtest::WaitFor([&] {
    for (const std::atomic<int>& calls : answered) {
      if (calls.load() < 50) return false;
    }
    return true;
  }));
  server_->Shutdown(absl::Seconds(2));
  for (std::thread& client : clients) client.join();
  server_.reset();
  ASSERT_OK(store_->Close());
  store_.reset();

  OpenStore();
  StartServer(1);
  std::unique_ptr<bloom::v1::BloomFilterService::Stub> stub = Connect(0);
  size_t checked = 0;
  for (int client = 0; client < kClients; ++client) {
    EXPECT_EQ(unexpected[client], "") << client;
    EXPECT_FALSE(acknowledged[client].empty()) << client << " added nothing before the shutdown";
    bloom::v1::MightContainRequest check;
    check.set_name("f");
    for (const std::string& item : acknowledged[client]) check.add_items(item);
    grpc::ClientContext context;
    bloom::v1::MightContainResponse present;
    ASSERT_TRUE(stub->MightContain(&context, check, &present).ok());
    ASSERT_EQ(present.present_size(), check.items_size());
    for (int i = 0; i < present.present_size(); ++i) {
      EXPECT_TRUE(present.present(i)) << check.items(i) << " was acknowledged and is gone";
    }
    checked += present.present_size();
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace service

// Hostile clients, round two, where replication is involved: the real bloom-server binaries as
// a primary and its follower, attacked through either. Reads asking a follower for a sequence
// nobody will reach, writes waiting for a stalled follower, idle or abandoned Pipeline streams
// and stalled imports proxied through a follower. Each test checks that the attack is refused or
// bounded and that everyone else is served meanwhile. (The single-server attacks are in
// hostile_limits_test.cc.)
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/dump_start.h"
#include "tests/replication_cluster.h"
#include "tests/support/testing.h"

namespace {

using bloom::v1::BloomFilterService;
using bloom::v1::PipelineRequest;
using bloom::v1::PipelineResponse;
using bloomclient::BloomClient;
using bloomclient::ClientOptions;
using bloomtest::DumpStart;

// Unary calls on connections of their own (gRPC would share one connection between channels
// of the same target), all answered on one completion queue: many calls in flight from one
// thread. A thread drives the queue from the start, so the calls reach the server as they are
// made (an undriven queue's calls go out only when gRPC's backup poller runs, every 5 s).
template <typename Response>
class CallFlood {
 public:
  CallFlood(const std::string& target, int connections) {
    for (int c = 0; c < connections; ++c) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      stubs_.push_back(BloomFilterService::NewStub(
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
    }
    poller_ = std::thread([this] {
      void* tag = nullptr;
      bool ok = false;
      while (queue_.Next(&tag, &ok)) {
        std::lock_guard<std::mutex> lock(mu_);
        answered_.push_back({static_cast<const Call*>(tag), ok});
        answered_cv_.notify_all();
      }
    });
  }
  ~CallFlood() {
    queue_.Shutdown();
    poller_.join();
  }

  // Starts a call on each connection `per_connection` times: start(stub, context, queue) returns
  // its reader. Each has a minute's deadline.
  template <typename Start>
  void StartEach(int per_connection, Start start) {
    for (int i = 0; i < per_connection; ++i) {
      for (const std::unique_ptr<BloomFilterService::Stub>& stub : stubs_) {
        auto call = std::make_unique<Call>();
        call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        call->reader = start(*stub, call->context, queue_);
        call->reader->Finish(&call->response, &call->status, call.get());
        calls_.push_back(std::move(call));
      }
    }
  }

  // Waits for every call's answer; `check` gets each status and response.
  template <typename Check>
  void WaitAll(Check check) {
    std::unique_lock<std::mutex> lock(mu_);
    answered_cv_.wait(lock, [&] { return answered_.size() == calls_.size(); });
    for (const auto& [call, ok] : answered_) {
      ASSERT_TRUE(ok);
      check(call->status, call->response);
    }
  }

 private:
  struct Call {
    grpc::ClientContext context;
    Response response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> reader;
  };
  grpc::CompletionQueue queue_;
  std::vector<std::unique_ptr<BloomFilterService::Stub>> stubs_;
  std::vector<std::unique_ptr<Call>> calls_;  // the test's thread's
  std::mutex mu_;
  std::condition_variable answered_cv_;
  std::vector<std::pair<const Call*, bool>> answered_;  // guarded by mu_
  std::thread poller_;                                  // last: it stops first
};

// Plain reads on connections of their own, each answered well inside a second.
void ExpectPlainReadsAnswered(const std::string& target, const std::string& filter,
                              const std::string& item, const char* during) {
  ClientOptions options;
  options.timeout = absl::Seconds(3);
  for (int i = 0; i < 5; ++i) {
    std::unique_ptr<BloomClient> reader = BloomClient::Connect(target, options);
    const absl::Time start = absl::Now();
    absl::StatusOr<std::vector<bool>> present = reader->MightContain(filter, {item});
    ASSERT_TRUE(present.ok()) << "a plain read " << during << ": " << present.status();
    EXPECT_TRUE((*present)[0]);
    EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << during;
  }
}

bloom::v1::FilterSpec SmallSpec() {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1000);
  spec.set_error_rate(0.01);
  return spec;
}

// Reads asking a follower for a sequence nobody will reach (min_sequence, read your writes),
// a few hundred of them from any client with a read token: a waiting read holds no thread, so
// everyone else is answered at once, and the waiting reads are answered by the primary once
// their wait (up to 1 s) is over.
TEST(HostileLimitsTest, ReadsWaitingForASequenceThatNeverComesDoNotBlindAFollower) {
  bloomtest::ReplicationCluster cluster(1, {}, {});
  ASSERT_TRUE(cluster.Start());
  std::unique_ptr<BloomClient> primary = BloomClient::Connect(cluster.primary().target());
  const bloom::v1::FilterSpec spec = SmallSpec();
  ASSERT_TRUE(primary->Add("guarded", {"known"}, &spec).ok());
  ASSERT_TRUE(cluster.WaitCaughtUp());

  // 8 connections x 48 calls (under --max_concurrent_streams).
  CallFlood<bloom::v1::MightContainResponse> flood(cluster.follower(0).target(), 8);
  flood.StartEach(48, [](BloomFilterService::Stub& stub, grpc::ClientContext& context,
                         grpc::CompletionQueue& queue) {
    bloom::v1::MightContainRequest request;
    request.set_name("guarded");
    request.add_items("known");
    request.set_min_sequence(uint64_t{1} << 62);
    return stub.AsyncMightContain(&context, request, &queue);
  });
  // Every call arrived and waits (the follower's gauge), none answered yet.
  double waiting = 0;
  ASSERT_TRUE(bloomtest::WaitFor([&] {
    waiting = bloomtest::PrometheusSample(
        bloomtest::HttpGet(cluster.follower(0).metrics_port(), "/metrics"),
        "bloom_replica_reads_waiting");
    return waiting == 8 * 48;
  })) << "the follower's waiting reads never reached 384: "
      << waiting;

  ExpectPlainReadsAnswered(cluster.follower(0).target(), "guarded", "known",
                           "on the follower under the attack");
  // The waiting reads end at the primary, which has the item: each answers present.
  flood.WaitAll([](const grpc::Status& status, const bloom::v1::MightContainResponse& response) {
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.present_size(), 1);
    EXPECT_TRUE(response.present(0));
  });
}

// With --min_replica_acks, a Reserve (likewise Delete, Merge, Import, and Remove) waits for the
// followers' acknowledgement holding no gRPC thread: while a follower is stalled, 200 such
// writes leave the primary answering reads, and each write fails UNAVAILABLE at
// --replica_ack_timeout as a lone write does.
TEST(HostileLimitsTest, WritesWaitingForAStalledFollowerDoNotBlindThePrimary) {
  bloomtest::ReplicationCluster cluster(1, {"--min_replica_acks=1", "--replica_ack_timeout=3s"});
  ASSERT_TRUE(cluster.Start());
  std::unique_ptr<BloomClient> primary = BloomClient::Connect(cluster.primary().target());
  const bloom::v1::FilterSpec spec = SmallSpec();
  ASSERT_TRUE(primary->Add("guarded", {"known"}, &spec).ok());
  ASSERT_TRUE(cluster.WaitCaughtUp());

  cluster.follower(0).Signal(SIGSTOP);
  CallFlood<bloom::v1::ReserveResponse> flood(cluster.primary().target(), 8);
  int next = 0;
  flood.StartEach(48, [&](BloomFilterService::Stub& stub, grpc::ClientContext& context,
                          grpc::CompletionQueue& queue) {
    bloom::v1::ReserveRequest request;
    request.set_name(absl::StrCat("reserved-", next++));
    *request.mutable_spec() = SmallSpec();
    return stub.AsyncReserve(&context, request, &queue);
  });
  // Every write arrived and waits for the stalled follower (the primary's gauge).
  ASSERT_TRUE(bloomtest::WaitFor([&] {
    return bloomtest::PrometheusSample(
               bloomtest::HttpGet(cluster.primary().metrics_port(), "/metrics"),
               "bloom_replication_writes_waiting_acks") == 8 * 48;
  })) << "the primary's writes waiting for acknowledgements never reached 384";

  ExpectPlainReadsAnswered(cluster.primary().target(), "guarded", "known",
                           "on the primary while its follower is stalled");
  const absl::Time start = absl::Now();
  flood.WaitAll([](const grpc::Status& status, const bloom::v1::ReserveResponse&) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), "min_replica_acks"))
        << status.error_message();
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the writes waited past their timeout";

  cluster.follower(0).Signal(SIGCONT);
  ASSERT_TRUE(bloomtest::WaitFor(
      [&] { return primary->Reserve("after-the-stall", SmallSpec()).ok(); }, absl::Seconds(20)));
}

// Stubs to the first follower on 7 connections of the same client (one connection takes at most
// 64 streams), each with `args`.
std::vector<std::unique_ptr<BloomFilterService::Stub>> FollowerStubs(
    bloomtest::ReplicationCluster& cluster, grpc::ChannelArguments args) {
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::vector<std::unique_ptr<BloomFilterService::Stub>> stubs;
  for (int c = 0; c < 7; ++c) {
    stubs.push_back(BloomFilterService::NewStub(grpc::CreateCustomChannel(
        cluster.follower(0).target(), grpc::InsecureChannelCredentials(), args)));
  }
  return stubs;
}

// Idle Pipeline streams opened through a follower, each proxied to the primary (which takes 64
// calls at once on a connection): proxied streams have connections of their own, apart from the
// one the follower forwards writes on, so 70 idle streams of one read token delay no forwarded
// write; and one client may have at most 64 through a follower (the rest are refused
// RESOURCE_EXHAUSTED).
TEST(HostileLimitsTest, IdlePipelinesThroughAFollowerDoNotBlockItsForwardedWrites) {
  bloomtest::ReplicationCluster cluster(1, {}, {});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  std::vector<std::unique_ptr<BloomFilterService::Stub>> stubs =
      FollowerStubs(cluster, grpc::ChannelArguments());
  constexpr int kStreams = 70;
  struct Idle {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<PipelineRequest, PipelineResponse>> stream;
  };
  std::vector<std::unique_ptr<Idle>> idle;
  for (int i = 0; i < kStreams; ++i) {
    auto one = std::make_unique<Idle>();
    one->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    one->stream = stubs[i % stubs.size()]->Pipeline(&one->context);
    idle.push_back(std::move(one));
  }
  absl::SleepFor(absl::Milliseconds(500));  // every stream reached the follower

  ClientOptions options;
  options.timeout = absl::Seconds(3);
  std::unique_ptr<BloomClient> writer = BloomClient::Connect(cluster.follower(0).target(), options);
  const bloom::v1::FilterSpec spec = SmallSpec();
  absl::StatusOr<std::vector<bool>> added = writer->Add("through-the-follower", {"item"}, &spec);
  ASSERT_TRUE(added.ok()) << "a write forwarded while " << kStreams
                          << " Pipeline streams idle through the follower: " << added.status();

  // The streams end: the first 64 as the primary ends a stream its client half-closed, the
  // rest refused at once for the client's bound.
  int refused = 0;
  for (std::unique_ptr<Idle>& one : idle) {
    one->stream->WritesDone();
    const grpc::Status status = one->stream->Finish();
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_TRUE(absl::StrContains(status.error_message(), "streams open through this follower"))
          << status.error_message();
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
  }
  EXPECT_EQ(refused, kStreams - 64);
}

// A client that abandons Pipeline streams through a follower while their answers wait unread (it
// sends adds, never reads, and cancels) gives each stream's place back: the follower's proxy
// never waits on a write to a client that is gone, so the stream to the primary ends with it,
// the client can open as many streams again, and the follower still shuts down at once.
TEST(HostileLimitsTest, PipelinesThroughAFollowerAbandonedWithAnswersUnreadGiveTheirPlacesBack) {
  bloomtest::ReplicationCluster cluster(1, {}, {});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  // A small receive window and no window growth: the follower's answers back up after a few KB.
  grpc::ChannelArguments small_window;
  small_window.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  small_window.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  std::vector<std::unique_ptr<BloomFilterService::Stub>> stubs =
      FollowerStubs(cluster, small_window);
  const bloom::v1::FilterSpec spec = SmallSpec();
  PipelineRequest add;
  add.mutable_add()->set_name("abandoned");
  *add.mutable_add()->mutable_create_if_missing() = spec;
  for (int i = 0; i < 100; ++i) add.mutable_add()->add_items(absl::StrCat("item-", i));
  constexpr int kStreams = 70;  // past the 64 a client may hold open through a follower
  struct Abandoned {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<PipelineRequest, PipelineResponse>> stream;
    std::thread writer;
  };
  std::vector<std::unique_ptr<Abandoned>> streams;
  for (int i = 0; i < kStreams; ++i) {
    auto one = std::make_unique<Abandoned>();
    one->stream = stubs[i % stubs.size()]->Pipeline(&one->context);
    one->writer = std::thread([&add, stream = one->stream.get()] {
      PipelineRequest request = add;
      for (uint64_t id = 0; id < 200; ++id) {
        request.set_id(id);
        if (!stream->Write(request)) return;  // cancelled
      }
    });
    streams.push_back(std::move(one));
  }
  absl::SleepFor(absl::Seconds(1));  // answers back up at the follower
  for (std::unique_ptr<Abandoned>& one : streams) one->context.TryCancel();
  for (std::unique_ptr<Abandoned>& one : streams) {
    one->writer.join();
    one->stream->Finish().IgnoreError();
  }

  // The places came back: a new stream through the follower is served.
  ASSERT_TRUE(bloomtest::WaitFor([&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    auto stream = stubs[0]->Pipeline(&context);
    PipelineRequest check;
    check.set_id(1);
    check.mutable_might_contain()->set_name("abandoned");
    check.mutable_might_contain()->add_items("item-1");
    PipelineResponse answer;
    if (!stream->Write(check) || !stream->Read(&answer)) {
      stream->Finish().IgnoreError();
      return false;
    }
    stream->WritesDone();
    return stream->Finish().ok() && answer.might_contain().present(0);
  })) << "no Pipeline stream through the follower after "
      << kStreams << " were abandoned";
  // And the follower still shuts down at once.
  const absl::Time start = absl::Now();
  cluster.follower(0).Signal(SIGTERM);
  EXPECT_EQ(cluster.follower(0).Terminate(), 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

// An Import through a follower that stalls after its first chunk: the follower guards the
// imports it proxies as the primary guards its own, so the client's stream (and its place) is
// ABORTED after --transfer_idle_timeout, not held until the client's own deadline.
TEST(HostileLimitsTest, AnImportStalledThroughAFollowerIsAbandonedThere) {
  bloomtest::ReplicationCluster cluster(1, {"--transfer_idle_timeout=2s"},
                                        {"--transfer_idle_timeout=2s"});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  auto primary = BloomClient::Connect(cluster.primary().target());
  ASSERT_OK(primary->Reserve("source", SmallSpec()).status());
  const std::string header = DumpStart(*primary, "source", 64);
  ASSERT_FALSE(header.empty());
  auto follower = BloomClient::Connect(cluster.follower(0).target());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  bloom::v1::ImportResponse response;
  auto writer = follower->stub().Import(&context, &response);
  bloom::v1::ImportChunk chunk;
  chunk.set_name("copy");
  chunk.set_data(header);
  ASSERT_TRUE(writer->Write(chunk));
  const absl::Time start = absl::Now();
  const grpc::Status status = writer->Finish();  // no more chunks, and no half-close
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED) << status.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

// A unary call whose client ends its side without sending the request (a cancelled call does
// this, and any client can) is refused by a follower's forwarding, which never hands gRPC a
// call without its message (gRPC aborts on that: "API misuse ...
// GRPC_CALL_ERROR_INVALID_MESSAGE").
TEST(HostileLimitsTest, ACallWithoutItsRequestCrashesNoFollower) {
  bloomtest::ReplicationCluster cluster(1, {}, {});
  ASSERT_TRUE(cluster.Start());
  grpc::GenericStub stub(
      grpc::CreateChannel(cluster.follower(0).target(), grpc::InsecureChannelCredentials()));
  for (const char* method :
       {"/bloom.v1.BloomFilterService/Add", "/bloom.v1.BloomFilterService/MightContain",
        "/bloom.v1.BloomFilterService/Reserve", "/bloom.v1.BloomFilterService/Remove"}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::CompletionQueue queue;
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        stub.PrepareCall(&context, method, &queue);
    void* tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void*>(1));
    ASSERT_TRUE(queue.Next(&tag, &ok));
    call->WritesDone(reinterpret_cast<void*>(2));  // no message at all
    ASSERT_TRUE(queue.Next(&tag, &ok));
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(3));
    ASSERT_TRUE(queue.Next(&tag, &ok));
    EXPECT_FALSE(status.ok()) << method;
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << method << ": " << status.error_message();
    queue.Shutdown();
    while (queue.Next(&tag, &ok)) {
    }
  }
  // The follower still serves.
  std::unique_ptr<BloomClient> client = BloomClient::Connect(cluster.follower(0).target());
  const bloom::v1::FilterSpec spec = SmallSpec();
  EXPECT_TRUE(client->Add("after", {"x"}, &spec).ok());
}

// Reads on a follower asking for a sequence past the primary's latest (min_sequence = 2^64-1)
// took 4-9.5 s at the median where the contract promises at most a second of waiting, then the
// primary's answer. Each kind of read is answered within that bound now.
TEST(HostileLimitsTest, ReadsAskingForASequencePastThePrimarysAreAnsweredWithinTheBound) {
  bloomtest::ReplicationCluster cluster(1, {}, {});
  ASSERT_TRUE(cluster.Start());
  std::unique_ptr<BloomClient> primary = BloomClient::Connect(cluster.primary().target());
  const bloom::v1::FilterSpec spec = SmallSpec();
  ASSERT_TRUE(primary->Add("far", {"known"}, &spec).ok());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  auto stub = BloomFilterService::NewStub(
      grpc::CreateChannel(cluster.follower(0).target(), grpc::InsecureChannelCredentials()));
  // Many at once, as a client that sends them in a burst does: each is answered within the
  // bound (a second of waiting, then the primary's answer), not queued behind the others.
  {
    CallFlood<bloom::v1::MightContainResponse> flood(cluster.follower(0).target(), 8);
    flood.StartEach(48, [](BloomFilterService::Stub& stub, grpc::ClientContext& context,
                           grpc::CompletionQueue& queue) {
      bloom::v1::MightContainRequest request;
      request.set_name("far");
      request.add_items("known");
      request.set_min_sequence(~uint64_t{0});
      return stub.AsyncMightContain(&context, request, &queue);
    });
    const absl::Time start = absl::Now();
    flood.WaitAll([&](const grpc::Status& status, const bloom::v1::MightContainResponse&) {
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_LT(absl::Now() - start, absl::Milliseconds(2500));
    });
  }
  for (uint64_t far : {~uint64_t{0}, uint64_t{1} << 63, uint64_t{1} << 40}) {
    for (int i = 0; i < 3; ++i) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      bloom::v1::MightContainRequest request;
      request.set_name("far");
      request.add_items("known");
      request.set_min_sequence(far);
      bloom::v1::MightContainResponse response;
      const absl::Time start = absl::Now();
      const grpc::Status status = stub->MightContain(&context, request, &response);
      const absl::Duration took = absl::Now() - start;
      EXPECT_LT(took, absl::Milliseconds(2500)) << far << ": " << status.error_message();
      if (status.ok()) {
        ASSERT_EQ(response.present_size(), 1);
        EXPECT_TRUE(response.present(0));
      } else {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE) << status.error_message();
      }
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    bloom::v1::StatsRequest stats_request;
    stats_request.set_name("far");
    stats_request.set_min_sequence(far);
    bloom::v1::StatsResponse stats;
    const absl::Time start = absl::Now();
    const grpc::Status status = stub->Stats(&context, stats_request, &stats);
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(2500)) << status.error_message();
  }
}

}  // namespace

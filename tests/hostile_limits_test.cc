// Issue 41's attacks against the real bloom-server binary (hostile clients, round two): huge
// Pipeline messages, trickled transfers, loops of List, floods of reflection and health
// streams, the memory limit of the server's own cgroup, the open-file limit. (Attacks through
// a follower are in hostile_replication_test.cc.)
// (/metrics under 200 slow connections is ObservabilityTest.SlowClientsCannotBlindTheMetrics
// Endpoint.) Each test checks that the attack is refused or bounded and that everyone else is
// served meanwhile.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/dump_start.h"
#include "tests/support/files.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloom::v1::BloomFilterService;
using bloom::v1::PipelineRequest;
using bloom::v1::PipelineResponse;
using bloomclient::BloomClient;
using bloomclient::ClientOptions;
using bloomtest::DumpStart;
using bloomtest::ServerProcess;

using bloomtest::ReadFile;

// One Pipeline message of `operations` one-item adds to `name` (the first, and the rest in its
// `more`).
PipelineRequest PackedAdds(const std::string& name, int operations, int first_id) {
  PipelineRequest message;
  for (int i = 0; i < operations; ++i) {
    PipelineRequest* op = i == 0 ? &message : message.add_more();
    op->set_id(first_id + i);
    op->mutable_add()->set_name(name);
    op->mutable_add()->add_items(absl::StrCat("item-", first_id + i));
  }
  return message;
}

// Sends `message` on a new Pipeline stream and half-closes; what came back.
struct PipelineOutcome {
  grpc::Status status;
  size_t answers = 0;  // operations answered without an error
  absl::Duration took;
};
PipelineOutcome SendOnce(BloomFilterService::Stub& stub, const PipelineRequest& message) {
  const absl::Time start = absl::Now();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub.Pipeline(&context);
  PipelineOutcome outcome;
  if (stream->Write(message)) stream->WritesDone();
  PipelineResponse response;
  while (stream->Read(&response)) {
    outcome.answers += response.has_add() ? 1 : 0;
    for (const PipelineResponse& more : response.more()) outcome.answers += more.has_add() ? 1 : 0;
  }
  outcome.status = stream->Finish();
  outcome.took = absl::Now() - start;
  return outcome;
}

std::unique_ptr<BloomFilterService::Stub> NewStub(const ServerProcess& server) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return BloomFilterService::NewStub(
      grpc::CreateCustomChannel(server.target(), grpc::InsecureChannelCredentials(), args));
}

// Attack 2: one Pipeline message with hundreds of thousands of operations in `more`. A message
// past --max_pipeline_operations is refused before it is parsed, one under it is served in
// linear time (quadratic work would take a core for tens of seconds), and other clients, health
// checks included, are answered meanwhile; SIGTERM still stops the server at once.
TEST(HostileLimitsTest, HugePipelineMessagesAreRefusedOrServedWhileOthersAreAnswered) {
  bloomtest::TempDir data;
  auto server = ServerProcess::Start(data.path(), {"--shutdown_grace=2s"});
  ASSERT_NE(server, nullptr);
  ClientOptions quick;
  quick.timeout = absl::Seconds(2);
  auto checker = BloomClient::Connect(server->target(), quick);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1'000'000);
  spec.set_error_rate(0.01);
  ASSERT_OK(checker->Reserve("f", spec).status());
  ASSERT_OK(checker->Add("f", {"mine"}).status());

  const PipelineRequest too_many = PackedAdds("f", 320'000, 1);
  const PipelineRequest allowed = PackedAdds("f", 100'000, 1'000'000);
  std::atomic<int> finished{0};
  std::vector<PipelineOutcome> refused(2), served(1);
  std::vector<std::thread> attackers;
  attackers.reserve(3);
  for (int i = 0; i < 2; ++i) {
    attackers.emplace_back([&, i] {
      auto stub = NewStub(*server);
      refused[i] = SendOnce(*stub, too_many);
      finished.fetch_add(1);
    });
  }
  attackers.emplace_back([&] {
    auto stub = NewStub(*server);
    served[0] = SendOnce(*stub, allowed);
    finished.fetch_add(1);
  });
  // Every other client's call is answered within its 2 s deadline throughout.
  while (finished.load() < 3) {
    absl::StatusOr<std::vector<bool>> found = checker->MightContain("f", {"mine"});
    ASSERT_OK(found.status());
    EXPECT_TRUE((*found)[0]);
    absl::SleepFor(absl::Milliseconds(20));
  }
  for (std::thread& attacker : attackers) attacker.join();
  for (const PipelineOutcome& outcome : refused) {
    EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << outcome.status.error_message();
    EXPECT_TRUE(absl::StrContains(outcome.status.error_message(), "320000 operations"))
        << outcome.status.error_message();
    EXPECT_TRUE(absl::StrContains(outcome.status.error_message(), "--max_pipeline_operations"));
    EXPECT_EQ(outcome.answers, 0u);
    EXPECT_LT(outcome.took, absl::Seconds(10));
  }
  EXPECT_TRUE(served[0].status.ok()) << served[0].status.error_message();
  EXPECT_EQ(served[0].answers, 100'000u);
  EXPECT_LT(served[0].took, absl::Seconds(10));

  // SIGTERM with a large message in flight exits within the grace period.
  std::thread in_flight([&] {
    auto stub = NewStub(*server);
    SendOnce(*stub, allowed);
  });
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time stop = absl::Now();
  EXPECT_EQ(server->Terminate(absl::Seconds(15)), 0);
  EXPECT_LT(absl::Now() - stop, absl::Seconds(6));
  in_flight.join();
}

// A lower bound is a flag: one over it is refused naming it, one at it is served.
TEST(HostileLimitsTest, TheOperationBoundIsConfigurable) {
  bloomtest::TempDir data;
  auto server = ServerProcess::Start(data.path(), {"--max_pipeline_operations=10"});
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target());
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1000);
  spec.set_error_rate(0.01);
  ASSERT_OK(client->Reserve("f", spec).status());
  auto stub = NewStub(*server);
  const PipelineOutcome at_bound = SendOnce(*stub, PackedAdds("f", 10, 1));
  EXPECT_TRUE(at_bound.status.ok()) << at_bound.status.error_message();
  EXPECT_EQ(at_bound.answers, 10u);
  const PipelineOutcome over = SendOnce(*stub, PackedAdds("f", 11, 100));
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(over.status.error_message(), "id 100 carries 11 operations"))
      << over.status.error_message();
  std::string output;
  EXPECT_NE(ServerProcess::RunToExit({"--max_pipeline_operations=0"}, &output), 0);
  EXPECT_TRUE(absl::StrContains(output, "--max_pipeline_operations")) << output;
}

double Metric(const ServerProcess& server, const std::string& series) {
  return bloomtest::PrometheusSample(bloomtest::HttpGet(server.metrics_port(), "/metrics"), series);
}

// A v1 memory cgroup made for one test, below the group this process is in (as systemd's
// MemoryMax= makes one, without a cgroup namespace); this process moves in while it exists, so
// the servers it starts begin inside. Skips where cgroups cannot be made (needs root).
class MemoryCgroup {
 public:
  // Empty path() if it could not be made; why() says why.
  explicit MemoryCgroup(uint64_t limit_bytes) {
    std::string own;
    for (absl::string_view line : absl::StrSplit(ReadFile("/proc/self/cgroup"), '\n')) {
      std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
      if (fields.size() == 3 && absl::StrContains(fields[1], "memory")) {
        own.assign(fields[2].data(), fields[2].size());
      }
    }
    const std::string mount = "/sys/fs/cgroup/memory";
    if (own.empty() || access((mount + "/cgroup.procs").c_str(), W_OK) != 0) {
      why_ = "no writable cgroup v1 memory hierarchy at " + mount + " (needs root)";
      return;
    }
    parent_ = mount + (own == "/" ? "" : own);
    const std::string path = absl::StrCat(parent_, "/bloom-test-", getpid());
    if (mkdir(path.c_str(), 0755) != 0) {
      why_ = "cannot make " + path;
      return;
    }
    std::ofstream(path + "/memory.limit_in_bytes") << limit_bytes;
    std::ofstream(path + "/cgroup.procs") << getpid();
    if (ReadFile(path + "/cgroup.procs").find(std::to_string(getpid())) == std::string::npos) {
      why_ = "cannot move into " + path;
      rmdir(path.c_str());
      return;
    }
    path_ = path;
  }
  ~MemoryCgroup() {
    if (path_.empty()) return;
    std::ofstream(parent_ + "/cgroup.procs") << getpid();
    // The servers started inside have exited; their group can go once it is empty.
    for (int i = 0; i < 100 && rmdir(path_.c_str()) != 0; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;

  [[nodiscard]] const std::string& Path() const { return path_; }
  [[nodiscard]] const std::string& Why() const { return why_; }

 private:
  std::string parent_, path_, why_;
};

// Attack 3: an Import that sends its dump's header and then a byte every 20 s. An import is
// charged to the memory budget as its bits arrive, not all at its header (reserved memory
// outranks cached filters, so that would evict filters in use), and one that moves less than
// --transfer_min_rate over --transfer_idle_timeout is cancelled.
TEST(HostileLimitsTest, ATrickledImportNeitherPinsTheBudgetNorHoldsItsSlot) {
  bloomtest::TempDir data;
  auto server = ServerProcess::Start(data.path(),
                                     {"--memory_limit=300Mi", "--transfer_idle_timeout=3s",
                                      "--transfer_min_rate=64Ki", "--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target());
  bloom::v1::FilterSpec spec;
  spec.set_capacity(100'000'000);  // 120 MB of bits
  spec.set_error_rate(0.01);
  spec.set_non_scaling(true);
  ASSERT_OK(client->Reserve("in-use", spec).status());
  ASSERT_OK(client->Add("in-use", {"mine"}).status());
  const std::string header = DumpStart(*client, "in-use", 4096);
  ASSERT_FALSE(header.empty());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  bloom::v1::ImportResponse response;
  auto writer = client->stub().Import(&context, &response);
  bloom::v1::ImportChunk chunk;
  chunk.set_name("copy");
  chunk.set_data(header);
  ASSERT_TRUE(writer->Write(chunk));
  std::atomic<bool> trickling{true};
  std::thread trickle([&] {
    bloom::v1::ImportChunk byte;
    byte.set_data(std::string(1, '\0'));
    while (trickling.load() && writer->Write(byte)) absl::SleepFor(absl::Milliseconds(250));
  });

  // Another 120 MB filter fits beside the in-use one: the import holds (almost) nothing, so
  // nothing in use is evicted for it, and the in-use filter keeps answering.
  const absl::Time start = absl::Now();
  ASSERT_OK(client->Reserve("other", spec).status());
  while (absl::Now() - start < absl::Seconds(2)) {
    absl::StatusOr<std::vector<bool>> found = client->MightContain("in-use", {"mine"});
    ASSERT_OK(found.status());
    EXPECT_TRUE((*found)[0]);
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(Metric(*server, "bloom_filter_evictions_total"), 0);
  EXPECT_LT(Metric(*server, "bloom_filter_memory_bytes"), 250e6);

  trickle.join();  // the server ends the stream, so the writes stop
  const grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "--transfer_min_rate"))
      << status.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  trickling.store(false);
  EXPECT_EQ(client->Stats("copy").status().code(), absl::StatusCode::kNotFound);
}

// Slow readers of one client cannot block everyone's Export: one client (a token's label, or a
// peer address) holds at most --max_transfers_per_client of the --max_transfers slots.
TEST(HostileLimitsTest, OneClientCannotTakeEveryTransferSlot) {
  bloomtest::TempDir data, secrets;
  const std::string tokens = secrets.path() + "/tokens";
  std::ofstream(tokens) << bloomtest::TokenDigest("slow-token") << " read slow\n"
                        << bloomtest::TokenDigest("other-token") << " write other\n";
  auto server = ServerProcess::Start(
      data.path(), {"--auth_token_file=" + tokens, "--max_transfers_per_client=4"});
  ASSERT_NE(server, nullptr);
  ClientOptions other;
  other.token = "other-token";
  absl::StatusOr<std::unique_ptr<BloomClient>> client = BloomClient::Open(server->target(), other);
  ASSERT_OK(client.status());
  bloom::v1::FilterSpec spec;
  spec.set_capacity(20'000'000);  // a 24 MB dump: more than flow control lets out unread
  spec.set_error_rate(0.01);
  ASSERT_OK((*client)->Reserve("big", spec).status());

  struct Stalled {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<bloom::v1::ExportChunk>> reader;
  };
  std::vector<std::unique_ptr<Stalled>> stalled;
  bloom::v1::ExportRequest request;
  request.set_name("big");
  auto stub = NewStub(*server);
  for (int i = 0; i < 6; ++i) {
    auto call = std::make_unique<Stalled>();
    call->context.AddMetadata("authorization", "Bearer slow-token");
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    call->reader = stub->Export(&call->context, request);
    stalled.push_back(std::move(call));
  }
  absl::SleepFor(absl::Milliseconds(500));
  // Another client is served at once.
  std::ostringstream dump;
  ASSERT_OK((*client)->Export("big", dump));
  EXPECT_GT(dump.str().size(), 20'000'000u);
  int refused = 0;
  for (auto& call : stalled) {
    bloom::v1::ExportChunk chunk;
    if (call->reader->Read(&chunk)) {  // admitted: its dump was waiting for it
      call->context.TryCancel();
      while (call->reader->Read(&chunk)) {
      }
    }
    const grpc::Status status = call->reader->Finish();
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_TRUE(absl::StrContains(status.error_message(), "the token 'slow'"))
          << status.error_message();
      EXPECT_TRUE(absl::StrContains(status.error_message(), "--max_transfers_per_client"))
          << status.error_message();
    }
  }
  EXPECT_EQ(refused, 2);
}

// Also seen: 8 loops of List (each page reads up to 1,000 filters' metadata) ran on gRPC's
// threads and raised other clients' p99 from about 1.5 ms to 17-368 ms. List and Stats now run
// on a lane of their own (service/call_lane.h), which loops of them cannot widen.
TEST(HostileLimitsTest, LoopsOfListDoNotSlowOtherCalls) {
  bloomtest::TempDir data;
  auto server = ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target());
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1000);
  spec.set_error_rate(0.01);
  for (int i = 0; i < 3000; ++i)
    ASSERT_OK(client->Reserve(absl::StrCat("user-", i), spec).status());
  ASSERT_OK(client->Add("user-0", {"seen"}).status());

  std::atomic<bool> stop{false};
  std::atomic<int> pages{0};
  std::vector<std::thread> loopers;
  loopers.reserve(8);
  for (int i = 0; i < 8; ++i) {
    loopers.emplace_back([&] {
      auto mine = BloomClient::Connect(server->target());
      while (!stop.load()) {
        absl::StatusOr<bloom::v1::ListResponse> page = mine->List("", 1000);
        if (page.ok()) pages.fetch_add(1);
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  std::vector<absl::Duration> latencies;
  for (int i = 0; i < 300; ++i) {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::vector<bool>> found = client->MightContain("user-0", {"seen"});
    latencies.push_back(absl::Now() - start);
    ASSERT_OK(found.status());
    EXPECT_TRUE((*found)[0]);
  }
  stop.store(true);
  for (std::thread& looper : loopers) looper.join();
  std::sort(latencies.begin(), latencies.end());
  const absl::Duration p99 = latencies[latencies.size() * 99 / 100];
  EXPECT_GT(pages.load(), 8);  // the loops were served too
  // A loop of List does not take gRPC's threads: other calls stay near their idle latency.
  // The bounds leave room for a slow, shared machine.
  EXPECT_LT(latencies[latencies.size() / 2], absl::Milliseconds(2))
      << "median " << absl::FormatDuration(latencies[latencies.size() / 2]);
  EXPECT_LT(p99, absl::Milliseconds(40)) << "p99 " << absl::FormatDuration(p99);
}

int ThreadCount(pid_t pid) {
  for (absl::string_view line :
       absl::StrSplit(ReadFile(absl::StrCat("/proc/", pid, "/status")), '\n')) {
    int threads = 0;
    if (absl::ConsumePrefix(&line, "Threads:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &threads)) {
      return threads;
    }
  }
  return -1;
}

// Attack 1, in part: gRPC's server reflection was a synchronous service, a thread per stream,
// open to anyone: 750 streams made 750 threads. The server's own (service/reflection.h) is a
// callback service: 60 streams waiting for a request cost no thread.
TEST(HostileLimitsTest, ReflectionStreamsCostNoThreads) {
  bloomtest::TempDir data;
  auto server = ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  const int threads_before = ThreadCount(server->pid());
  std::thread attack([&] {
    bloomtest::RunCommand(absl::StrCat(
        "python3 " BLOOM_SOURCE_DIR "/tests/hostile/h2_attacks.py --port ", server->port(),
        " --method /grpc.reflection.v1alpha.ServerReflection/"
        "ServerReflectionInfo --hold 2 stalled-messages --streams 60 --send 0"));
  });
  absl::SleepFor(absl::Seconds(1));
  const int threads_during = ThreadCount(server->pid());
  attack.join();
  // gRPC's own pools may grow by a thread or two under load; a thread per stream adds 60.
  EXPECT_LE(threads_during, threads_before + 4) << threads_before << " -> " << threads_during;
  auto client = BloomClient::Connect(server->target());
  EXPECT_OK(client->List().status());
}

// A tokenless health probe at `probe_target` answers SERVING, and a holder of `token` is served
// at `target`: the server came through the attack.
void ExpectProbedAndServing(const std::string& probe_target, const std::string& target,
                            const std::string& token) {
  auto probe = BloomClient::Connect(probe_target);
  absl::StatusOr<bool> serving = probe->Serving();
  ASSERT_OK(serving.status());
  EXPECT_TRUE(*serving);
  ClientOptions with_token;
  with_token.token = token;
  absl::StatusOr<std::unique_ptr<BloomClient>> client = BloomClient::Open(target, with_token);
  ASSERT_OK(client.status());
  serving = (*client)->Serving();
  ASSERT_OK(serving.status());
  EXPECT_TRUE(*serving);
  EXPECT_OK((*client)->List().status());
}

// Attack 1, where the operator closes the open methods: tokenless floods of 64 MiB health
// requests reached 12.7 GB, because gRPC buffers an open method's request whole. With
// --open_methods= the main port gates health and reflection like every other method (refused
// as the headers arrive), and the kubelet probes --health_listen.
TEST(HostileLimitsTest, ClosedOpenMethodsRefuseTokenlessFloodsAtTheirHeaders) {
  bloomtest::TempDir data, secrets;
  const std::string tokens = secrets.path() + "/tokens";
  std::ofstream(tokens) << bloomtest::TokenDigest("a-token") << " read\n";
  auto server = ServerProcess::Start(
      data.path(), {"--auth_token_file=" + tokens, "--open_methods=", "--memory_limit=1Gi",
                    "--health_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  for (const char* path : {"/grpc.health.v1.Health/Check",
                           "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    const std::string report =
        bloomtest::RunCommand(
            absl::StrCat("python3 " BLOOM_SOURCE_DIR "/tests/hostile/h2_attacks.py --port ",
                         server->port(), " --method ", path,
                         " --hold 1 stalled-messages --streams 50 --announce 64Mi --send 60Mi"))
            .out;
    EXPECT_TRUE(absl::StrContains(report, "\"streams_ended_by_server\": 50")) << report;
  }
  EXPECT_LT(server->PeakResidentKb(), 150u << 10);
  // Probes are answered on the health port, and a token holder on the main one.
  ExpectProbedAndServing(absl::StrCat("127.0.0.1:", server->health_port()), server->target(),
                         "a-token");
  std::string output;
  EXPECT_NE(ServerProcess::RunToExit({"--open_methods=health,metrics"}, &output), 0);
  EXPECT_TRUE(absl::StrContains(output, "unknown open method 'metrics'")) << output;
}

// Attack 1: 12 connections x 60 tokenless streams to grpc.health.v1.Health/Check, each
// announcing a 64 MiB message and sending it, OOM-killed a server in a 3 GiB cgroup (12.7 GB
// without a limit): gRPC's health service read each request whole. Ours (service/health.h)
// reads a request only within 100 ms of the call's start and refuses one over 1 KiB, so what
// the flood can make the server hold is what the transport takes in within that time.
TEST(HostileLimitsTest, TokenlessHealthFloodsAreBoundedWithHealthOpen) {
  MemoryCgroup group(3ULL << 30);  // where it can be made; the bound below holds without it
  bloomtest::TempDir data, secrets;
  const std::string tokens = secrets.path() + "/tokens";
  std::ofstream(tokens) << bloomtest::TokenDigest("a-token") << " write\n";
  auto server = ServerProcess::Start(data.path(), {"--auth_token_file=" + tokens});
  ASSERT_NE(server, nullptr);
  std::vector<std::string> reports(12);
  std::vector<std::thread> attackers;
  attackers.reserve(reports.size());
  for (std::string& report : reports) {
    attackers.emplace_back([&] {
      report = bloomtest::RunCommand(
                   absl::StrCat("python3 " BLOOM_SOURCE_DIR "/tests/hostile/h2_attacks.py --port ",
                                server->port(),
                                " --method /grpc.health.v1.Health/Check --hold 0.5 "
                                "stalled-messages --streams 60 --announce 64Mi --send 60Mi "
                                "--stall_after 1"))
                   .out;
    });
  }
  for (std::thread& attacker : attackers) attacker.join();
  int64_t sent = 0, ended = 0;
  for (const std::string& report : reports) {
    for (auto [key, total] :
         {std::pair<std::string, int64_t*>{"bytes_sent", &sent},
          std::pair<std::string, int64_t*>{"streams_ended_by_server", &ended}}) {
      const std::string quoted = "\"" + key + "\": ";
      const size_t at = report.find(quoted);
      ASSERT_NE(at, std::string::npos) << report;
      int64_t value = 0;
      ASSERT_TRUE(absl::SimpleAtoi(
          report.substr(at + quoted.size(), report.find_first_of(",}", at) - at - quoted.size()),
          &value))
          << report;
      *total += value;
    }
  }
  EXPECT_EQ(ended, 720) << reports[0];
  // Typically 100 to 250 MB (150 to 350 MB sent). The floods get more in before a call's
  // 100 ms pass when the server's threads are slow to run: 610 MB held of 835 MB sent was seen
  // once on a loaded 2-core machine. Unbounded, the server held 2.5 GB and more.
  EXPECT_LT(server->PeakResidentKb(), 1024u << 10) << "after " << sent << " bytes sent";
  ExpectProbedAndServing(server->target(), server->target(), "a-token");
}

// Attack 5: under a cgroup without a namespace of its own (systemd's MemoryMax=), the server
// finds its own group's limit with no environment variable, and budgets from it, not from the
// root group's (half the host, where a 10 GB Reserve would be accepted and an Add OOM-killed).
TEST(HostileLimitsTest, TheServersOwnCgroupLimitIsFoundWithoutTheEnvironment) {
  ASSERT_EQ(std::getenv("BLOOM_CONTAINER_MEMORY_BYTES"), nullptr);
  constexpr uint64_t kLimit = 3ULL << 30;
  MemoryCgroup group(kLimit);
  if (group.Path().empty()) GTEST_SKIP() << group.Why();
  bloomtest::TempDir data;
  {
    auto server = ServerProcess::Start(data.path());
    ASSERT_NE(server, nullptr);
    const std::string log = server->ReadLog();
    EXPECT_TRUE(absl::StrContains(log, absl::StrCat("container memory: ", kLimit, " bytes, from ",
                                                    group.Path(), "/memory.limit_in_bytes")))
        << log;
    EXPECT_TRUE(absl::StrContains(log, absl::StrCat("memory_limit=", kLimit / 2))) << log;
    auto client = BloomClient::Connect(server->target());
    bloom::v1::FilterSpec huge;
    huge.set_capacity(9'000'000'000);  // 10.8 GB of bits
    huge.set_error_rate(0.01);
    const absl::Status refused = client->Reserve("huge", huge).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
    ASSERT_EQ(server->Terminate(), 0);
  }
}

// Also seen: the server kept the usual soft limit of 1,024 open files, so 1,100 idle
// connections locked new clients out. It raises the soft limit to the hard one and says so.
TEST(HostileLimitsTest, TheOpenFileLimitIsRaisedToTheHardLimit) {
  rlimit own{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &own), 0);
  if (own.rlim_max <= 256) GTEST_SKIP() << "the hard open-file limit is too low to lower";
  // Start the server with a low soft limit, as a shell's default would give it.
  rlimit lowered = own;
  lowered.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  bloomtest::TempDir data;
  auto server = ServerProcess::Start(data.path());
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &own), 0);
  ASSERT_NE(server, nullptr);
  const std::string limits = ReadFile(absl::StrCat("/proc/", server->pid(), "/limits"));
  bool checked = false;
  for (absl::string_view line : absl::StrSplit(limits, '\n')) {
    if (!absl::StartsWith(line, "Max open files")) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_GE(words.size(), 5u) << line;
    EXPECT_EQ(words[3], words[4]) << line;  // soft == hard
    checked = true;
  }
  EXPECT_TRUE(checked) << limits;
  EXPECT_TRUE(absl::StrContains(server->ReadLog(), "open-file limit: ")) << server->ReadLog();
  EXPECT_TRUE(absl::StrContains(server->ReadLog(), "(raised from 256)")) << server->ReadLog();
}

}  // namespace

// Issue 15's transport attacks against the real bloom-server binary, made by a raw HTTP/2
// client (tests/hostile/h2_attacks.py) that does what no gRPC library would. Each test checks
// the server's peak resident memory (VmHWM) and that it serves normal calls afterwards.
//
// Larger runs (several connections, longer floods) are runs of tests/hostile/h2_attacks.py
// (docs/security.md); these are the sizes that fit a 2-core CI machine in seconds.
#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/test_pki.h"
#include "tests/support/testing.h"

namespace {

using bloomclient::BloomClient;
using bloomclient::ClientOptions;
using bloomtest::ServerProcess;

constexpr char kToken[] = "hostile-test-token";

// What the attack script printed: one JSON object of numbers and booleans.
class AttackReport {
 public:
  explicit AttackReport(std::string json) : json_(std::move(json)) {}
  // The value of `"key": <value>` (-1 if absent); true and false read as 1 and 0.
  int64_t Number(const std::string& key) const {
    const size_t at = json_.find("\"" + key + "\": ");
    if (at == std::string::npos) return -1;
    const size_t start = at + key.size() + 4;
    const std::string value = json_.substr(start, json_.find_first_of(",}", start) - start);
    if (value == "true") return 1;
    if (value == "false") return 0;
    int64_t number = -1;
    return absl::SimpleAtoi(value, &number) ? number : -1;
  }
  const std::string& text() const { return json_; }

 private:
  std::string json_;
};

AttackReport Attack(const ServerProcess& server, const std::vector<std::string>& args) {
  const std::string command =
      absl::StrCat("python3 " BLOOM_SOURCE_DIR "/tests/hostile/h2_attacks.py --port ",
                   server.port(), " ", absl::StrJoin(args, " "));
  bloomtest::CommandResult result = bloomtest::RunCommand(command);
  EXPECT_EQ(result.exit_code, 0) << command << "\n" << result.out;
  return AttackReport(result.out);
}

class HostileClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = secrets_.path() + "/tokens";
    std::ofstream(tokens_) << bloomtest::TokenDigest(kToken) << " write attacker-with-token\n";
  }

  // Reserve, Add and MightContain with the token, over `options`' transport.
  static void ExpectServing(const ServerProcess& server, ClientOptions options = {}) {
    options.token = kToken;
    options.timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<BloomClient>> client =
        BloomClient::Open(server.target(), options);
    ASSERT_OK(client.status());
    bloom::v1::FilterSpec spec;
    spec.set_capacity(1000);
    spec.set_error_rate(0.01);
    ASSERT_OK((*client)->Reserve("after-the-attack", spec).status());
    ASSERT_OK((*client)->Add("after-the-attack", {"x"}).status());
    absl::StatusOr<std::vector<bool>> found = (*client)->MightContain("after-the-attack", {"x"});
    ASSERT_OK(found.status());
    EXPECT_TRUE((*found)[0]);
  }

  bloomtest::TempDir data_, secrets_;
  std::string tokens_;
};

// Attack 1: 50 calls on one connection without a token, each announcing a 64 MiB message and
// sending 60 MiB of it, then stalling. Before the token gate the server buffered every byte
// (3 GB, OOM-killed); now each call is refused as its headers arrive and flow control stops
// the rest at the connection's first window.
TEST_F(HostileClientTest, TokenlessStalledMessagesAreRefusedBeforeTheyAreRead) {
  auto server =
      ServerProcess::Start(data_.path(), {"--auth_token_file=" + tokens_, "--memory_limit=1Gi"});
  ASSERT_NE(server, nullptr);
  const AttackReport report = Attack(
      *server, {"--hold 1", "stalled-messages", "--streams 50", "--announce 64Mi", "--send 60Mi"});
  EXPECT_EQ(report.Number("streams_ended_by_server"), 50) << report.text();
  // At most each stream's first flow-control window (64 KiB) goes out before the refusals
  // arrive, and is discarded unread.
  EXPECT_LT(report.Number("bytes_sent"), 8 << 20) << report.text();
  EXPECT_LT(server->PeakResidentKb(), 150u << 10);
  ExpectServing(*server);
  EXPECT_NE(server->ReadLog().find("refused /bloom.v1.BloomFilterService/Add"), std::string::npos);
}

// The same over TLS, where the gate is TLS credentials' auth metadata processor.
TEST_F(HostileClientTest, TokenlessStalledMessagesOverTlsAreRefusedBeforeTheyAreRead) {
  bloomtest::TestPki pki;
  auto server =
      ServerProcess::Start(data_.path(), {"--auth_token_file=" + tokens_, "--memory_limit=1Gi",
                                          "--tls_cert_file=" + pki.Path("server1.crt"),
                                          "--tls_key_file=" + pki.Path("server1.key")});
  ASSERT_NE(server, nullptr);
  const AttackReport report =
      Attack(*server, {"--tls", "--hold 1", "stalled-messages", "--streams 50", "--send 60Mi"});
  EXPECT_EQ(report.Number("streams_ended_by_server"), 50) << report.text();
  EXPECT_LT(report.Number("bytes_sent"), 8 << 20) << report.text();
  EXPECT_LT(server->PeakResidentKb(), 150u << 10);
  ClientOptions tls;
  tls.tls.enabled = true;
  tls.tls.ca_file = pki.Path("ca1.crt");
  ExpectServing(*server, tls);
}

// A client with a valid token does the same: gRPC 1.51 grants each call flow-control window
// for its whole announced message, so only the transport quota (--transport_memory) bounds what
// it buffers: past it, gRPC cancels calls (RESOURCE_EXHAUSTED). Unbounded, this run holds
// about 1 GB (64 calls x 15 MiB).
TEST_F(HostileClientTest, StalledMessagesOfATokenHolderAreBoundedByTheTransportQuota) {
  auto server = ServerProcess::Start(
      data_.path(),
      {"--auth_token_file=" + tokens_, "--memory_limit=1Gi", "--transport_memory=64Mi"});
  ASSERT_NE(server, nullptr);
  const AttackReport report = Attack(*server, {"--token", kToken, "--hold 1", "stalled-messages",
                                               "--streams 64", "--announce 16Mi", "--send 15Mi"});
  EXPECT_GT(report.Number("streams_ended_by_server"), 32) << report.text();
  EXPECT_LT(server->PeakResidentKb(), 600u << 10) << report.text();
  ExpectServing(*server);
}

// Attack 2's mitigation: with mutual TLS, a peer without a client certificate never reaches
// HTTP/2, so it cannot start the CONTINUATION flood that gRPC 1.51 does not bound.
TEST_F(HostileClientTest, ContinuationFloodWithoutAClientCertificateNeverReachesHttp2) {
  bloomtest::TestPki pki;
  auto server = ServerProcess::Start(
      data_.path(),
      {"--auth_token_file=" + tokens_, "--tls_cert_file=" + pki.Path("server1.crt"),
       "--tls_key_file=" + pki.Path("server1.key"), "--tls_client_ca_file=" + pki.Path("ca1.crt")});
  ASSERT_NE(server, nullptr);
  const AttackReport report = Attack(*server, {"--tls", "--hold 0", "continuation-flood",
                                               "--flood_bytes 512Mi", "--max_seconds 10"});
  // Refused during the handshake, or the first write after it fails (TLS 1.3 reports a
  // rejected client certificate after the client's side of the handshake).
  EXPECT_TRUE(report.Number("connection_refused") == 1 || report.Number("connection_closed") == 1)
      << report.text();
  EXPECT_LT(report.Number("bytes_sent"), 8 << 20) << report.text();
  EXPECT_LT(server->PeakResidentKb(), 150u << 10);
  ClientOptions mtls;
  mtls.tls.enabled = true;
  mtls.tls.ca_file = pki.Path("ca1.crt");
  mtls.tls.cert_file = pki.Path("client1.crt");
  mtls.tls.key_file = pki.Path("client1.key");
  ExpectServing(*server, mtls);
}

// Attack 4: Stats (and List) of a huge filter cost O(sub-filters), not O(bits): with 8 clients
// looping Stats of a 2.9 GB filter, one-item checks of another filter, each with a one-second
// deadline, are all answered while the loop runs.
TEST_F(HostileClientTest, StatsOfAHugeFilterDoNotStallOtherCalls) {
  auto server = ServerProcess::Start(data_.path(), {"--memory_limit=8Gi"});
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.timeout = absl::Seconds(30);
  auto client = BloomClient::Connect(server->target(), options);
  bloom::v1::FilterSpec huge;
  huge.set_capacity(2'000'000'000);  // 2.4 GB of bits, untouched until added to
  huge.set_error_rate(0.01);
  huge.set_non_scaling(true);
  ASSERT_OK(client->Reserve("huge", huge).status());
  ASSERT_OK(client->Add("huge", {"a", "b", "c"}).status());
  bloom::v1::FilterSpec small;
  small.set_capacity(1000);
  small.set_error_rate(0.01);
  ASSERT_OK(client->Reserve("small", small).status());
  ASSERT_OK(client->Add("small", {"x"}).status());

  std::atomic<bool> stop{false};
  std::atomic<int> stats_calls{0};
  std::vector<std::thread> loopers;
  for (int i = 0; i < 8; ++i) {
    loopers.emplace_back([&] {
      auto looper = BloomClient::Connect(server->target(), options);
      while (!stop.load()) {
        absl::StatusOr<bloom::v1::FilterStats> stats = looper->Stats("huge");
        EXPECT_OK(stats.status());
        if (stats.ok()) {
          EXPECT_GT(stats->estimated_cardinality(), 2);
        }
        stats_calls.fetch_add(1);
      }
    });
  }
  ClientOptions quick;
  quick.timeout = absl::Seconds(1);
  auto checker = BloomClient::Connect(server->target(), quick);
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<std::vector<bool>> found = checker->MightContain("small", {"x"});
    ASSERT_TRUE(found.ok()) << "check " << i << " while Stats loops: " << found.status();
    EXPECT_TRUE((*found)[0]);
    absl::SleepFor(absl::Milliseconds(50));
  }
  stop.store(true);
  for (std::thread& looper : loopers) looper.join();
  // Stats reads a kept count, so the loops answer hundreds of calls in the time (counting the
  // bits of the filter would allow a few a second).
  EXPECT_GT(stats_calls.load(), 100);
}

// Attack 3: with no --memory_limit given, a filter larger than the default limit (50% of the
// container's memory: here a 2 GiB container, as the server reads it from
// BLOOM_CONTAINER_MEMORY_BYTES in place of the cgroup) is refused with RESOURCE_EXHAUSTED, not
// reserved until an add gets the server OOM-killed; and a filter that does not fit at start-up
// is left on disk while the others are served, so no restart loops on it.
TEST_F(HostileClientTest, HugeFiltersAreRefusedByDefaultAndRecoveryNeverCrashLoops) {
  const std::vector<std::string> container = {"BLOOM_CONTAINER_MEMORY_BYTES=2147483648"};
  auto server = ServerProcess::Start(data_.path(), {}, container);
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->ReadLog().find("memory_limit=1073741824"), std::string::npos)
      << server->ReadLog();
  // The RSS bounds of these tests hold for the allocator the server is built with; the
  // ordinary build links jemalloc (common/heap.h), and a build that silently fell back to
  // glibc's malloc would be measured here as if it had not.
  EXPECT_NE(server->ReadLog().find(absl::StrCat("allocator=", BLOOM_SERVER_ALLOCATOR)),
            std::string::npos)
      << server->ReadLog();
  auto client = BloomClient::Connect(server->target());
  bloom::v1::FilterSpec huge;
  huge.set_capacity(15'000'000'000);
  huge.set_error_rate(0.01);
  absl::Status refused = client->Reserve("huge", huge).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("memory limit"), std::string::npos) << refused;

  // A filter that fits now, with acknowledged adds still in the journal when the server dies.
  bloom::v1::FilterSpec big;
  big.set_capacity(500'000'000);  // 600 MB of bits
  big.set_error_rate(0.01);
  ASSERT_OK(client->Reserve("big", big).status());
  std::vector<std::string> items;
  for (int i = 0; i < 20'000; ++i) items.push_back(absl::StrCat("item-", i));
  ASSERT_OK(client->Add("big", items).status());
  bloom::v1::FilterSpec small;
  small.set_capacity(1000);
  small.set_error_rate(0.01);
  ASSERT_OK(client->Reserve("small", small).status());
  ASSERT_OK(client->Add("small", {"s"}).status());
  server->Kill();
  client.reset();

  // The container shrank (or the limit was lowered): "big" no longer fits.
  server = ServerProcess::Start(
      data_.path(), {"--memory_limit=100Mi", "--metrics_listen=127.0.0.1:0"}, container);
  ASSERT_NE(server, nullptr);
  client = BloomClient::Connect(server->target());
  absl::Status unloaded = client->Stats("big").status();
  EXPECT_EQ(unloaded.code(), absl::StatusCode::kResourceExhausted) << unloaded;
  EXPECT_NE(unloaded.message().find("--memory_limit"), std::string::npos) << unloaded;
  absl::StatusOr<std::vector<bool>> found = client->MightContain("small", {"s"});
  ASSERT_OK(found.status());
  EXPECT_TRUE((*found)[0]);
  EXPECT_NE(server->ReadLog().find("was not loaded"), std::string::npos);
  EXPECT_EQ(bloomtest::PrometheusSample(bloomtest::HttpGet(server->metrics_port(), "/metrics"),
                                        R"(bloom_filters_unavailable{reason="not_loaded"})"),
            1);
  EXPECT_LT(server->PeakResidentKb(), 200u << 10);
  ASSERT_EQ(server->Terminate(), 0);

  // With room again, nothing acknowledged was lost.
  server = ServerProcess::Start(data_.path(), {"--memory_limit=1Gi"}, container);
  ASSERT_NE(server, nullptr);
  client = BloomClient::Connect(server->target());
  found = client->MightContain("big", items);
  ASSERT_OK(found.status());
  for (size_t i = 0; i < items.size(); ++i) ASSERT_TRUE((*found)[i]) << items[i];
}

// Attack 9: a disk that filled up, then kill -9. The server never aborts on a full disk (Debian's
// RocksDB asserts when a write to its LOG file, or a recovery write, fails; storage/db/database.cc
// keeps it from both): it refuses adds and answers reads while full, refuses to open with a
// clear error until there is room, then recovers every acknowledged add.
// The disk is a 40 MiB tmpfs, so this needs the right to mount one (root, as in CI).
TEST_F(HostileClientTest, AfterADiskFullCrashTheServerStartsCleanlyOrSaysWhyNot) {
  bloomtest::TempDir volume;
  if (bloomtest::RunCommand("mount -t tmpfs -o size=40m bloom-test " + volume.path()).exit_code !=
      0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { bloomtest::RunCommand("umount -l " + path); }
  } unmount{volume.path()};
  const std::string data_dir = volume.path() + "/data";

  auto server = ServerProcess::Start(data_dir, {"--memory_limit=1Gi"});
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target());
  bloom::v1::FilterSpec spec;
  spec.set_capacity(10'000'000);
  spec.set_error_rate(0.01);
  ASSERT_OK(client->Reserve("f", spec).status());
  std::vector<std::vector<std::string>> acknowledged;
  absl::Status failed;
  for (int batch = 0; batch < 2000 && failed.ok(); ++batch) {
    std::vector<std::string> items;
    for (int i = 0; i < 20'000; ++i) items.push_back(absl::StrCat(batch, "-", i));
    failed = client->Add("f", items).status();
    if (failed.ok()) acknowledged.push_back(std::move(items));
  }
  ASSERT_FALSE(failed.ok()) << "the disk never filled";
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
  EXPECT_NE(failed.message().find("No space left"), std::string::npos) << failed << "\n"
                                                                       << server->ReadLog();
  ASSERT_GT(acknowledged.size(), 0u);
  // The full disk refuses adds but the server lives on and answers reads (RocksDB's next write
  // to a LOG file whose last write failed must not abort it).
  absl::StatusOr<std::vector<bool>> still = client->MightContain("f", acknowledged.front());
  ASSERT_OK(still.status());
  EXPECT_TRUE((*still)[0]);
  server->Kill();
  client.reset();

  std::string output;
  const int exit_status = ServerProcess::RunToExit(
      {"--data_dir=" + data_dir, "--listen=127.0.0.1:0", "--memory_limit=1Gi"}, &output);
  EXPECT_EQ(exit_status, 1) << output;  // a clean error, not SIGABRT's 134
  EXPECT_NE(output.find("bytes free"), std::string::npos) << output;
  EXPECT_EQ(output.find("Assertion"), std::string::npos) << output;

  ASSERT_EQ(bloomtest::RunCommand("mount -o remount,size=200m " + volume.path()).exit_code, 0);
  server = ServerProcess::Start(data_dir, {"--memory_limit=1Gi"});
  ASSERT_NE(server, nullptr);
  client = BloomClient::Connect(server->target());
  for (const std::vector<std::string>& items : acknowledged) {
    absl::StatusOr<std::vector<bool>> found = client->MightContain("f", items);
    ASSERT_OK(found.status());
    for (size_t i = 0; i < items.size(); ++i) ASSERT_TRUE((*found)[i]) << items[i];
  }
}

// Threads of `pid` (the Threads: line of /proc/pid/status).
int ThreadCount(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "Threads:")) return std::stoi(line.substr(8));
  }
  return -1;
}

double Metric(const ServerProcess& server, const std::string& series) {
  return bloomtest::PrometheusSample(bloomtest::HttpGet(server.metrics_port(), "/metrics"), series);
}

// The metric once it reaches `want` (a stream's end is counted just after its client hears
// its status), or its last value after 10 s.
double MetricReaching(const ServerProcess& server, const std::string& series, double want) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  double value = Metric(server, series);
  while (value != want && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    value = Metric(server, series);
  }
  return value;
}

// Attack 5: Export streams whose client never reads are bounded: they hold no thread (callback
// streams), at most --max_transfers run, and one that can send nothing for
// --transfer_idle_timeout is cancelled, releasing its slot and buffers.
TEST_F(HostileClientTest, ExportsThatNeverReadAreBoundedAndAbandoned) {
  auto server = ServerProcess::Start(
      data_.path(), {"--max_transfers=8", "--max_transfers_per_client=8",
                     "--transfer_idle_timeout=2s", "--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target());
  bloom::v1::FilterSpec spec;
  spec.set_capacity(20'000'000);  // a 24 MB dump: more than flow control lets out unread
  spec.set_error_rate(0.01);
  ASSERT_OK(client->Reserve("big", spec).status());
  const int threads_before = ThreadCount(server->pid());

  struct Stalled {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<bloom::v1::ExportChunk>> reader;
  };
  std::vector<std::unique_ptr<Stalled>> stalled;
  bloom::v1::ExportRequest request;
  request.set_name("big");
  for (int i = 0; i < 24; ++i) {
    auto call = std::make_unique<Stalled>();
    call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    call->reader = client->stub().Export(&call->context, request);
    stalled.push_back(std::move(call));
  }
  // The 8 admitted exports are waiting for a client that does not read.
  EXPECT_EQ(MetricReaching(*server, R"(bloom_transfers_in_progress{kind="export"})", 8), 8);
  // Callback streams: waiting for a client that does not read costs no thread. A thread per
  // stream would add 8; gRPC's own pools may grow by a thread or two under load.
  EXPECT_LE(ThreadCount(server->pid()), threads_before + 4);
  // Past the idle timeout, still reading nothing: the server gives up on all 8.
  EXPECT_EQ(MetricReaching(*server, R"(bloom_transfers_abandoned_total{kind="export"})", 8), 8);

  // Every call ended: 16 refused at once, the 8 admitted ones cancelled by the server (a
  // client that reads nothing would never see a status; the server logs and counts why).
  int refused = 0, abandoned = 0;
  for (auto& call : stalled) {
    bloom::v1::ExportChunk chunk;
    while (call->reader->Read(&chunk)) {
    }
    const grpc::Status status = call->reader->Finish();
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) ++refused;
    if (status.error_code() == grpc::StatusCode::CANCELLED) ++abandoned;
  }
  EXPECT_EQ(refused, 16);
  EXPECT_EQ(abandoned, 8);
  EXPECT_EQ(MetricReaching(*server, R"(bloom_transfers_in_progress{kind="export"})", 0), 0);
  std::ostringstream dump;
  ASSERT_OK(client->Export("big", dump));  // a reading client is served again
  EXPECT_GT(dump.str().size(), 20'000'000u);
}

// Attack 6: an Import that stalls part way holds its memory only for a while, and visibly: it
// shows in bloom_transfers_in_progress, and after --transfer_idle_timeout it is cancelled
// (ABORTED) and what it was charged released for other Reserves. (An import
// is charged as its bits arrive: one that stalls after its header holds almost nothing, see
// HostileLimitsTest.ATrickledImportNeitherPinsTheBudgetNorHoldsItsSlot.)
TEST_F(HostileClientTest, AStalledImportIsAbandonedAndItsMemoryReleased) {
  auto server = ServerProcess::Start(
      data_.path(),
      {"--memory_limit=300Mi", "--transfer_idle_timeout=2s", "--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target());
  bloom::v1::FilterSpec spec;
  spec.set_capacity(100'000'000);  // 120 MB of bits
  spec.set_error_rate(0.01);
  spec.set_non_scaling(true);
  ASSERT_OK(client->Reserve("source", spec).status());
  // The first 100 chunks of its dump: the header and 100 MB of the bits, which an import is
  // charged as they arrive.
  std::string first_chunks;
  {
    grpc::ClientContext context;
    bloom::v1::ExportRequest request;
    request.set_name("source");
    auto reader = client->stub().Export(&context, request);
    bloom::v1::ExportChunk chunk;
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(reader->Read(&chunk));
      first_chunks += chunk.data();
    }
    context.TryCancel();
    reader->Finish();
  }
  // The server ends the cancelled export on its own time: until then it holds the source, and
  // evicting the source below would free nothing (then a second filter went too).
  ASSERT_EQ(MetricReaching(*server, R"(bloom_transfers_in_progress{kind="export"})", 0), 0);

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  bloom::v1::ImportResponse response;
  auto writer = client->stub().Import(&context, &response);
  bloom::v1::ImportChunk chunk;
  chunk.set_name("copy");
  for (size_t at = 0; at < first_chunks.size(); at += 1 << 20) {
    chunk.set_data(first_chunks.substr(at, 1 << 20));
    ASSERT_TRUE(writer->Write(chunk));
    chunk.clear_name();
  }
  // 100 MB charged to the pending import beside the source's 120 MB, once the server has read
  // the chunks.
  EXPECT_TRUE(bloomtest::WaitFor(
      [&] { return Metric(*server, "bloom_filter_memory_bytes") > 220e6; }, absl::Seconds(10)))
      << Metric(*server, "bloom_filter_memory_bytes");
  EXPECT_EQ(Metric(*server, R"(bloom_transfers_in_progress{kind="import"})"), 1);
  // The pending import's 100 MB cannot be evicted, filters can: 240 MB more does not fit
  // beside it in 300 MiB, 120 MB does (the source is written out to make room).
  bloom::v1::FilterSpec bigger = spec;
  bigger.set_capacity(200'000'000);
  EXPECT_EQ(client->Reserve("bigger", bigger).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_OK(client->Reserve("other", spec).status());
  EXPECT_EQ(MetricReaching(*server, "bloom_filter_evictions_total", 1), 1);

  const grpc::Status status = writer->Finish();  // blocks until the server gives up on it
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED) << status.error_message();
  EXPECT_NE(status.error_message().find("released"), std::string::npos) << status.error_message();
  EXPECT_NE(server->ReadLog().find("abandoned an import"), std::string::npos);
  EXPECT_EQ(MetricReaching(*server, R"(bloom_transfers_abandoned_total{kind="import"})", 1), 1);
  EXPECT_EQ(MetricReaching(*server, R"(bloom_transfers_in_progress{kind="import"})", 0), 0);
  ASSERT_OK(client->Reserve("bigger", bigger).status());  // the reservation is back
  EXPECT_EQ(client->Stats("copy").status().code(), absl::StatusCode::kNotFound);
  ASSERT_OK(client->Stats("source").status());  // loaded again, evicting the others
}

}  // namespace

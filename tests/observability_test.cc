// /metrics on the running server: values move with traffic, and the text passes
// `promtool check metrics` (Debian's prometheus package).
#include <fstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloomtest::ServerProcess;

// The body of GET /metrics.
TEST(ObservabilityTest, MetricsFollowTrafficAndPassPromtool) {
  bloomtest::TempDir data;
  auto server = ServerProcess::Start(data.path(), {"--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->metrics_port(), 0);

  const std::string before = bloomtest::ScrapeMetrics(server->metrics_port());
  EXPECT_EQ(bloomtest::PrometheusSample(before, "bloom_filters"), 0) << before;
  EXPECT_EQ(bloomtest::PrometheusSample(before, "bloom_items_added_total"), 0);

  auto client = bloomclient::BloomClient::Connect(server->target());
  bloom::v1::FilterSpec spec;
  spec.set_capacity(100'000);
  spec.set_error_rate(0.01);
  ASSERT_OK(client->Reserve("users", spec).status());
  std::vector<std::string> items;
  for (int i = 0; i < 2500; ++i) items.push_back("user-" + std::to_string(i));
  ASSERT_OK(client->Add("users", items).status());
  ASSERT_OK(client->MightContain("users", {"user-1", "nobody"}).status());
  EXPECT_EQ(client->Stats("missing").status().code(), absl::StatusCode::kNotFound);

  const std::string after = bloomtest::ScrapeMetrics(server->metrics_port());
  EXPECT_EQ(
      bloomtest::PrometheusSample(after, R"(bloom_rpc_requests_total{code="OK",method="Reserve"})"),
      1)
      << after;
  EXPECT_EQ(
      bloomtest::PrometheusSample(after, R"(bloom_rpc_requests_total{code="OK",method="Add"})"), 1);
  EXPECT_EQ(bloomtest::PrometheusSample(
                after, R"(bloom_rpc_requests_total{code="NOT_FOUND",method="Stats"})"),
            1);
  EXPECT_EQ(bloomtest::PrometheusSample(after, "bloom_items_added_total"), 2500);
  EXPECT_EQ(bloomtest::PrometheusSample(after, "bloom_items_checked_total"), 2);
  EXPECT_EQ(bloomtest::PrometheusSample(after, R"(bloom_rpc_duration_seconds_count{method="Add"})"),
            1);
  EXPECT_EQ(bloomtest::PrometheusSample(after, "bloom_filters"), 1);
  EXPECT_GT(bloomtest::PrometheusSample(after, "bloom_filter_memory_bytes"), 100'000);
  EXPECT_GT(bloomtest::PrometheusSample(after, "bloom_journal_pending_bytes"),
            2500 * 8 - 1);  // 8 B per new item
  EXPECT_GT(bloomtest::PrometheusSample(after, "process_resident_memory_bytes"),
            bloomtest::PrometheusSample(after, "bloom_filter_memory_bytes"));
  EXPECT_GE(bloomtest::PrometheusSample(after, "bloom_rocksdb_live_sst_bytes"), 0);
  EXPECT_EQ(bloomtest::PrometheusSample(after, "bloom_rocksdb_write_stopped"), 0);
  // The data dir's file system, as df sees it.
  const double size = bloomtest::PrometheusSample(after, "bloom_data_dir_size_bytes");
  const double free = bloomtest::PrometheusSample(after, "bloom_data_dir_free_bytes");
  EXPECT_GT(size, 0);
  EXPECT_GT(free, 0);
  EXPECT_LE(free, size);
  const bloomtest::CommandResult df =
      bloomtest::RunCommand("df -B1 --output=size " + data.path() + " | tail -1");
  EXPECT_EQ(size, std::stod(df.out)) << df.out;
  // Without TLS, no certificate.
  EXPECT_EQ(after.find("bloom_tls_certificate_expiry_timestamp_seconds"), std::string::npos);

  // The exposition format is what Prometheus accepts.
  bloomtest::TempDir scratch;
  const std::string file = scratch.path() + "/metrics.txt";
  std::ofstream(file) << after;
  bloomtest::CommandResult check = bloomtest::RunCommand("promtool check metrics < " + file);
  EXPECT_EQ(check.exit_code, 0) << check.out;
}

TEST(ObservabilityTest, AuthFailuresAreCountedAndHealthNeedsNoToken) {
  bloomtest::TempDir data, secrets;
  const std::string tokens = secrets.path() + "/tokens";
  std::ofstream(tokens) << bloomtest::TokenDigest("s3cret") << " read\n";
  auto server = ServerProcess::Start(
      data.path(), {"--metrics_listen=127.0.0.1:0", "--auth_token_file=" + tokens});
  ASSERT_NE(server, nullptr);
  auto anonymous = bloomclient::BloomClient::Connect(server->target());
  EXPECT_EQ(anonymous->Stats("x").status().code(), absl::StatusCode::kUnauthenticated);
  absl::StatusOr<bool> serving = anonymous->Serving();
  ASSERT_OK(serving.status());
  EXPECT_TRUE(*serving);
  bloomclient::ClientOptions options;
  options.token = "s3cret";
  auto reader = bloomclient::BloomClient::Connect(server->target(), options);
  EXPECT_EQ(reader->Delete("x").code(), absl::StatusCode::kPermissionDenied);

  const std::string text = bloomtest::ScrapeMetrics(server->metrics_port());
  EXPECT_EQ(
      bloomtest::PrometheusSample(text, R"(bloom_auth_failures_total{code="UNAUTHENTICATED"})"), 1)
      << text;
  EXPECT_EQ(
      bloomtest::PrometheusSample(text, R"(bloom_auth_failures_total{code="PERMISSION_DENIED"})"),
      1);
  EXPECT_EQ(bloomtest::PrometheusSample(
                text, R"(bloom_rpc_requests_total{code="UNAUTHENTICATED",method="Stats"})"),
            1);
}

// Clients that open a connection to /metrics and never finish their request (a handful could
// block scrapes, a few hundred could blind the exporter entirely) neither block scrapes for
// long nor hold a worker for long.
TEST(ObservabilityTest, SlowClientsCannotBlindTheMetricsEndpoint) {
  bloomtest::TempDir data;
  auto server = ServerProcess::Start(data.path(), {"--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(server->metrics_port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    const std::string partial = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    ASSERT_EQ(write(fd, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
    slow.push_back(fd);
  }
  const absl::Time start = absl::Now();
  const std::string text = bloomtest::ScrapeMetrics(server->metrics_port());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_GE(bloomtest::PrometheusSample(text, "bloom_filters"), 0) << text;
  // The server gives up on each slow request after its timeout and closes the connection.
  for (int fd : slow) {
    const timeval timeout{.tv_sec = 20, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    char buffer[512];
    ssize_t n = 0;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
    }
    EXPECT_EQ(n, 0) << "a slow connection was not closed";
    close(fd);
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
}

}  // namespace

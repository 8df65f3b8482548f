#include "metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "storage/filter_store.h"
#include "tests/support/testing.h"

namespace metrics {
namespace {

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::StoreOptions options;
    options.data_dir = dir_.path();
    options.memory_limit_bytes = 1 << 30;
    absl::StatusOr<std::unique_ptr<storage::FilterStore>> store =
        storage::FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = std::move(*store);
    metrics_ = ServerMetrics::Create(store_.get());
  }

  bloomtest::TempDir dir_;
  std::unique_ptr<storage::FilterStore> store_;
  std::unique_ptr<ServerMetrics> metrics_;
};

TEST_F(MetricsTest, CountsRpcsByMethodAndCode) {
  metrics_->RecordRpc(rpcs::Rpc::kAdd, absl::StatusCode::kOk, absl::Microseconds(120), 1000);
  metrics_->RecordRpc(rpcs::Rpc::kAdd, absl::StatusCode::kOk, absl::Milliseconds(3), 500);
  metrics_->RecordRpc(rpcs::Rpc::kAdd, absl::StatusCode::kNotFound, absl::Microseconds(80), 7);
  metrics_->RecordRpc(rpcs::Rpc::kMightContain, absl::StatusCode::kOk, absl::Microseconds(60), 42);
  const std::string text = metrics_->Render();
  EXPECT_EQ(
      bloomtest::PrometheusSample(text, R"(bloom_rpc_requests_total{code="OK",method="Add"})"), 2)
      << text;
  EXPECT_EQ(bloomtest::PrometheusSample(
                text, R"(bloom_rpc_requests_total{code="NOT_FOUND",method="Add"})"),
            1);
  EXPECT_EQ(bloomtest::PrometheusSample(
                text, R"(bloom_rpc_requests_total{code="OK",method="MightContain"})"),
            1);
  // Items count only for successful calls.
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_items_added_total"), 1500);
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_items_checked_total"), 42);
  EXPECT_EQ(bloomtest::PrometheusSample(text, R"(bloom_rpc_duration_seconds_count{method="Add"})"),
            3);
  // 80 µs and 120 µs are at most 250 µs; 3 ms is not.
  EXPECT_EQ(bloomtest::PrometheusSample(
                text, R"(bloom_rpc_duration_seconds_bucket{method="Add",le="0.00025"})"),
            2);
  EXPECT_EQ(bloomtest::PrometheusSample(
                text, R"(bloom_rpc_duration_seconds_bucket{method="Add",le="+Inf"})"),
            3);
  EXPECT_NEAR(bloomtest::PrometheusSample(text, R"(bloom_rpc_duration_seconds_sum{method="Add"})"),
              0.0032, 1e-9);
}

TEST_F(MetricsTest, CountsAuthFailuresByCode) {
  metrics_->RecordAuthFailure(absl::StatusCode::kUnauthenticated);
  metrics_->RecordAuthFailure(absl::StatusCode::kUnauthenticated);
  metrics_->RecordAuthFailure(absl::StatusCode::kPermissionDenied);
  const std::string text = metrics_->Render();
  EXPECT_EQ(
      bloomtest::PrometheusSample(text, R"(bloom_auth_failures_total{code="UNAUTHENTICATED"})"), 2);
  EXPECT_EQ(
      bloomtest::PrometheusSample(text, R"(bloom_auth_failures_total{code="PERMISSION_DENIED"})"),
      1);
}

TEST_F(MetricsTest, StoreFiguresFollowTheStore) {
  std::string text = metrics_->Render();
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_filters"), 0) << text;
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_filter_memory_bytes"), 0);
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_memory_limit_bytes"), 1 << 30);
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_journal_pending_bytes"), 0);

  ASSERT_OK(store_->Reserve("a", {.capacity = 100'000, .error_rate = 0.01}).status());
  std::vector<absl::string_view> items = {"x", "y", "z"};
  ASSERT_OK(store_->Add("a", items, nullptr).status());
  text = metrics_->Render();
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_filters"), 1);
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_filter_memory_bytes"),
            static_cast<double>(store_->memory_used()));
  EXPECT_GT(bloomtest::PrometheusSample(text, "bloom_filter_memory_bytes"),
            100'000);  // ~1 byte per item at 1%
  EXPECT_GT(bloomtest::PrometheusSample(text, "bloom_journal_pending_bytes"), 0);
  EXPECT_GT(bloomtest::PrometheusSample(text, "bloom_rocksdb_memtable_bytes"), 0);
  // Present (-1 when missing); zero until a flush opens an SST file or a read caches a block.
  EXPECT_GE(bloomtest::PrometheusSample(text, "bloom_rocksdb_table_reader_bytes"), 0);
  EXPECT_GE(bloomtest::PrometheusSample(text, "bloom_rocksdb_block_cache_bytes"), 0);

  ASSERT_OK(store_->CheckpointAll());
  text = metrics_->Render();
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_journal_pending_bytes"), 0);
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_checkpoint_lag_seconds"), 0);
}

TEST(WindowMetricsTest, RetiredSlicesAndExpiredFiltersAreCounted) {
  bloomtest::TempDir dir;
  bloomtime::ManualClock clock;
  storage::StoreOptions options;
  options.data_dir = dir.path();
  options.background_checkpoints = false;
  options.clock = &clock;
  absl::StatusOr<std::unique_ptr<storage::FilterStore>> store = storage::FilterStore::Open(options);
  ASSERT_OK(store.status());
  std::unique_ptr<ServerMetrics> metrics = ServerMetrics::Create(store->get());
  bloom::FilterParams windowed{100, 0.01};
  windowed.window = absl::Seconds(40);
  windowed.window_slices = 4;
  bloom::FilterParams idle{100, 0.01};
  idle.idle_ttl = absl::Seconds(30);
  ASSERT_OK((*store)->Reserve("w", windowed).status());
  ASSERT_OK((*store)->Reserve("idle", idle).status());
  std::vector<absl::string_view> items = {"x"};
  for (int i = 0; i < 10; ++i) {  // a new 10 s slice each time
    ASSERT_OK((*store)->Add("w", items, nullptr).status());
    clock.Advance(absl::Seconds(10));
  }
  ASSERT_OK((*store)->CheckpointAll());
  EXPECT_EQ((*store)->Stats("idle").status().code(), absl::StatusCode::kNotFound);
  const std::string text = metrics->Render();
  // Slices start at 0, 10, ..., 90 s; slice s expires at s + 10 + 40, so at 100 s those up to
  // 50 s have: six.
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_window_slices_retired_total"), 6) << text;
  EXPECT_EQ(bloomtest::PrometheusSample(text, "bloom_filters_expired_total"), 1);
}

TEST_F(MetricsTest, ConnectionsAreCountedByTheirListeningPort) {
  // A listener of this process with three connections accepted, and one without any.
  auto listen_on_loopback = [] {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(listen(fd, 8), 0);
    socklen_t length = sizeof(address);
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    return std::pair<int, int>{fd, ntohs(address.sin_port)};
  };
  const auto [listener, port] = listen_on_loopback();
  const auto [idle_listener, idle_port] = listen_on_loopback();
  std::vector<int> sockets = {listener, idle_listener};
  for (int i = 0; i < 3; ++i) {
    const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    sockets.push_back(client);
    sockets.push_back(accept(listener, nullptr, nullptr));
  }
  const std::string text = metrics_->Render();
  EXPECT_EQ(
      bloomtest::PrometheusSample(text, absl::StrCat("bloom_connections{port=\"", port, "\"}")), 3)
      << text;
  EXPECT_EQ(bloomtest::PrometheusSample(
                text, absl::StrCat("bloom_connections{port=\"", idle_port, "\"}")),
            0)
      << text;
  for (int fd : sockets) close(fd);
}

TEST_F(MetricsTest, ProcessFiguresArePlausible) {
  const std::string text = metrics_->Render();
  EXPECT_GT(bloomtest::PrometheusSample(text, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(bloomtest::PrometheusSample(text, "process_open_fds"), 2);
  EXPECT_GT(bloomtest::PrometheusSample(text, "process_max_fds"),
            bloomtest::PrometheusSample(text, "process_open_fds"));
  // Started within the last hour (the test process just started).
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  EXPECT_NEAR(bloomtest::PrometheusSample(text, "process_start_time_seconds"), now, 3600);
  EXPECT_GE(bloomtest::PrometheusSample(text, "process_cpu_seconds_total"), 0);
}

TEST_F(MetricsTest, ServesTheTextFormatOverHttp) {
  ASSERT_OK(metrics_->Serve("127.0.0.1:0"));
  ASSERT_GT(metrics_->port(), 0);
  metrics_->RecordRpc(rpcs::Rpc::kStats, absl::StatusCode::kOk, absl::Microseconds(10), 0);
  const std::string response = bloomtest::HttpGet(metrics_->port(), "/metrics");
  EXPECT_NE(response.find("200 OK"), std::string::npos) << response;
  EXPECT_NE(response.find("Content-Type: text/plain"), std::string::npos) << response;
  EXPECT_NE(response.find(R"(bloom_rpc_requests_total{code="OK",method="Stats"} 1)"),
            std::string::npos)
      << response;
  EXPECT_NE(response.find("bloom_filters 0"), std::string::npos);
}

TEST_F(MetricsTest, ServeReportsAnAddressInUse) {
  ASSERT_OK(metrics_->Serve("127.0.0.1:0"));
  std::unique_ptr<ServerMetrics> second = ServerMetrics::Create(nullptr);
  absl::Status status = second->Serve(absl::StrCat("127.0.0.1:", metrics_->port()));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  // Without a store the process figures are still there.
  EXPECT_GT(bloomtest::PrometheusSample(second->Render(), "process_open_fds"), 0);
}

}  // namespace
}  // namespace metrics

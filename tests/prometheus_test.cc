// The chart's dashboard and alerts against a real Prometheus (Debian's prometheus 2.42): a
// sharded deployment on a real etcd (group a: three pods electing their primary, group b: one
// pod), TLS on every pod, writers and readers through group a's pods; Prometheus scrapes every
// pod on loopback, labelled as the chart's ServiceMonitor labels them, with the chart's rules
// rendered by helm. Checked:
// - every dashboard panel's expression, its variables filled in, returns data through
//   Prometheus' HTTP API;
// - killing group a's primary makes BloomServerFrequentPrimaryChanges fire (its threshold set
//   to one change), and stopping a follower makes BloomServerFollowerBehind fire (one write
//   behind, for 5 s), in that Prometheus.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/bloom_client.h"
#include "coordination/shard_map_record.h"
#include "gtest/gtest.h"
#include "sharding/shard_map.h"
#include "tests/elected_cluster.h"
#include "tests/support/etcd_process.h"
#include "tests/support/server_process.h"
#include "tests/support/test_pki.h"
#include "tests/support/testing.h"

namespace bloomtest {
namespace {

constexpr char kMapKey[] = "prom/shardmap";
constexpr char kGroupA[] = "prom/a";
constexpr char kGroupB[] = "prom/b";
constexpr int kPrometheusPods = 4;  // 0-2 in group a, 3 in group b
const std::string kChartPath = std::string(BLOOM_SOURCE_DIR) + "/helm/bloom-server";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// %-encoding of a query for a URL.
std::string UrlEncode(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// The pod's name as the chart's StatefulSets name them.
std::string PodName(int i) {
  return i < 3 ? absl::StrCat("rel-bloom-server-g0-", i) : "rel-bloom-server-g1-0";
}

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = EtcdProcess::Start();
    ASSERT_NE(etcd_, nullptr);
    etcd_client_ = ConnectEtcd(etcd_->endpoint());
    ASSERT_NE(etcd_client_, nullptr);
    absl::StatusOr<sharding::ShardMap> even = sharding::ShardMap::EvenSplit({kGroupA, kGroupB}, 64);
    ASSERT_TRUE(even.ok());
    map_ = *even;
    ASSERT_TRUE(coordination::CreateShardMap(*etcd_client_, kMapKey, map_).ok());
    for (int i = 0; i < kPrometheusPods; ++i) {
      dirs_.push_back(std::make_unique<TempDir>());
      ports_.push_back(FreeLoopbackPort());
      // Kept across a pod's restart, so that Prometheus goes on scraping a restarted pod (it
      // may be elected primary again).
      metrics_ports_.push_back(FreeLoopbackPort());
    }
    pods_.resize(kPrometheusPods);
    for (int i = 0; i < kPrometheusPods; ++i) StartPod(i);
  }

  void TearDown() override {
    if (prometheus_pid_ > 0) {
      kill(prometheus_pid_, SIGKILL);
      waitpid(prometheus_pid_, nullptr, 0);
      if (HasFailure()) std::printf("---- prometheus log ----\n%s\n", ReadAll(LogPath()).c_str());
    }
  }

  void StartPod(int i) {
    if (pods_[i] != nullptr) stopped_.push_back(std::move(pods_[i]));
    pods_[i] = ServerProcess::Start(
        dirs_[i]->path(),
        {"--listen=" + Target(i), "--advertise_address=" + Target(i),
         "--etcd_endpoints=" + etcd_->endpoint(),
         absl::StrCat("--cluster=", i < 3 ? kGroupA : kGroupB),
         absl::StrCat("--shard_map=", kMapKey), "--leader_ttl=2s",
         // Group b's pod has no follower to acknowledge its writes.
         absl::StrCat("--min_replica_acks=", i < 3 ? 1 : 0), "--replica_ack_timeout=2s",
         absl::StrCat("--metrics_listen=127.0.0.1:", metrics_ports_[i]),
         "--tls_cert_file=" + pki_.Path("server1.crt"),
         "--tls_key_file=" + pki_.Path("server1.key"),
         "--replication_ca_file=" + pki_.Path("ca1.crt"), "--allow_unauthenticated_replication"});
    ASSERT_NE(pods_[i], nullptr);
  }

  [[nodiscard]] std::string Target(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }
  [[nodiscard]] std::string LogPath() const { return scratch_.path() + "/prometheus.log"; }

  std::unique_ptr<bloomclient::BloomClient> Client(int i) {
    bloomclient::ClientOptions options;
    options.timeout = absl::Seconds(3);
    options.tls.enabled = true;
    options.tls.ca_file = pki_.Path("ca1.crt");
    absl::StatusOr<std::unique_ptr<bloomclient::BloomClient>> client =
        bloomclient::BloomClient::Open(Target(i), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  int PrimaryOfA() {
    std::vector<std::string> targets = {Target(0), Target(1), Target(2)};
    return NamedPrimary(*etcd_client_, kGroupA, targets);
  }

  // Prometheus, scraping every pod's metrics each second as the chart's ServiceMonitor labels
  // them, with the chart's rules rendered by helm (`rule_args`).
  void StartPrometheus(const std::string& rule_args) {
    const CommandResult rendered = RunCommand(absl::StrCat(
        BLOOM_HELM, " template rel ", kChartPath,
        " --set metrics.prometheusRule.enabled=true --show-only templates/prometheusrule.yaml ",
        rule_args));
    ASSERT_EQ(rendered.exit_code, 0) << rendered.out;
    YAML::Emitter rules;
    rules << YAML::Load(rendered.out)["spec"];
    std::ofstream(scratch_.path() + "/rules.yaml") << rules.c_str();
    std::string config = absl::StrCat(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [rules.yaml]\n"
        "scrape_configs:\n"
        "  - job_name: rel-bloom-server\n"
        "    static_configs:\n");
    for (int i = 0; i < kPrometheusPods; ++i) {
      absl::StrAppend(&config, "      - targets: ['127.0.0.1:", pods_[i]->metrics_port(),
                      "']\n        labels: {namespace: default, pod: ", PodName(i), "}\n");
    }
    std::ofstream(scratch_.path() + "/prometheus.yml") << config;
    prometheus_port_ = FreeLoopbackPort();
    prometheus_pid_ = fork();
    if (prometheus_pid_ == 0) {
      const int log = open(LogPath().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
      if (chdir(scratch_.path().c_str()) != 0) _exit(126);
      const std::string listen = absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port_);
      execl("/usr/bin/prometheus", "prometheus", "--config.file=prometheus.yml",
            "--storage.tsdb.path=data", listen.c_str(), nullptr);
      _exit(127);
    }
    ASSERT_TRUE(
        WaitFor([&] { return absl::StrContains(Get("/-/ready"), "Ready"); }, absl::Seconds(30)))
        << ReadAll(LogPath());
  }

  std::string Get(const std::string& path) { return HttpGet(prometheus_port_, path); }
  // An instant query's answer (JSON).
  std::string Query(const std::string& expr) {
    return Get("/api/v1/query?query=" + UrlEncode(expr));
  }
  // Whether `alert` is firing now (for any pod): in /api/v1/alerts each alert's labels come
  // before its state.
  bool Firing(const std::string& alert) {
    const std::string alerts = Get("/api/v1/alerts");
    const std::string name = absl::StrCat("\"alertname\":\"", alert, "\"");
    for (size_t at = alerts.find(name); at != std::string::npos; at = alerts.find(name, at + 1)) {
      const size_t state = alerts.find("\"state\":\"", at);
      if (state != std::string::npos && alerts.compare(state + 9, 7, "firing\"") == 0) return true;
    }
    return false;
  }

  TestPki pki_;
  TempDir scratch_;
  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<coordination::EtcdClient> etcd_client_;
  sharding::ShardMap map_;
  std::vector<std::unique_ptr<TempDir>> dirs_;
  std::vector<int> ports_;
  std::vector<int> metrics_ports_;
  std::vector<std::unique_ptr<ServerProcess>> pods_;
  std::vector<std::unique_ptr<ServerProcess>> stopped_;
  int prometheus_port_ = 0;
  pid_t prometheus_pid_ = -1;
};

TEST_F(PrometheusTest, EveryPanelReturnsDataAndKillsAndStopsFireTheirAlerts) {
  ASSERT_TRUE(WaitFor([&] { return PrimaryOfA() >= 0; }, absl::Seconds(30)));
  StartPrometheus(
      "--set metrics.prometheusRule.thresholds.primaryChangesIn10m=1 "
      "--set metrics.prometheusRule.thresholds.followerLagWrites=1 "
      "--set metrics.prometheusRule.thresholds.followerBehindFor=5s");
  // Traffic through group a's pods: adds and checks of both groups' filters (group b's are
  // forwarded), and a call that fails (NOT_FOUND).
  std::atomic<bool> stop{false};
  std::atomic<int> acknowledged{0};
  std::thread writer([&] {
    std::vector<std::unique_ptr<bloomclient::BloomClient>> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(Client(i));
    bloom::v1::FilterSpec spec;
    spec.set_capacity(100'000);
    spec.set_error_rate(0.01);
    for (int n = 0; !stop.load(); ++n) {
      bloomclient::BloomClient& client = *clients[n % 3];
      const std::string name = absl::StrCat("prom:", n % 8);
      if (client.Add(name, {absl::StrCat("item-", n)}, &spec).ok()) acknowledged.fetch_add(1);
      (void)client.MightContain(name, {absl::StrCat("item-", n)});
      if (n % 50 == 0) (void)client.Stats("prom:missing");
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  // Stopped and joined however the test ends (a failed ASSERT returns early).
  struct StopAndJoin {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~StopAndJoin() {
      stop.store(true);
      thread.join();
    }
  } join_writer{stop, writer};
  ASSERT_TRUE(WaitFor([&] { return acknowledged.load() > 200; }, absl::Seconds(30)));

  // Every panel of the shipped dashboard, its variables filled in as Grafana would.
  const std::string dashboard = ReadAll(kChartPath + "/dashboards/bloom-server.json");
  int panels = 0;
  for (size_t at = dashboard.find("\"expr\": \""); at != std::string::npos;
       at = dashboard.find("\"expr\": \"", at + 1)) {
    const size_t begin = at + 9;
    std::string expr = dashboard.substr(begin, dashboard.find("\",\n", begin) - begin);
    expr = absl::StrReplaceAll(expr, {{"\\\"", "\""},
                                      {"$namespace", "default"},
                                      {"$job", "rel-bloom-server"},
                                      {"$pod", ".*"},
                                      {"$__rate_interval", "15s"}});
    ++panels;
    bool data = false;
    std::string answer;
    // Rates need two scrapes of what they count: give each expression a few seconds.
    for (int attempt = 0; attempt < 10 && !data; ++attempt) {
      answer = Query(expr);
      data = absl::StrContains(answer, "\"status\":\"success\"") &&
             !absl::StrContains(answer, "\"result\":[]");
      if (!data) absl::SleepFor(absl::Seconds(1));
    }
    EXPECT_TRUE(data) << expr << " returned no data: " << answer;
  }
  EXPECT_GE(panels, 40);

  // The primary of group a killed (and restarted): the primary-change alert fires.
  const int primary = PrimaryOfA();
  ASSERT_GE(primary, 0);
  EXPECT_FALSE(Firing("BloomServerFrequentPrimaryChanges"));
  pods_[primary]->Kill();
  ASSERT_TRUE(
      WaitFor([&] { return PrimaryOfA() >= 0 && PrimaryOfA() != primary; }, absl::Seconds(30)));
  StartPod(primary);
  EXPECT_TRUE(
      WaitFor([&] { return Firing("BloomServerFrequentPrimaryChanges"); }, absl::Seconds(60)))
      << Get("/api/v1/alerts");

  // A follower of group a stopped while writes go on: the primary sees it fall behind, and
  // the follower-behind alert fires.
  const int new_primary = PrimaryOfA();
  ASSERT_GE(new_primary, 0);
  const int follower = new_primary == 0 ? 1 : 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        return absl::StrContains(Query("bloom_replication_follower_lag_sequences"),
                                 absl::StrCat("\"follower\":\"", Target(follower)));
      },
      absl::Seconds(40)))
      << "primary " << Target(new_primary) << ", follower " << Target(follower) << ": "
      << Query("bloom_replication_follower_lag_sequences") << "\nup: " << Query("up")
      << "\nroles: " << Query("bloom_replication_role");
  EXPECT_FALSE(Firing("BloomServerFollowerBehind"));
  pods_[follower]->Signal(SIGSTOP);
  EXPECT_TRUE(WaitFor([&] { return Firing("BloomServerFollowerBehind"); }, absl::Seconds(60)))
      << Get("/api/v1/alerts");
  pods_[follower]->Signal(SIGCONT);
}

}  // namespace
}  // namespace bloomtest

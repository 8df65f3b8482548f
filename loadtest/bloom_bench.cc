// bloom-bench: load generator and verifier for bloom-server, and for Redis as a baseline.
//
//   bloom-bench --target=bloom --address=127.0.0.1:50051 --clients=8 --batch=1000
//     --mix=query --preload=1000000 --duration=10s --server_pid=$PID
//
// Every key it adds and sees acknowledged must read as present afterwards: a false negative
// fails the run (exit 1). Queries include keys from a namespace never added, whose "present"
// answers give the observed false-positive rate.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/http_get.h"
#include "loadtest/echo_server.h"
#include "loadtest/targets.h"

ABSL_FLAG(std::string, target, "bloom",
          "bloom, bloom-cuckoo (CUCKOO filters), redis-bitmap, redis-bf or redis-cf (RedisBloom's "
          "CF.*)");
ABSL_FLAG(std::string, transport, "unary",
          "bloom target: unary (calls), pipeline (a raw Pipeline stream per client, one "
          "operation in flight) or client (all clients share the client library's pipelined "
          "mode, which coalesces their calls)");
ABSL_FLAG(std::string, serve_echo, "",
          "instead of a benchmark, serve the bare echo service (the gRPC floor) on this "
          "host:port until SIGTERM; see --port_file");
ABSL_FLAG(std::string, port_file, "", "with --serve_echo: write the bound port here");
ABSL_FLAG(std::string, address, "127.0.0.1:50051", "host:port of the target");
ABSL_FLAG(int, clients, 8, "concurrent clients (threads, one connection each)");
ABSL_FLAG(int, batch, 1000, "keys per request");
ABSL_FLAG(std::string, mix, "both", "add, query, or both (half and half)");
ABSL_FLAG(bool, count, false,
          "queries are counts (cuckoo targets: bloom-cuckoo, redis-cf), a count above 0 "
          "reading present");
ABSL_FLAG(std::string, keys, "unique", "unique, uniform or zipf (over --key_space)");
ABSL_FLAG(uint64_t, key_space, 100'000'000, "number of distinct keys");
ABSL_FLAG(uint64_t, capacity, 1'000'000, "filter capacity");
ABSL_FLAG(double, error_rate, 0.01, "filter error rate");
ABSL_FLAG(int, filters, 1, "number of filters; each request picks one at random");
ABSL_FLAG(std::string, filter_choice, "uniform",
          "how a request picks its filter: uniform, or zipf (rank r with weight 1/(r+1)^s)");
ABSL_FLAG(double, zipf_s, 1.1, "the exponent of --filter_choice=zipf");
ABSL_FLAG(bool, create_filters, false,
          "before measuring, create every filter (one add each, unmeasured), so the run "
          "measures filters that exist, resident or not");
ABSL_FLAG(uint64_t, preload, 0, "keys added before measuring (for query workloads)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "how long to measure");
ABSL_FLAG(uint64_t, ops, 0, "stop after this many keys instead (0: use --duration)");
ABSL_FLAG(int, server_pid, 0, "pid of the server, for its CPU time and RSS");
ABSL_FLAG(std::string, more_server_pids, "",
          "pids of more servers (comma-separated: the other groups of a sharded deployment), "
          "whose CPU time counts with --server_pid's");
ABSL_FLAG(double, rate, 0,
          "keys per second over all clients (each paces its requests to its share); 0: as fast "
          "as they go. Compares servers' CPU per key at one load: a server's CPU per key "
          "depends on the load (fewer calls to share a RocksDB write and a wake-up as it drops)");
ABSL_FLAG(int, replica_pid, 0,
          "pid of a follower of the server (--replicate_from), for its CPU time per key applied");
ABSL_FLAG(int, replica_metrics_port, 0,
          "the follower's --metrics_listen port: its bloom_replica_lag_seconds is sampled every "
          "100 ms, and the run waits for it to catch up before reading its CPU time");
ABSL_FLAG(bool, json, false, "print one JSON object");
ABSL_FLAG(std::string, label, "", "a name for this run in the output");

namespace {

// One bit per key id: set once an Add that contained the key was acknowledged.
class AckedKeys {
 public:
  explicit AckedKeys(uint64_t n) : words_((n + 63) / 64) {}
  void Set(uint64_t id) { words_[id / 64].fetch_or(1ULL << (id % 64), std::memory_order_release); }
  [[nodiscard]] bool Get(uint64_t id) const {
    return words_[id / 64].load(std::memory_order_acquire) & (1ULL << (id % 64));
  }

 private:
  std::vector<std::atomic<uint64_t>> words_;
};

// YCSB's Zipfian generator (Gray et al.), theta 0.99, over [0, n).
class Zipf {
 public:
  explicit Zipf(uint64_t n) : n_(n) {
    for (uint64_t i = 1; i <= n; ++i) zeta_n_ += 1.0 / std::pow(static_cast<double>(i), kTheta);
    const double zeta2 = 1 + std::pow(0.5, kTheta);
    alpha_ = 1 / (1 - kTheta);
    eta_ = (1 - std::pow(2.0 / n, 1 - kTheta)) / (1 - zeta2 / zeta_n_);
  }
  uint64_t Next(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    const double uz = u * zeta_n_;
    if (uz < 1) return 0;
    if (uz < 1 + std::pow(0.5, kTheta)) return 1;
    return std::min<uint64_t>(n_ - 1,
                              static_cast<uint64_t>(n_ * std::pow(eta_ * u - eta_ + 1, alpha_)));
  }

 private:
  static constexpr double kTheta = 0.99;
  uint64_t n_;
  double zeta_n_ = 0, alpha_ = 0, eta_ = 0;
};

// Zipf over [0, n) with exponent s (any s > 0): the cumulative weights, searched per draw.
class FilterZipf {
 public:
  FilterZipf(uint64_t n, double s) : cdf_(n) {
    double total = 0;
    for (uint64_t r = 0; r < n; ++r) cdf_[r] = total += 1 / std::pow(static_cast<double>(r + 1), s);
    for (double& c : cdf_) c /= total;
  }
  uint64_t Next(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return std::min<uint64_t>(cdf_.size() - 1,
                              std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

struct ProcessSample {
  double cpu_seconds = 0;
  uint64_t rss_bytes = 0;
};

ProcessSample SampleProcess(int pid) {
  ProcessSample sample;
  if (pid <= 0) return sample;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the command name may contain spaces
  if (close != std::string::npos) {
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    sample.cpu_seconds = static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
  }
  // The process's CPU clock counts nanoseconds (every thread's, exited ones too) where
  // /proc/PID/stat counts 10 ms ticks: a 100 ms run would be measured to +-10%.
  clockid_t clock;
  timespec cpu;
  if (clock_getcpuclockid(pid, &clock) == 0 && clock_gettime(clock, &cpu) == 0) {
    sample.cpu_seconds = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) / 1e9;
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) sample.rss_bytes = std::stoull(line.substr(6)) * 1024;
  }
  return sample;
}

struct ClientResult {
  uint64_t keys = 0, requests = 0, false_negatives = 0, absent_probes = 0, false_positives = 0;
  std::vector<double> latencies_us;
  std::string error;
};

// --server_pid's process and --more_server_pids', summed (RSS too).
ProcessSample SampleServers() {
  ProcessSample sum = SampleProcess(absl::GetFlag(FLAGS_server_pid));
  for (absl::string_view pid :
       absl::StrSplit(absl::GetFlag(FLAGS_more_server_pids), ',', absl::SkipEmpty())) {
    int number = 0;
    if (!absl::SimpleAtoi(pid, &number)) continue;
    const ProcessSample one = SampleProcess(number);
    sum.cpu_seconds += one.cpu_seconds;
    sum.rss_bytes += one.rss_bytes;
  }
  return sum;
}

std::string FilterName(int index) { return absl::StrCat("bench-", index); }

uint64_t TotalKeys(const std::vector<ClientResult>& results) {
  uint64_t keys = 0;
  for (const ClientResult& r : results) keys += r.keys;
  return keys;
}

// Samples a follower's bloom_replica_lag_seconds every 100 ms while the run goes on.
class ReplicaLag {
 public:
  explicit ReplicaLag(int metrics_port) : port_(metrics_port) {
    if (port_ <= 0) return;
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        const double lag = Sample("bloom_replica_lag_seconds");
        if (lag >= 0 && std::isfinite(lag)) {
          std::lock_guard<std::mutex> lock(mu_);
          lags_.push_back(lag);
        }
        absl::SleepFor(absl::Milliseconds(100));
      }
    });
  }
  ~ReplicaLag() { Stop(); }

  // Stops sampling; then waits (up to `timeout`) until the follower has applied everything.
  bool StopAndWaitCaughtUp(absl::Duration timeout) {
    Stop();
    if (port_ <= 0) return true;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (Sample("bloom_replica_lag_sequences") == 0) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }
  double Percentile(double p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (lags_.empty()) return 0;
    std::vector<double> sorted = lags_;
    std::sort(sorted.begin(), sorted.end());
    return sorted[static_cast<size_t>(p * (sorted.size() - 1))];
  }
  size_t Samples() {
    std::lock_guard<std::mutex> lock(mu_);
    return lags_.size();
  }

 private:
  [[nodiscard]] double Sample(const std::string& series) const {
    return bloomhttp::PrometheusSample(bloomhttp::HttpGet(port_, "/metrics"), series);
  }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  const int port_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<double> lags_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (const std::string echo = absl::GetFlag(FLAGS_serve_echo); !echo.empty()) {
    return loadtest::RunEchoServer(echo, absl::GetFlag(FLAGS_port_file));
  }
  const std::string transport = absl::GetFlag(FLAGS_transport);
  const std::string kind = absl::GetFlag(FLAGS_target), address = absl::GetFlag(FLAGS_address);
  const int clients = absl::GetFlag(FLAGS_clients), batch = absl::GetFlag(FLAGS_batch);
  const std::string mix = absl::GetFlag(FLAGS_mix), keys_kind = absl::GetFlag(FLAGS_keys);
  const uint64_t key_space = absl::GetFlag(FLAGS_key_space);
  const uint64_t capacity = absl::GetFlag(FLAGS_capacity);
  const double error_rate = absl::GetFlag(FLAGS_error_rate);
  const int filters = std::max(1, absl::GetFlag(FLAGS_filters));
  const std::string filter_choice = absl::GetFlag(FLAGS_filter_choice);
  const bool count_queries = absl::GetFlag(FLAGS_count);
  if (clients < 1 || batch < 1 || (mix != "add" && mix != "query" && mix != "both") ||
      (keys_kind != "unique" && keys_kind != "uniform" && keys_kind != "zipf") ||
      (filter_choice != "uniform" && filter_choice != "zipf") || absl::GetFlag(FLAGS_zipf_s) <= 0) {
    std::fprintf(stderr,
                 "bloom-bench: bad --clients, --batch, --mix, --keys, --filter_choice or "
                 "--zipf_s\n");
    return 2;
  }
  std::unique_ptr<FilterZipf> filter_zipf;
  if (filter_choice == "zipf") {
    filter_zipf = std::make_unique<FilterZipf>(filters, absl::GetFlag(FLAGS_zipf_s));
  }

  // Prepare the filters (the redis-bf target reports a server without the module here).
  {
    absl::StatusOr<std::unique_ptr<loadtest::Target>> target =
        loadtest::MakeTarget(kind, address, capacity, error_rate, transport);
    if (!target.ok()) {
      std::fprintf(stderr, "bloom-bench: %s\n", target.status().ToString().c_str());
      return 1;
    }
    // Many small filters are created on first add, like per-user filters in practice
    // (bloom: create_if_missing; a Redis bitmap grows on SETBIT): only the first is prepared,
    // which also finds out whether a Redis server has the Bloom module.
    for (int f = 0; f < (filters > 1 ? 1 : filters); ++f) {
      absl::Status prepared = (*target)->Prepare(FilterName(f), capacity, error_rate);
      if (absl::IsUnimplemented(prepared)) {
        std::printf("bloom-bench: skipped %s: %s\n", kind.c_str(),
                    static_cast<std::string>(prepared.message()).c_str());
        return 0;
      }
      if (!prepared.ok()) {
        std::fprintf(stderr, "bloom-bench: prepare: %s\n", prepared.ToString().c_str());
        return 1;
      }
    }
  }

  AckedKeys acked(key_space);
  std::atomic<uint64_t> next_unique{0};
  std::unique_ptr<Zipf> zipf;
  if (keys_kind == "zipf") zipf = std::make_unique<Zipf>(key_space);

  // Preload, unmeasured: keys 0..preload-1, in batches, from all clients.
  const uint64_t preload = std::min(absl::GetFlag(FLAGS_preload), key_space);
  bool bulk_loaded = false;
  if (preload > 0 && filters == 1) {
    absl::Status bulk = (*loadtest::MakeTarget(kind, address, capacity, error_rate, transport))
                            ->BulkLoad(FilterName(0), preload);
    if (!bulk.ok() && !absl::IsUnimplemented(bulk)) {
      std::fprintf(stderr, "bloom-bench: bulk preload failed: %s\n", bulk.ToString().c_str());
      return 1;
    }
    bulk_loaded = bulk.ok();
    if (bulk_loaded) {
      for (uint64_t id = 0; id < preload; ++id) acked.Set(id);
    }
  }
  if (!bulk_loaded) {
    std::atomic<uint64_t> next{0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> threads;
    threads.reserve(clients);
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        auto target = *loadtest::MakeTarget(kind, address, capacity, error_rate, transport);
        std::vector<std::string> keys;
        std::vector<bool> added;
        for (uint64_t first; (first = next.fetch_add(10'000)) < preload;) {
          keys.clear();
          for (uint64_t id = first; id < std::min(preload, first + 10'000); ++id) {
            keys.push_back(absl::StrCat(id));
          }
          if (!target->Add(FilterName(static_cast<int>(first / 10'000 % filters)), keys, added)
                   .ok()) {
            failed = true;
          }
          // Preloaded keys of filter f are only verified in filter f: keep it simple, mark
          // them only when there is one filter.
          if (filters == 1) {
            for (uint64_t id = first; id < std::min(preload, first + 10'000); ++id) acked.Set(id);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    if (failed) {
      std::fprintf(stderr, "bloom-bench: preload failed\n");
      return 1;
    }
  }
  if (keys_kind == "unique") next_unique = preload;
  if (absl::GetFlag(FLAGS_create_filters) && filters > 1) {
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> threads;
    threads.reserve(clients);
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        auto target = *loadtest::MakeTarget(kind, address, capacity, error_rate, transport);
        std::vector<std::string> keys = {"created"};
        std::vector<bool> added;
        for (int f; (f = next.fetch_add(1)) < filters;) {
          if (!target->Add(FilterName(f), keys, added).ok()) failed = true;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (failed) {
      std::fprintf(stderr, "bloom-bench: creating the filters failed\n");
      return 1;
    }
  }

  const ProcessSample before = SampleServers();
  const ProcessSample replica_before = SampleProcess(absl::GetFlag(FLAGS_replica_pid));
  ReplicaLag replica_lag(absl::GetFlag(FLAGS_replica_metrics_port));
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + absl::GetFlag(FLAGS_duration);
  const uint64_t ops_limit = absl::GetFlag(FLAGS_ops);
  std::atomic<uint64_t> keys_done{0};
  std::vector<ClientResult> results(clients);
  std::vector<std::thread> threads;
  threads.reserve(clients);
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      ClientResult& r = results[c];
      absl::StatusOr<std::unique_ptr<loadtest::Target>> made =
          loadtest::MakeTarget(kind, address, capacity, error_rate, transport);
      if (!made.ok()) {
        r.error = made.status().ToString();
        return;
      }
      loadtest::Target& target = **made;
      std::mt19937_64 rng(c * 7919 + 1);
      std::vector<std::string> keys;
      std::vector<uint64_t> ids;
      std::vector<bool> must_be_present, answers;
      std::vector<uint32_t> counts;
      auto next_id = [&]() -> uint64_t {
        if (keys_kind == "unique") return next_unique.fetch_add(1) % key_space;
        if (zipf) return zipf->Next(rng);
        return std::uniform_int_distribution<uint64_t>(0, key_space - 1)(rng);
      };
      const double client_rate = absl::GetFlag(FLAGS_rate) / clients;
      while (ops_limit ? keys_done.load() < ops_limit : absl::Now() < deadline) {
        if (client_rate > 0) {  // this client's next request is due once its share allows
          const absl::Time due = start + absl::Seconds(static_cast<double>(r.keys) / client_rate);
          if (const absl::Time now = absl::Now(); now < due) absl::SleepFor(due - now);
        }
        const bool add = mix == "add" || (mix == "both" && rng() % 2 == 0);
        const std::string filter =
            FilterName(static_cast<int>(filter_zipf ? filter_zipf->Next(rng) : rng() % filters));
        keys.clear();
        ids.clear();
        must_be_present.clear();
        for (int i = 0; i < batch; ++i) {
          if (!add && rng() % 10 == 0) {
            keys.push_back(absl::StrCat("absent:", rng()));  // never added
            ids.push_back(UINT64_MAX);
            must_be_present.push_back(false);
            continue;
          }
          // Unique-key queries ask for keys already added (up to the counter).
          uint64_t id = !add && keys_kind == "unique"
                            ? std::uniform_int_distribution<uint64_t>(
                                  0, std::max<uint64_t>(1, next_unique.load()) - 1)(rng) %
                                  key_space
                            : next_id();
          keys.push_back(absl::StrCat(id));
          ids.push_back(id);
          // Read before sending: an add acknowledged before this request must show.
          must_be_present.push_back(filters == 1 && acked.Get(id));
        }
        const absl::Time sent = absl::Now();
        absl::Status status;
        if (add) {
          status = target.Add(filter, keys, answers);
        } else if (count_queries) {
          status = target.Count(filter, keys, counts);
          answers.assign(counts.size(), false);
          for (size_t i = 0; i < counts.size(); ++i) answers[i] = counts[i] > 0;
        } else {
          status = target.MightContain(filter, keys, answers);
        }
        r.latencies_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - sent));
        if (!status.ok() || answers.size() != keys.size()) {
          r.error = status.ok() ? "wrong number of answers" : status.ToString();
          return;
        }
        ++r.requests;
        r.keys += keys.size();
        keys_done += keys.size();
        for (size_t i = 0; i < keys.size(); ++i) {
          if (add) {
            if (filters == 1) acked.Set(ids[i]);
          } else if (ids[i] == UINT64_MAX) {
            ++r.absent_probes;
            r.false_positives += answers[i];
          } else if (must_be_present[i] && !answers[i]) {
            ++r.false_negatives;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const ProcessSample after = SampleServers();
  // The follower's CPU once it has applied everything the run wrote.
  const bool caught_up = replica_lag.StopAndWaitCaughtUp(absl::Seconds(60));
  const ProcessSample replica_after = SampleProcess(absl::GetFlag(FLAGS_replica_pid));
  const double replica_cpu_per_million =
      TotalKeys(results) > 0
          ? (replica_after.cpu_seconds - replica_before.cpu_seconds) / (TotalKeys(results) / 1e6)
          : 0;

  ClientResult total;
  std::vector<double> latencies;
  for (const ClientResult& r : results) {
    if (!r.error.empty()) {
      std::fprintf(stderr, "bloom-bench: client failed: %s\n", r.error.c_str());
      return 1;
    }
    total.keys += r.keys;
    total.requests += r.requests;
    total.false_negatives += r.false_negatives;
    total.absent_probes += r.absent_probes;
    total.false_positives += r.false_positives;
    latencies.insert(latencies.end(), r.latencies_us.begin(), r.latencies_us.end());
  }
  std::sort(latencies.begin(), latencies.end());
  auto percentile = [&](double p) {
    return latencies.empty() ? 0.0 : latencies[static_cast<size_t>(p * (latencies.size() - 1))];
  };
  const double keys_per_second = total.keys / seconds;
  const double cpu = after.cpu_seconds - before.cpu_seconds;
  const double cpu_per_million = total.keys > 0 ? cpu / (total.keys / 1e6) : 0;
  const double fpr =
      total.absent_probes ? static_cast<double>(total.false_positives) / total.absent_probes : 0;
  const std::string label = absl::GetFlag(FLAGS_label).empty()
                                ? (kind == "bloom" ? absl::StrCat(kind, "/", transport) : kind)
                                : absl::GetFlag(FLAGS_label);
  if (absl::GetFlag(FLAGS_json)) {
    std::printf(
        "{\"label\":\"%s\",\"target\":\"%s\",\"clients\":%d,\"batch\":%d,\"mix\":\"%s\","
        "\"keys\":%llu,\"seconds\":%.3f,\"keys_per_second\":%.0f,\"requests_per_second\":%.0f,"
        "\"latency_us\":{\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f},\"false_negatives\":%llu,"
        "\"observed_fpr\":%.6f,\"server_cpu_seconds_per_million_keys\":%.4f,"
        "\"server_rss_bytes\":%llu,\"replica_cpu_seconds_per_million_keys\":%.4f,"
        "\"replica_lag_seconds\":{\"p50\":%.4f,\"p99\":%.4f,\"max\":%.4f},"
        "\"replica_caught_up\":%s}\n",
        label.c_str(), kind.c_str(), clients, batch,
        (count_queries ? absl::StrCat(mix, ",count") : mix).c_str(),
        static_cast<unsigned long long>(total.keys), seconds, keys_per_second,
        total.requests / seconds, percentile(0.5), percentile(0.99), percentile(0.999),
        static_cast<unsigned long long>(total.false_negatives), fpr, cpu_per_million,
        static_cast<unsigned long long>(after.rss_bytes), replica_cpu_per_million,
        replica_lag.Percentile(0.5), replica_lag.Percentile(0.99), replica_lag.Percentile(1),
        caught_up ? "true" : "false");
  } else {
    std::printf("%s: %llu keys in %.2f s = %.0f keys/s, %.0f requests/s\n", label.c_str(),
                static_cast<unsigned long long>(total.keys), seconds, keys_per_second,
                total.requests / seconds);
    std::printf("  latency per request: p50 %.0f us, p99 %.0f us, p99.9 %.0f us\n", percentile(0.5),
                percentile(0.99), percentile(0.999));
    std::printf("  false negatives: %llu; observed FPR %.4f%% on %llu absent keys\n",
                static_cast<unsigned long long>(total.false_negatives), fpr * 100,
                static_cast<unsigned long long>(total.absent_probes));
    if (absl::GetFlag(FLAGS_server_pid) > 0) {
      std::printf("  server: %.3f CPU s per million keys, RSS %.1f MB\n", cpu_per_million,
                  after.rss_bytes / 1e6);
    }
    if (absl::GetFlag(FLAGS_replica_pid) > 0) {
      std::printf("  follower: %.3f CPU s per million keys applied%s\n", replica_cpu_per_million,
                  caught_up ? "" : " (NOT caught up after 60 s)");
    }
    if (absl::GetFlag(FLAGS_replica_metrics_port) > 0) {
      std::printf("  follower lag: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%zu samples)\n",
                  replica_lag.Percentile(0.5) * 1e3, replica_lag.Percentile(0.99) * 1e3,
                  replica_lag.Percentile(1) * 1e3, replica_lag.Samples());
    }
  }
  return total.false_negatives == 0 ? 0 : 1;
}

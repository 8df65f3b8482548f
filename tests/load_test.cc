// Races and a bounded soak against the real server.
//
// RaceTest: many clients Reserve/Delete/Add/MightContain/Export/Import the same few names at
// once: only the expected codes, no deadlock, and afterwards every filter that exists answers
// consistently.
// SoakTest: 64 clients mix every RPC for BLOOM_SOAK_SECONDS (default 60 in CI): no unexpected
// errors, latencies recorded, server RSS and open file descriptors stay bounded.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloomclient::BloomClient;
using bloomtest::ServerProcess;

bloom::v1::FilterSpec Spec(uint64_t capacity, double error_rate) {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(capacity);
  spec.set_error_rate(error_rate);
  return spec;
}

// Resident memory of `pid` in kB (VmRSS), and its number of open file descriptors.
uint64_t RssKb(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    uint64_t kb = 0;
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      fields >> kb;
      return kb;
    }
  }
  return 0;
}

int OpenFds(pid_t pid) {
  return static_cast<int>(
      std::distance(std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd")),
                    std::filesystem::directory_iterator()));
}

// What a racing client may legitimately get: the filter was deleted or created meanwhile. A
// call that creates its filter (Reserve, Add with create_if_missing) never answers NOT_FOUND.
bool Expected(const absl::Status& status, bool creates) {
  return status.ok() || (absl::IsNotFound(status) && !creates) || absl::IsAlreadyExists(status);
}

TEST(RaceTest, ReserveDeleteAddExportImportOnSameNames) {
  bloomtest::TempDir data;
  // Every client here is one peer (127.0.0.1): let them all transfer at once, as 12 pods would.
  auto server = ServerProcess::Start(
      data.path(), {"--checkpoint_interval=50ms", "--max_transfers_per_client=16"});
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 12;
  const std::vector<std::string> names = {"a", "b", "c"};
  std::atomic<int> unexpected{0}, operations{0};
  std::vector<std::thread> clients;
  const absl::Time end = absl::Now() + absl::Seconds(5);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = BloomClient::Connect(server->target());
      std::mt19937 rng(c);
      const bloom::v1::FilterSpec spec = Spec(1000, 0.01);
      while (absl::Now() < end) {
        const std::string& name = names[rng() % names.size()];
        absl::Status status;
        const unsigned operation = rng() % 7;
        switch (operation) {
          case 0:
            status = client->Reserve(name, spec).status();
            break;
          case 1:
            status = client->Delete(name);
            break;
          case 2:
            status = client->Add(name, {absl::StrCat("x", rng() % 5000)}, &spec).status();
            break;
          case 3:
            status = client->MightContain(name, {"x1", "x2"}).status();
            break;
          case 4:
            status = client->Stats(name).status();
            break;
          case 5: {
            std::stringstream dump;
            status = client->Export(name, dump);
            if (status.ok()) {
              status = client->Import(absl::StrCat(name, "-copy"), dump).status();
              if (status.ok()) status = client->Delete(absl::StrCat(name, "-copy"));
            }
            break;
          }
          case 6:
            status = client->List("", 10).status();
            break;
        }
        if (!Expected(status, /*creates=*/operation == 0 || operation == 2)) {
          ++unexpected;
          ADD_FAILURE() << "unexpected: " << status;
        }
        ++operations;
      }
    });
  }
  for (std::thread& client : clients) client.join();  // a deadlock would hang here (timeout)
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(operations.load(), 100);
  // Whatever survived is consistent: an existing filter answers for what its Stats say.
  auto client = BloomClient::Connect(server->target());
  for (const std::string& name : names) {
    absl::StatusOr<bloom::v1::FilterStats> stats = client->Stats(name);
    if (absl::IsNotFound(stats.status())) continue;
    ASSERT_OK(stats.status());
    EXPECT_EQ(stats->spec().capacity(), 1000u);
    ASSERT_OK(client->Add(name, {"final"}).status());
    EXPECT_TRUE((*client->MightContain(name, {"final"}))[0]);
  }
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(SoakTest, SixtyFourClientsMixingAllRpcs) {
  const char* env = std::getenv("BLOOM_SOAK_SECONDS");
  int seconds = 60;
  if (env != nullptr && !absl::SimpleAtoi(env, &seconds)) seconds = 60;
  bloomtest::TempDir data;
  auto server = ServerProcess::Start(data.path(), {"--checkpoint_interval=1s"});
  ASSERT_NE(server, nullptr);
  {
    auto setup = BloomClient::Connect(server->target());
    for (int f = 0; f < 8; ++f) {
      ASSERT_OK(setup->Reserve(absl::StrCat("soak-", f), Spec(100'000, 0.01)).status());
    }
  }
  constexpr int kClients = 64;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> requests{0}, unexpected{0};
  // Per client, so that a client stuck behind the others (a lost answer, a hung stream) shows.
  std::vector<std::atomic<uint64_t>> answered(kClients);
  std::mutex latency_mu;
  std::vector<double> latencies_us;
  uint64_t rss_after_warmup = 0;
  int fds_after_warmup = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = BloomClient::Connect(server->target());
      std::mt19937 rng(c);
      std::vector<double> mine;
      uint64_t next = 0;
      while (!stop.load()) {
        const std::string name = absl::StrCat("soak-", rng() % 8);
        std::vector<std::string> items;
        for (int i = 0; i < 50; ++i) items.push_back(absl::StrCat(c, ":", next++ % 200'000));
        const absl::Time start = absl::Now();
        absl::Status status;
        switch (rng() % 10) {
          case 0:
          case 1:
          case 2:
            status = client->Add(name, items).status();
            break;
          case 3:
          case 4:
          case 5:
          case 6:
            status = client->MightContain(name, items).status();
            break;
          case 7:
            status = client->Stats(name).status();
            break;
          case 8:
            status = client->List("soak-").status();
            break;
          case 9: {
            const std::string scratch = absl::StrCat("scratch-", c);
            const bloom::v1::FilterSpec spec = Spec(1000, 0.01);
            status = client->Add(scratch, {"y"}, &spec).status();
            if (status.ok()) status = client->Delete(scratch);
            break;
          }
        }
        mine.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
        ++requests;
        answered[c].fetch_add(1, std::memory_order_relaxed);
        if (!status.ok()) {
          ++unexpected;
          ADD_FAILURE() << status;
        }
      }
      std::lock_guard<std::mutex> lock(latency_mu);
      latencies_us.insert(latencies_us.end(), mine.begin(), mine.end());
    });
  }
  // Warm-up, half the run: filters filled, pools grown, and RocksDB's memtables (64 MB shared)
  // filled and flushed at least once, so that what grows after it is a leak.
  const int warmup_seconds = std::max(2, seconds / 2);
  absl::SleepFor(absl::Seconds(warmup_seconds));
  rss_after_warmup = RssKb(server->pid());
  fds_after_warmup = OpenFds(server->pid());
  std::vector<uint64_t> answered_at_warmup;
  for (const std::atomic<uint64_t>& count : answered) answered_at_warmup.push_back(count.load());
  absl::SleepFor(absl::Seconds(seconds - warmup_seconds));
  const uint64_t rss_end = RssKb(server->pid());
  const int fds_end = OpenFds(server->pid());
  stop.store(true);
  for (std::thread& client : clients) client.join();

  std::sort(latencies_us.begin(), latencies_us.end());
  auto percentile = [&](double p) {
    return latencies_us[static_cast<size_t>(p * (latencies_us.size() - 1))];
  };
  RecordProperty("requests", std::to_string(requests.load()));
  RecordProperty("p50_us", std::to_string(percentile(0.5)));
  RecordProperty("p99_us", std::to_string(percentile(0.99)));
  RecordProperty("p999_us", std::to_string(percentile(0.999)));
  RecordProperty("rss_kb_after_warmup", std::to_string(rss_after_warmup));
  RecordProperty("rss_kb_end", std::to_string(rss_end));
  RecordProperty("fds_after_warmup", std::to_string(fds_after_warmup));
  RecordProperty("fds_end", std::to_string(fds_end));
  EXPECT_EQ(unexpected.load(), 0u);
  // Every client was still being answered in the second half. Throughput itself is measured by
  // benchmarks (service_benchmark, bloom-bench), not asserted here.
  for (int c = 0; c < kClients; ++c) {
    EXPECT_GT(answered[c].load(), answered_at_warmup[c]) << "client " << c << " got no answer";
  }
  // No leak: after warm-up, memory grows by at most a quarter plus 64 MB (RocksDB memtables
  // fill and flush), and descriptors by at most a few (new WAL and SST files come and go).
  EXPECT_LT(rss_end, rss_after_warmup * 5 / 4 + 64 * 1024)
      << "RSS " << rss_after_warmup << " kB -> " << rss_end << " kB";
  EXPECT_LT(fds_end, fds_after_warmup + 16) << fds_after_warmup << " -> " << fds_end;
  EXPECT_EQ(server->Terminate(), 0);
}

}  // namespace

// Crash test: concurrent writers (unary calls, and a pipelined client whose calls coalesce over a
// Pipeline stream) add unique items to a real bloom-server while a killer sends
// SIGKILL at random moments (during adds and checkpoints, during start-up recovery, during a
// SIGTERM shutdown). After every restart, every item whose Add was acknowledged must read as
// present, counters must cover them, reserved filters keep their spec, deleted ones stay deleted.
//
// Modes: default, --sync, and evicting (a 1 MiB --memory_limit, and one writer adding to 2,000
// small per-user filters made by create_if_missing, so filters are evicted and loaded again
// all the time, also while the killer strikes; every other start-up is --lazy_start).
// CI size: 20 cycles and at least 1M acknowledged items per mode (300,000 when evicting). A soak:
//   BLOOM_CRASH_CYCLES=500 BLOOM_CRASH_MIN_ITEMS=50000000 build/tests/crash/crash_test
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
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

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  int parsed = 0;
  return value != nullptr && absl::SimpleAtoi(value, &parsed) ? parsed : fallback;
}

bloom::v1::FilterSpec Spec(uint64_t capacity, double error_rate, bool non_scaling = false) {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(capacity);
  spec.set_error_rate(error_rate);
  spec.set_non_scaling(non_scaling);
  return spec;
}

// One acknowledged batch: items "<filter>/<writer>/<first..first+count-1>".
struct AckedBatch {
  std::string filter;
  int writer;
  uint64_t first;
  uint32_t count;
};

std::vector<std::string> BatchItems(const AckedBatch& b) {
  std::vector<std::string> items;
  items.reserve(b.count);
  for (uint64_t i = b.first; i < b.first + b.count; ++i) {
    items.push_back(absl::StrCat(b.filter, "/", b.writer, "/", i));
  }
  return items;
}

enum class KillMoment { kDuringAdds, kDuringStartup, kDuringShutdown };
enum class Mode { kDefault, kSync, kEvicting };

class CrashTest : public ::testing::TestWithParam<Mode> {
 protected:
  // `cycle` alternates the evicting mode's start-ups between eager and lazy (--lazy_start).
  std::vector<std::string> ServerArgs(int cycle = 0) const {
    // Frequent checkpoints, so kills also land inside checkpoints.
    std::vector<std::string> args = {"--checkpoint_interval=100ms"};
    if (GetParam() == Mode::kSync) args.push_back("--sync");
    if (GetParam() == Mode::kEvicting) args.push_back("--memory_limit=1Mi");
    if (GetParam() == Mode::kEvicting && cycle % 2 == 1) args.push_back("--lazy_start");
    return args;
  }

  // Every acknowledged item present, counters at least the acknowledged counts, specs kept,
  // deleted filters gone.
  void Verify(BloomClient& client) {
    uint64_t checked = 0;
    for (const AckedBatch& batch : acked_) {
      absl::StatusOr<std::vector<bool>> present =
          client.MightContain(batch.filter, BatchItems(batch));
      ASSERT_OK(present.status());
      for (size_t i = 0; i < present->size(); ++i) {
        ASSERT_TRUE((*present)[i]) << "FALSE NEGATIVE: acknowledged item " << batch.filter << "/"
                                   << batch.writer << "/" << batch.first + i << " lost";
      }
      checked += batch.count;
    }
    std::map<std::string, uint64_t> acked_per_filter;
    for (const AckedBatch& batch : acked_) acked_per_filter[batch.filter] += batch.count;
    for (const auto& [filter, count] : acked_per_filter) {
      absl::StatusOr<bloom::v1::FilterStats> stats = client.Stats(filter);
      ASSERT_OK(stats.status());
      // Items that were false positives of earlier ones count as not new: allow the FPR.
      EXPECT_GE(stats->items_added(), static_cast<uint64_t>(count * 0.97)) << filter;
    }
    for (const auto& [filter, capacity] : reserved_) {
      absl::StatusOr<bloom::v1::FilterStats> stats = client.Stats(filter);
      ASSERT_TRUE(stats.ok()) << filter << ": " << stats.status();
      EXPECT_EQ(stats->spec().capacity(), capacity) << filter;
    }
    for (const std::string& filter : deleted_) {
      EXPECT_TRUE(absl::IsNotFound(client.Stats(filter).status())) << filter << " came back";
    }
    verified_items_ = checked;
  }

  std::vector<AckedBatch> acked_;
  std::map<std::string, uint64_t> reserved_;  // name -> capacity
  std::vector<std::string> deleted_;
  uint64_t verified_items_ = 0;
};

TEST_P(CrashTest, AcknowledgedAddsSurviveKillNine) {
  const int cycles = EnvInt("BLOOM_CRASH_CYCLES", 20);
  const bool evicting = GetParam() == Mode::kEvicting;
  const uint64_t min_items = EnvInt("BLOOM_CRASH_MIN_ITEMS", evicting ? 300'000 : 1'000'000);
  // Writers 0-3 make unary calls of 1000 items; 4 and 5 share one pipelined client (their
  // calls of 100 items coalesce over a Pipeline stream).
  constexpr int kWriters = 6;
  constexpr uint32_t kBatch = 1000, kPipelinedBatch = 100;
  bloomtest::TempDir data;
  std::mt19937_64 rng(static_cast<int>(GetParam()) * 4 + 7);
  std::vector<uint64_t> next_item(kWriters, 0);
  int kills_during_startup = 0, kills_during_shutdown = 0;

  for (int cycle = 0; cycle < cycles || verified_items_ < min_items; ++cycle) {
    ASSERT_LT(cycle, cycles * 10) << "too few acknowledged items; is the server adding?";
    const auto moment = static_cast<KillMoment>(rng() % 3);
    if (moment == KillMoment::kDuringStartup && !acked_.empty()) {
      // Kill while it loads pages and replays the journal.
      auto starting = ServerProcess::Spawn(data.path(), ServerArgs(cycle));
      absl::SleepFor(absl::Milliseconds(rng() % 40));
      starting->Kill();
      ++kills_during_startup;
    }
    auto server = ServerProcess::Start(data.path(), ServerArgs(cycle));
    ASSERT_NE(server, nullptr);
    auto client = BloomClient::Connect(server->target());
    ASSERT_NO_FATAL_FAILURE(Verify(*client)) << "after cycle " << cycle;

    // Filters: scaling ones that grow sub-filters during the run, some made by
    // create_if_missing, a non-scaling one, and one reserved then deleted each cycle.
    for (int i = 0; i < 3; ++i) {
      const std::string scaling = absl::StrCat("scaling-", i);
      if (reserved_.count(scaling)) continue;
      ASSERT_OK(client->Reserve(scaling, Spec(20'000, 0.01)).status());
      reserved_[scaling] = 20'000;
    }
    const std::string doomed = absl::StrCat("doomed-", cycle);
    ASSERT_OK(client->Reserve(doomed, Spec(100, 0.01)).status());
    ASSERT_OK(client->Add(doomed, {"x"}).status());
    ASSERT_OK(client->Delete(doomed));
    deleted_.push_back(doomed);

    std::atomic<bool> stop{false};
    std::mutex acked_mu;
    std::vector<std::thread> writers;
    bloomclient::ClientOptions pipelined;
    pipelined.pipelined = true;
    std::shared_ptr<BloomClient> shared_pipelined =
        BloomClient::Connect(server->target(), pipelined);
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        std::shared_ptr<BloomClient> writer_client =
            w >= 4 ? shared_pipelined : BloomClient::Connect(server->target());
        const bloom::v1::FilterSpec lazy_spec = evicting ? Spec(1000, 0.01) : Spec(50'000, 0.001);
        const uint32_t count = w >= 4 ? kPipelinedBatch : (w == 3 && evicting) ? 20 : kBatch;
        std::mt19937 users(static_cast<uint32_t>(cycle * 100 + w));
        while (!stop.load()) {
          std::string filter = absl::StrCat("scaling-", w % 3);
          if (w == 3) {
            filter =
                evicting ? absl::StrCat("user-", users() % 2000) : absl::StrCat("lazy-", cycle % 4);
          }
          AckedBatch batch{filter, w, next_item[w], count};
          next_item[w] += count;  // never reuse ids, acknowledged or not
          absl::StatusOr<std::vector<bool>> added =
              writer_client->Add(batch.filter, BatchItems(batch), w == 3 ? &lazy_spec : nullptr);
          if (added.ok()) {
            std::lock_guard<std::mutex> lock(acked_mu);
            acked_.push_back(batch);
          }
        }
      });
    }
    absl::SleepFor(absl::Milliseconds(30 + rng() % 120));
    if (moment == KillMoment::kDuringShutdown) {
      server->Signal(SIGTERM);  // draining, final checkpoints...
      absl::SleepFor(absl::Milliseconds(rng() % 20));
      ++kills_during_shutdown;
    }
    server->Kill();
    stop.store(true);
    for (std::thread& writer : writers) writer.join();
  }
  // A clean final start: everything is still there.
  auto server = ServerProcess::Start(data.path(), ServerArgs());
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target());
  ASSERT_NO_FATAL_FAILURE(Verify(*client));
  EXPECT_GE(verified_items_, min_items);
  if (evicting) {  // the 2,000 user filters did not all fit: some started on disk
    EXPECT_EQ(server->ReadLog().find(" 0 cold"), std::string::npos) << server->ReadLog();
  }
  RecordProperty("acknowledged_items", std::to_string(verified_items_));
  RecordProperty("kills_during_startup", std::to_string(kills_during_startup));
  RecordProperty("kills_during_shutdown", std::to_string(kills_during_shutdown));
  EXPECT_EQ(server->Terminate(), 0);
}

INSTANTIATE_TEST_SUITE_P(Durability, CrashTest,
                         ::testing::Values(Mode::kDefault, Mode::kSync, Mode::kEvicting),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           switch (info.param) {
                             case Mode::kSync:
                               return "Sync";
                             case Mode::kEvicting:
                               return "Evicting";
                             default:
                               return "Default";
                           }
                         });

}  // namespace

// BloomClient's pipelined mode against the real server: many threads' single-key calls share a
// Pipeline stream and coalesce into fewer operations, each caller gets its own answer and its
// own error, and a broken stream fails its calls with UNAVAILABLE, then reconnects.
#include <atomic>
#include <barrier>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloomclient::BloomClient;
using bloomclient::ClientOptions;
using bloomtest::ServerProcess;

bloom::v1::FilterSpec Spec(uint64_t capacity) {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(capacity);
  spec.set_error_rate(0.01);
  return spec;
}

ClientOptions Pipelined(size_t streams = 1) {
  ClientOptions options;
  options.pipelined = true;
  options.pipeline_streams = streams;
  return options;
}

class CoalescingClientTest : public ::testing::Test {
 protected:
  bloomtest::TempDir data_;
};

TEST_F(CoalescingClientTest, ManyThreadsSingleKeyCallsCoalesceAndEachGetsItsAnswer) {
  auto server = ServerProcess::Start(data_.path(), {"--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target(), Pipelined(2));
  for (const char* name : {"f0", "f1", "f2"})
    ASSERT_OK(client->Reserve(name, Spec(100000)).status());

  constexpr int kThreads = 50, kCalls = 200;
  std::atomic<int> failures{0}, not_new{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string filter = absl::StrCat("f", t % 3);
      for (int i = 0; i < kCalls; ++i) {
        const std::string item = absl::StrCat("t", t, "-", i);
        absl::StatusOr<std::vector<bool>> added = client->Add(filter, {item});
        if (!added.ok() || added->size() != 1) {
          ++failures;
          continue;
        }
        if (!(*added)[0]) ++not_new;
        absl::StatusOr<std::vector<bool>> present =
            client->MightContain(filter, {item, absl::StrCat("never-", t, "-", i)});
        // The caller's own add was answered, so it must read present.
        if (!present.ok() || present->size() != 2 || !(*present)[0]) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LT(not_new.load(), kThreads * kCalls / 50);  // false positives at about 1%

  // Every item through a plain client: nothing lost, nothing misattributed.
  auto plain = BloomClient::Connect(server->target());
  for (int t = 0; t < kThreads; ++t) {
    std::vector<std::string> items;
    for (int i = 0; i < kCalls; ++i) items.push_back(absl::StrCat("t", t, "-", i));
    absl::StatusOr<std::vector<bool>> present =
        plain->MightContain(absl::StrCat("f", t % 3), items);
    ASSERT_OK(present.status());
    for (size_t i = 0; i < items.size(); ++i) ASSERT_TRUE((*present)[i]) << items[i];
  }

  // The calls were coalesced: fewer operations reached the server than calls were made.
  const std::string metrics = bloomtest::ScrapeMetrics(server->metrics_port());
  const double adds = bloomtest::PrometheusSample(
      metrics, R"(bloom_rpc_requests_total{code="OK",method="Pipeline.Add"})");
  EXPECT_GT(adds, 0) << metrics;
  EXPECT_LT(adds, kThreads * kCalls * 0.9) << metrics;
  EXPECT_EQ(bloomtest::PrometheusSample(metrics, "bloom_items_added_total"), kThreads * kCalls);
}

// Removes from a CUCKOO filter coalesce too: each caller hears whether its own items were
// removed, and of two callers removing an item held once, exactly one removes it.
TEST_F(CoalescingClientTest, ConcurrentRemovesCoalesceAndRemoveEachCopyOnce) {
  auto server = ServerProcess::Start(data_.path(), {"--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  auto plain = BloomClient::Connect(server->target());
  bloom::v1::FilterSpec spec = Spec(100000);
  spec.set_kind(bloom::v1::FILTER_KIND_CUCKOO);
  spec.set_error_rate(1e-6);  // no removal of an absent item finds another's fingerprint
  ASSERT_OK(plain->Reserve("c", spec).status());
  constexpr int kThreads = 20, kCalls = 100, kShared = 200;
  std::vector<std::string> all;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kCalls; ++i) all.push_back(absl::StrCat("t", t, "-", i));
  }
  for (int k = 0; k < kShared; ++k) all.push_back(absl::StrCat("shared-", k));
  ASSERT_OK(plain->Add("c", all).status());

  auto client = BloomClient::Connect(server->target(), Pipelined(2));
  std::atomic<int> failures{0};
  std::vector<std::atomic<int>> shared_removed(kShared);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        absl::StatusOr<std::vector<bool>> removed =
            client->Remove("c", {absl::StrCat("t", t, "-", i)});
        if (!removed.ok() || removed->size() != 1 || !(*removed)[0]) ++failures;
        // Two threads race for each shared item k: k % kThreads and the one after it.
        if (i >= kShared / kThreads) continue;
        for (int owner : {t, (t + kThreads - 1) % kThreads}) {
          const int item = owner + i * kThreads;
          absl::StatusOr<std::vector<bool>> shared =
              client->Remove("c", {absl::StrCat("shared-", item)});
          if (!shared.ok() || shared->size() != 1) {
            ++failures;
          } else if ((*shared)[0]) {
            ++shared_removed[item];
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  for (int k = 0; k < kShared; ++k) EXPECT_EQ(shared_removed[k].load(), 1) << "shared-" << k;

  // Every item is gone, as a plain client reads it.
  absl::StatusOr<std::vector<uint32_t>> counts = plain->Count("c", all);
  ASSERT_OK(counts.status());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ((*counts)[i], 0u) << all[i];

  const std::string metrics = bloomtest::ScrapeMetrics(server->metrics_port());
  const double removes = bloomtest::PrometheusSample(
      metrics, R"(bloom_rpc_requests_total{code="OK",method="Pipeline.Remove"})");
  EXPECT_GT(removes, 0) << metrics;
  EXPECT_LT(removes, (kThreads * kCalls + 2 * kShared) * 0.9) << metrics;
}

// Counts go over the stream once its headers say the server takes them (the stream's very
// first calls may go unary), coalesce, and each caller gets the counts of its own items,
// after the adds it made before.
TEST_F(CoalescingClientTest, ConcurrentCountsTravelOnTheStreamAndEachGetsItsOwnCounts) {
  auto server = ServerProcess::Start(data_.path(), {"--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  bloom::v1::FilterSpec spec = Spec(100000);
  spec.set_kind(bloom::v1::FILTER_KIND_CUCKOO);
  spec.set_error_rate(1e-6);  // no fingerprint of one item counts for another
  auto client = BloomClient::Connect(server->target(), Pipelined());
  ASSERT_OK(client->Reserve("c", spec).status());
  constexpr int kThreads = 16, kItems = 50;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kItems; ++i) {
        // Item i of thread t is held i % 3 copies, added just before its count.
        const std::string item = absl::StrCat("t", t, "-", i);
        for (int copy = 0; copy < i % 3; ++copy) {
          if (!client->Add("c", {item}).ok()) ++failures;
        }
        absl::StatusOr<std::vector<uint32_t>> counts =
            client->Count("c", {item, absl::StrCat("absent-", t, "-", i)});
        if (!counts.ok() || *counts != std::vector<uint32_t>{static_cast<uint32_t>(i % 3), 0}) {
          ++failures;
          ADD_FAILURE() << item << ": " << counts.status();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  // Errors are the unary call's, per call.
  absl::StatusOr<std::vector<uint32_t>> missing = client->Count("missing", {"a"});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();

  // Calls made before the stream's headers arrived went unary, the rest on the stream; from
  // now on every count does.
  auto served = [&](const char* method) {
    return bloomtest::PrometheusSample(
        bloomtest::ScrapeMetrics(server->metrics_port()),
        absl::StrCat(R"(bloom_rpc_requests_total{code="OK",method=")", method, R"("})"));
  };
  const double pipelined = served("Pipeline.Count"), unary = served("Count");
  EXPECT_GT(pipelined, 0);
  EXPECT_LE(unary, kThreads);
  EXPECT_EQ(*client->Count("c", {"t0-1"}), std::vector<uint32_t>{1});
  EXPECT_EQ(served("Pipeline.Count"), pipelined + 1);
  EXPECT_EQ(served("Count"), unary);
}

// Large concurrent calls on many filters: batches of operations whose requests and answers
// exceed HTTP/2's flow-control windows. Neither side may wait on the other forever.
TEST_F(CoalescingClientTest, LargeConcurrentCallsOnManyFiltersComplete) {
  auto server = ServerProcess::Start(data_.path());
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target(), Pipelined());
  constexpr int kThreads = 32, kCalls = 10, kItems = 5000;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string filter = absl::StrCat("big-", t);
      const bloom::v1::FilterSpec spec = Spec(uint64_t{kItems} * kCalls);
      for (int call = 0; call < kCalls; ++call) {
        std::vector<std::string> items;
        items.reserve(kItems);
        for (int i = 0; i < kItems; ++i) items.push_back(absl::StrCat(call, "-", i, "-padding"));
        absl::StatusOr<std::vector<bool>> added = client->Add(filter, items, &spec);
        absl::StatusOr<std::vector<bool>> present = client->MightContain(filter, items);
        if (!added.ok() || !present.ok() || present->size() != items.size()) {
          ++failures;
          continue;
        }
        for (bool p : *present) failures += p ? 0 : 1;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(CoalescingClientTest, EachCallGetsItsOwnError) {
  auto server = ServerProcess::Start(data_.path(), {"--max_item_bytes=100"});
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target(), Pipelined());
  ASSERT_OK(client->Reserve("f", Spec(1000)).status());

  absl::StatusOr<std::vector<bool>> missing = client->MightContain("missing", {"x"});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();

  // absent_if_missing travels with the call: rounds of 16 callers checking a missing filter at
  // once, half with it; those answer absent, the others NOT_FOUND, merged or not.
  {
    constexpr int kCallers = 16, kCheckRounds = 10;
    std::barrier together(kCallers);
    std::atomic<int> mixed_up{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < kCallers; ++t) {
      callers.emplace_back([&, t] {
        for (int round = 0; round < kCheckRounds; ++round) {
          together.arrive_and_wait();
          const bool absent_if_missing = (t + round) % 2 == 0;
          absl::StatusOr<std::vector<bool>> seen =
              client->MightContain("user:missing", {absl::StrCat("item-", t)}, absent_if_missing);
          const bool right = absent_if_missing ? seen.ok() && seen->size() == 1 && !(*seen)[0]
                                               : absl::IsNotFound(seen.status());
          if (!right) ++mixed_up;
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
    EXPECT_EQ(mixed_up.load(), 0);
    EXPECT_TRUE(absl::IsNotFound(client->Stats("user:missing").status()));  // nothing created
  }

  // Rounds of 16 callers at once, one of them with an item over the limit: only that one fails,
  // even when they travelled in one operation.
  constexpr int kThreads = 16, kRounds = 30;
  std::barrier start(kThreads);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        const bool bad = t == round % kThreads;
        const std::string item = bad ? std::string(200, 'x') : absl::StrCat("ok-", t, "-", round);
        absl::StatusOr<std::vector<bool>> added = client->Add("f", {item});
        if (bad ? !absl::IsInvalidArgument(added.status()) : !added.ok()) ++wrong;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);

  // create_if_missing travels with the call.
  bloom::v1::FilterSpec spec = Spec(50);
  absl::StatusOr<std::vector<bool>> created = client->Add("made", {"a"}, &spec);
  ASSERT_OK(created.status());
  absl::StatusOr<bloom::v1::FilterStats> stats = client->Stats("made");
  ASSERT_OK(stats.status());
  EXPECT_EQ(stats->spec().capacity(), 50u);
}

// One-key calls on per-user filters (each call its own operation) from many threads, with a
// server window smaller than the batches: the client keeps a second batch in flight while the
// server has stopped reading, and its reader thread writes batches while answers wait. Every
// call must be answered, correctly, and nothing may wait on the other side forever.
TEST_F(CoalescingClientTest, PerUserCallsWithTwoBatchesInFlightAndASmallServerWindow) {
  auto server = ServerProcess::Start(data_.path(), {"--pipeline_window=8"});
  ASSERT_NE(server, nullptr);
  const bloom::v1::FilterSpec spec = Spec(1000);
  constexpr int kThreads = 50, kCalls = 100, kFiltersPerThread = 10;
  // Two batches in flight (the default), and one.
  for (const size_t rounds : {2, 1}) {
    SCOPED_TRACE(absl::StrCat(rounds, " rounds"));
    ClientOptions options = Pipelined();
    options.pipeline_rounds = rounds;
    auto client = BloomClient::Connect(server->target(), options);
    const std::string prefix = absl::StrCat("user-", rounds, "-");
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kCalls; ++i) {
          const std::string filter = absl::StrCat(prefix, t, "-", i % kFiltersPerThread);
          const std::string item = absl::StrCat("item-", i);
          absl::StatusOr<std::vector<bool>> added = client->Add(filter, {item}, &spec);
          if (!added.ok() || added->size() != 1) {
            ADD_FAILURE() << added.status();
            ++failures;
            continue;
          }
          absl::StatusOr<std::vector<bool>> present =
              client->MightContain(filter, {item}, /*absent_if_missing=*/true);
          if (!present.ok() || present->size() != 1 || !(*present)[0]) ++failures;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(failures.load(), 0);
    // Every item, through a plain client.
    auto plain = BloomClient::Connect(server->target());
    for (int t = 0; t < kThreads; ++t) {
      for (int f = 0; f < kFiltersPerThread; ++f) {
        std::vector<std::string> items;
        for (int i = f; i < kCalls; i += kFiltersPerThread) {
          items.push_back(absl::StrCat("item-", i));
        }
        absl::StatusOr<std::vector<bool>> present =
            plain->MightContain(absl::StrCat(prefix, t, "-", f), items);
        ASSERT_OK(present.status());
        for (size_t i = 0; i < items.size(); ++i) ASSERT_TRUE((*present)[i]) << items[i];
      }
    }
  }
}

// A stream that breaks under load, with batches in flight: every call returns (answered, or
// UNAVAILABLE), none waits for its timeout, and calls go through again after a restart.
TEST_F(CoalescingClientTest, AStreamBrokenUnderLoadFailsEveryCallInFlight) {
  auto server = ServerProcess::Start(data_.path());
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  ClientOptions options = Pipelined();
  options.timeout = absl::Seconds(20);
  auto client = BloomClient::Connect(server->target(), options);
  const bloom::v1::FilterSpec spec = Spec(1000);
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, unavailable{0}, other{0};
  constexpr int kThreads = 20;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        absl::StatusOr<std::vector<bool>> added =
            client->Add(absl::StrCat("user-", t, "-", i % 7), {absl::StrCat(i)}, &spec);
        if (added.ok()) {
          ++answered;
        } else if (absl::IsUnavailable(added.status())) {
          ++unavailable;
        } else {
          ADD_FAILURE() << added.status();
          ++other;
        }
      }
    });
  }
  while (answered.load() < 2000) absl::SleepFor(absl::Milliseconds(5));
  const absl::Time killed = absl::Now();
  server->Kill();
  while (unavailable.load() < kThreads && absl::Now() - killed < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  stop.store(true);
  for (std::thread& thread : threads) thread.join();
  // Without the server every call fails fast; one left waiting would have taken 20 s.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(10));
  EXPECT_GE(unavailable.load(), 1);
  EXPECT_EQ(other.load(), 0);

  server = ServerProcess::Start(data_.path(), {absl::StrCat("--listen=127.0.0.1:", port)});
  ASSERT_NE(server, nullptr);
  absl::StatusOr<std::vector<bool>> after = absl::UnavailableError("not tried");
  for (int attempt = 0; attempt < 100 && absl::IsUnavailable(after.status()); ++attempt) {
    after = client->Add("user-after", {"x"}, &spec);
    if (absl::IsUnavailable(after.status())) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_OK(after.status());
}

TEST_F(CoalescingClientTest, ABrokenStreamFailsItsCallsUnavailableThenReconnects) {
  auto server = ServerProcess::Start(data_.path());
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  auto client = BloomClient::Connect(server->target(), Pipelined());
  ASSERT_OK(client->Reserve("f", Spec(1000)).status());
  ASSERT_OK(client->Add("f", {"before"}).status());

  server->Kill();
  absl::StatusOr<std::vector<bool>> during = client->MightContain("f", {"before"});
  EXPECT_TRUE(absl::IsUnavailable(during.status())) << during.status();

  server = ServerProcess::Start(data_.path(), {absl::StrCat("--listen=127.0.0.1:", port)});
  ASSERT_NE(server, nullptr);
  // gRPC reconnects with backoff: the first calls may still fail UNAVAILABLE.
  absl::StatusOr<std::vector<bool>> after = absl::UnavailableError("not tried");
  for (int attempt = 0; attempt < 100 && absl::IsUnavailable(after.status()); ++attempt) {
    after = client->MightContain("f", {"before"});
    if (absl::IsUnavailable(after.status())) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_OK(after.status());
  EXPECT_TRUE((*after)[0]);  // the acknowledged add survived kill -9
}

TEST_F(CoalescingClientTest, TokensAndRolesApply) {
  bloomtest::TempDir secrets;
  const std::string tokens = secrets.path() + "/tokens";
  std::ofstream(tokens) << absl::StrCat(bloomtest::TokenDigest("reader-token"), " read\n",
                                        bloomtest::TokenDigest("writer-token"), " write\n");
  auto server = ServerProcess::Start(data_.path(), {"--auth_token_file=" + tokens});
  ASSERT_NE(server, nullptr);
  ClientOptions writer_options = Pipelined(), reader_options = Pipelined(),
                anonymous_options = Pipelined();
  writer_options.token = "writer-token";
  reader_options.token = "reader-token";
  auto writer = BloomClient::Connect(server->target(), writer_options);
  auto reader = BloomClient::Connect(server->target(), reader_options);
  auto anonymous = BloomClient::Connect(server->target(), anonymous_options);
  bloom::v1::FilterSpec spec = Spec(100);
  ASSERT_OK(writer->Add("f", {"a"}, &spec).status());
  absl::StatusOr<std::vector<bool>> denied = reader->Add("f", {"b"});
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied) << denied.status();
  absl::StatusOr<std::vector<bool>> read = reader->MightContain("f", {"a", "b"});
  ASSERT_OK(read.status());
  EXPECT_EQ(*read, std::vector<bool>({true, false}));
  absl::StatusOr<std::vector<bool>> refused = anonymous->MightContain("f", {"a"});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "token")) << refused.status();
}

}  // namespace

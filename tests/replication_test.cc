// Replication with real processes on loopback: a primary and followers (--replicate_from), with
// writers in every client language through every pod while pods are killed, stopped, wiped and
// cut off from the log. What must hold: every add the primary acknowledged is on every
// follower, item by item; once quiet, every pod exports every filter byte for byte alike.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/bloom_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/chaos_writers.h"
#include "tests/replication_cluster.h"
#include "tests/support/polyglot_command.h"
#include "tests/support/test_pki.h"
#include "tests/support/testing.h"

namespace {

using bloomtest::Acknowledged;
using bloomtest::CppWriters;
using bloomtest::EnvInt;
using bloomtest::ExpectAllPresent;
using bloomtest::FilterNames;
using bloomtest::Languages;
using bloomtest::PolyglotCommand;
using bloomtest::PolyglotWriters;
using bloomtest::ReplicationCluster;
using bloomtest::Spec;

TEST(ReplicationTest, KilledPrimaryLosesNoAcknowledgedAddOnEitherFollower) {
  ReplicationCluster cluster(2, {"--min_replica_acks=2", "--replica_ack_timeout=5s"});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  Acknowledged acknowledged;
  bloomtest::TempDir scratch;
  {
    CppWriters cpp(cluster.targets(), &acknowledged);
    PolyglotWriters polyglot(cluster.targets(), scratch.path(), &acknowledged);
    std::mt19937 random(20261126);
    const int kills = EnvInt("BLOOM_REPLICATION_KILLS", 10);
    for (int kill = 0; kill < kills; ++kill) {
      // Under load for a while, whatever state the previous restart left.
      const size_t before = acknowledged.size();
      ASSERT_TRUE(bloomtest::WaitFor([&] { return acknowledged.size() >= before + 100; },
                                     absl::Seconds(30)))
          << "no writes acknowledged after restart " << kill;
      absl::SleepFor(absl::Milliseconds(100 + random() % 400));
      cluster.KillPrimary();
      ASSERT_TRUE(cluster.StartPrimary()) << "restart " << kill;
    }
    // Every language's writes were acknowledged across the kills, not only some.
    ASSERT_TRUE(bloomtest::WaitFor([&] { return polyglot.min_runs() >= 2; }, absl::Seconds(60)));
    cpp.Stop();
    polyglot.Stop();
  }
  ASSERT_TRUE(cluster.WaitCaughtUp());
  const auto all = acknowledged.Snapshot();
  ASSERT_GE(all.size(), 5u);  // the C++ filters and at least two of the other languages'
  // Exports first: a dump carries its pod's count of checks, which the checks below change.
  cluster.ExpectIdenticalExports(FilterNames(all));
  for (int i = 0; i < cluster.followers(); ++i) {
    ExpectAllPresent(cluster.follower(i).target(), all);
  }
  ExpectAllPresent(cluster.primary().target(), all);
}

TEST(ReplicationTest, KilledFollowerCatchesUpAndAWipedOneCopiesASnapshot) {
  ReplicationCluster cluster(2, {"--min_replica_acks=1"});
  ASSERT_TRUE(cluster.Start());
  Acknowledged acknowledged;
  {
    CppWriters cpp({cluster.targets()[0], cluster.targets()[1]}, &acknowledged);
    ASSERT_TRUE(bloomtest::WaitFor([&] { return acknowledged.size() >= 5'000; }));
    cluster.KillFollower(1);
    ASSERT_TRUE(bloomtest::WaitFor([&] { return acknowledged.size() >= 20'000; }));
    ASSERT_TRUE(cluster.StartFollower(1));
    ASSERT_TRUE(bloomtest::WaitFor([&] { return acknowledged.size() >= 30'000; }));
    // A follower whose data dir is wiped while it is down copies a snapshot by itself.
    cluster.KillFollower(0);
    std::filesystem::remove_all(cluster.follower_dir(0));
    std::filesystem::create_directories(cluster.follower_dir(0));
    ASSERT_TRUE(cluster.StartFollower(0));
    ASSERT_TRUE(bloomtest::WaitFor([&] { return acknowledged.size() >= 40'000; }));
  }
  ASSERT_TRUE(cluster.WaitCaughtUp());
  const auto all = acknowledged.Snapshot();
  cluster.ExpectIdenticalExports(FilterNames(all));
  for (int i = 0; i < cluster.followers(); ++i) {
    ExpectAllPresent(cluster.follower(i).target(), all);
  }
  EXPECT_NE(cluster.follower(0).ReadLog().find("copied a snapshot"), std::string::npos);
}

TEST(ReplicationTest, FollowerPastTheLogCopiesASnapshotByItself) {
  // No log kept beyond what RocksDB itself needs: a follower that was away while the log moved
  // on finds its next sequence gone.
  ReplicationCluster cluster(2, {"--replication_log_retention=0s", "--replication_log_limit=0"});
  ASSERT_TRUE(cluster.Start());
  std::unique_ptr<bloomclient::BloomClient> writer =
      bloomclient::BloomClient::Connect(cluster.primary().target());
  const bloom::v1::FilterSpec spec = Spec();
  std::vector<std::string> items;
  for (int i = 0; i < 200; ++i) items.push_back(absl::StrCat("early-", i));
  ASSERT_TRUE(writer->Add("gone:log", items, &spec).ok());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  cluster.KillFollower(1);  // away while the log moves on
  std::vector<std::string> later;
  for (int i = 0; i < 200; ++i) later.push_back(absl::StrCat("later-", i));
  ASSERT_TRUE(writer->Add("gone:log", later, &spec).ok());
  // A snapshot (follower 0 copies one again after a wipe) flushes the primary's memtables, and
  // RocksDB then deletes the log files they held: follower 1's next sequence with them.
  cluster.KillFollower(0);
  std::filesystem::remove_all(cluster.follower_dir(0));
  std::filesystem::create_directories(cluster.follower_dir(0));
  ASSERT_TRUE(cluster.StartFollower(0));
  ASSERT_TRUE(writer->Add("gone:log", {"last"}, &spec).ok());
  ASSERT_TRUE(cluster.StartFollower(1));
  ASSERT_TRUE(bloomtest::WaitFor(
      [&] {
        return cluster.follower(1).ReadLog().find("copying a snapshot of the primary again") !=
               std::string::npos;
      },
      absl::Seconds(30)))
      << cluster.follower(1).ReadLog();
  ASSERT_TRUE(cluster.WaitCaughtUp());
  later.push_back("last");
  later.insert(later.end(), items.begin(), items.end());
  cluster.ExpectIdenticalExports({"gone:log"});  // before the checks, which count on each pod
  ExpectAllPresent(cluster.follower(1).target(), {{"gone:log", later}});
}

TEST(ReplicationTest, StalledFollowersStopWritesWithUnavailableNotReads) {
  ReplicationCluster cluster(2, {"--min_replica_acks=1", "--replica_ack_timeout=1s"});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(cluster.primary().target());
  const bloom::v1::FilterSpec spec = Spec();
  std::vector<std::string> acked;
  auto add = [&](const std::string& item) {
    absl::StatusOr<std::vector<bool>> added = client->Add("stalled", {item}, &spec);
    if (added.ok()) acked.push_back(item);
    return added.status();
  };
  ASSERT_TRUE(add("before").ok());

  cluster.follower(0).Signal(SIGSTOP);  // one left: min_replica_acks=1 still holds
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(add(absl::StrCat("one-stopped-", i)).ok());

  cluster.follower(1).Signal(SIGSTOP);  // none left
  const absl::Time start = absl::Now();
  const absl::Status refused = add("both-stopped");
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_NE(refused.message().find("min_replica_acks"), absl::string_view::npos) << refused;
  EXPECT_LT(took, absl::Seconds(3));  // the 1 s timeout, not the client's 10 s
  // Reads on the primary go on.
  absl::StatusOr<std::vector<bool>> read = client->MightContain("stalled", {"before"});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE((*read)[0]);

  cluster.follower(0).Signal(SIGCONT);
  cluster.follower(1).Signal(SIGCONT);
  ASSERT_TRUE(bloomtest::WaitFor([&] { return add("resumed").ok(); }, absl::Seconds(20)));
  ASSERT_TRUE(cluster.WaitCaughtUp());
  for (int i = 0; i < cluster.followers(); ++i) {
    ExpectAllPresent(cluster.follower(i).target(), {{"stalled", acked}});
  }
}

// Adds `item` through `writer`, then reads it through `reader` (which has observed the add's
// sequence): a refused call counts in `errors`, an absent answer in `absent`.
void AddThenReadBack(bloomclient::BloomClient& writer, bloomclient::BloomClient& reader,
                     const std::string& filter, const std::string& item,
                     const bloom::v1::FilterSpec& spec, std::atomic<int>& absent,
                     std::atomic<int>& errors) {
  if (!writer.Add(filter, {item}, &spec).ok()) {
    errors.fetch_add(1);
    return;
  }
  // The sequence the writer's pod gave the add, carried to the reader's client.
  reader.ObserveSequence(writer.last_sequence());
  absl::StatusOr<std::vector<bool>> present = reader.MightContain(filter, {item});
  if (!present.ok()) {
    errors.fetch_add(1);
  } else if (!(*present)[0]) {
    absent.fetch_add(1);
  }
}

TEST(ReplicationTest, ReadYourWritesThroughAFollower) {
  ReplicationCluster cluster(1, {});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  const bloom::v1::FilterSpec spec = Spec();
  const int alternations = EnvInt("BLOOM_READ_YOUR_WRITES_ROUNDS", 100'000);
  // Each round waits for the follower to apply the add (the primary paces its tail stream,
  // tail_stream.cc), so the rounds are bound by that wait, not by CPU: many threads run them.
  constexpr int kThreads = 32;
  std::atomic<int> absent{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<bloomclient::BloomClient> primary =
          bloomclient::BloomClient::Connect(cluster.primary().target());
      std::unique_ptr<bloomclient::BloomClient> follower =
          bloomclient::BloomClient::Connect(cluster.follower(0).target());
      const std::string filter = absl::StrCat("ryw:", t);
      for (int i = t; i < alternations; i += kThreads) {
        AddThenReadBack(*primary, *follower, filter, absl::StrCat("item-", i), spec, absent,
                        errors);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(absent.load(), 0) << "items added through the primary read absent on the follower";
  EXPECT_EQ(errors.load(), 0);
}

// With --item_call_threads, a follower's async Add forwards to the primary, and its async
// MightContain waits for the caller's sequence (or forwards): every add made through the
// follower reads present there at once.
TEST(ReplicationTest, AsyncItemCallsOnAFollowerForwardAddsAndReadTheirWrites) {
  ReplicationCluster cluster(1, {"--item_call_threads=2"}, {"--item_call_threads=2"});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  const bloom::v1::FilterSpec spec = Spec();
  constexpr int kThreads = 4;
  constexpr int kItems = 400;
  std::atomic<int> absent{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<bloomclient::BloomClient> follower =
          bloomclient::BloomClient::Connect(cluster.follower(0).target());
      const std::string filter = absl::StrCat("async:", t);
      for (int i = 0; i < kItems; ++i) {
        AddThenReadBack(*follower, *follower, filter, absl::StrCat("item-", i), spec, absent,
                        errors);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(absent.load(), 0) << "items added through the follower read absent there";
  EXPECT_EQ(errors.load(), 0);
  // The adds went to the primary: it holds them all.
  std::unique_ptr<bloomclient::BloomClient> primary =
      bloomclient::BloomClient::Connect(cluster.primary().target());
  for (int t = 0; t < kThreads; ++t) {
    std::vector<std::string> items;
    for (int i = 0; i < kItems; ++i) items.push_back(absl::StrCat("item-", i));
    absl::StatusOr<std::vector<bool>> present =
        primary->MightContain(absl::StrCat("async:", t), items);
    ASSERT_TRUE(present.ok()) << present.status();
    EXPECT_EQ(std::count(present->begin(), present->end(), true), kItems);
  }
}

// A Pipeline stream to a follower goes to the primary whole: a check after an add of the same
// item on the stream sees it, with no sequence to wait for. `follower_args` choose how the
// follower serves the stream.
void ExpectAPipelineThroughAFollowerSeesItsOwnAdds(std::vector<std::string> follower_args) {
  ReplicationCluster cluster(1, {}, std::move(follower_args));
  ASSERT_TRUE(cluster.Start());
  bloomclient::ClientOptions options;
  options.pipelined = true;
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(cluster.follower(0).target(), options);
  const bloom::v1::FilterSpec spec = Spec();
  for (int i = 0; i < 500; ++i) {
    const std::string item = absl::StrCat("piped-", i);
    ASSERT_TRUE(client->Add("piped", {item}, &spec).ok()) << i;
    absl::StatusOr<std::vector<bool>> present = client->MightContain("piped", {item});
    ASSERT_TRUE(present.ok()) << present.status();
    ASSERT_TRUE((*present)[0]) << "the stream's own add of " << item << " read absent";
  }
}

TEST(ReplicationTest, APipelineThroughAFollowerSeesItsOwnAdds) {
  ExpectAPipelineThroughAFollowerSeesItsOwnAdds({});
}

TEST(ReplicationTest, APipelineThroughAFollowerWithItemCallThreadsSeesItsOwnAdds) {
  // The follower's connections are polled by its queue threads (gRPC's "poll" strategy).
  ExpectAPipelineThroughAFollowerSeesItsOwnAdds({"--item_call_threads=2"});
}

// SIGTERM to a follower while a Pipeline stream runs through it to the primary: every operation
// that went up is answered, the stream then ends UNAVAILABLE ("retry another replica"), not
// cancelled with adds applied but unanswered, and the follower exits at once rather than after
// its grace period. Operations it did not send up were not made: a client retries them safely.
TEST(ReplicationTest, ADrainingFollowerAnswersWhatItProxiedThenEndsTheStreamUnavailable) {
  ReplicationCluster cluster(1, {}, {"--shutdown_grace=30s"});
  ASSERT_TRUE(cluster.Start());
  std::unique_ptr<bloom::v1::BloomFilterService::Stub> stub =
      bloom::v1::BloomFilterService::NewStub(
          grpc::CreateChannel(cluster.follower(0).target(), grpc::InsecureChannelCredentials()));
  const bloom::v1::FilterSpec spec = Spec();
  const auto add = [&spec](uint64_t id) {
    bloom::v1::PipelineRequest request;
    request.set_id(id);
    request.mutable_add()->set_name("drained");
    request.mutable_add()->add_items(absl::StrCat("item-", id));
    *request.mutable_add()->mutable_create_if_missing() = spec;
    return request;
  };
  grpc::ClientContext context;
  auto stream = stub->Pipeline(&context);
  std::atomic<uint64_t> answers{0};
  std::thread writer([&] {
    for (uint64_t id = 0; id < 1'000'000; ++id) {
      if (!stream->Write(add(id))) return;  // the stream has ended
      // Some answers first, then operations in flight as the follower drains.
      while (id >= 100 && answers.load() < 50) absl::SleepFor(absl::Milliseconds(1));
    }
  });
  std::vector<std::string> answered;
  bloom::v1::PipelineResponse response;
  absl::Time signalled = absl::InfiniteFuture();
  while (stream->Read(&response)) {
    ASSERT_TRUE(response.has_add()) << response.ShortDebugString();
    answered.push_back(absl::StrCat("item-", response.id()));
    if (answers.fetch_add(1) + 1 == 50) {
      signalled = absl::Now();
      cluster.follower(0).Signal(SIGTERM);
    }
  }
  writer.join();
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_NE(status.error_message().find("retry another replica"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(cluster.follower(0).Terminate(), 0);
  // Within moments: nothing a follower holds (its channel to the primary and that channel's
  // credentials among them) keeps gRPC's library from shutting down at once.
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(4));
  ASSERT_GE(answered.size(), 50u);
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(cluster.primary().target());
  absl::StatusOr<std::vector<bool>> present = client->MightContain("drained", answered);
  ASSERT_TRUE(present.ok()) << present.status();
  EXPECT_EQ(std::count(present->begin(), present->end(), true),
            static_cast<std::ptrdiff_t>(answered.size()));
}

TEST(ReplicationTest, AMergeThroughAFollowerIsReadThereAndOnTheOther) {
  // ReserveLike and Merge are writes: a follower forwards them to the primary, and the union
  // arrives at every follower as the one batch the primary wrote.
  ReplicationCluster cluster(2, {});
  ASSERT_TRUE(cluster.Start());
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(cluster.follower(0).target());
  const bloom::v1::FilterSpec spec = Spec();
  ASSERT_OK(client->Reserve("all", spec).status());
  ASSERT_OK(client->ReserveLike("shard", "all").status());
  std::vector<std::string> items;
  for (int i = 0; i < 2000; ++i) items.push_back(absl::StrCat("shard-item-", i));
  ASSERT_OK(client->Add("shard", items).status());
  absl::StatusOr<bloom::v1::FilterStats> merged = client->Merge("all", {"shard"});
  ASSERT_OK(merged.status());
  EXPECT_EQ(merged->items_added(), 2000u);
  // Each read carries the merge's sequence: a follower answers once it has applied it.
  auto expect_union = [&](bloomclient::BloomClient& reader) {
    absl::StatusOr<std::vector<bool>> present = reader.MightContain("all", items);
    ASSERT_OK(present.status());
    EXPECT_EQ(std::count(present->begin(), present->end(), true), 2000);
  };
  expect_union(*client);
  std::unique_ptr<bloomclient::BloomClient> other =
      bloomclient::BloomClient::Connect(cluster.follower(1).target());
  other->ObserveSequence(client->last_sequence());
  expect_union(*other);
}

TEST(ReplicationTest, ACuckooFilterWrittenThroughAFollowerCountsTheSameOnEveryFollower) {
  // Adds and removes of a CUCKOO filter reach a follower as journal records of the slots they
  // wrote, replayed into its resident copy; a new table changes the record, and the follower
  // loads the filter again. Both followers hold the filter before the writes (read first).
  ReplicationCluster cluster(2, {});
  ASSERT_TRUE(cluster.Start());
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(cluster.follower(0).target());
  std::unique_ptr<bloomclient::BloomClient> other =
      bloomclient::BloomClient::Connect(cluster.follower(1).target());
  bloom::v1::FilterSpec spec = Spec();
  spec.set_capacity(500);
  spec.set_kind(bloom::v1::FILTER_KIND_CUCKOO);
  // 1e-6: in a grown chain, removing one item can take a colliding item's copy from a newer
  // table (the README's hazard), which at 0.1% made about one run in a few dozen count 999.
  spec.set_error_rate(1e-6);
  ASSERT_OK(client->Reserve("blocked", spec).status());
  other->ObserveSequence(client->last_sequence());
  ASSERT_OK(client->Count("blocked", {"x"}).status());
  ASSERT_OK(other->Count("blocked", {"x"}).status());
  std::vector<std::string> kept, lifted;
  for (int i = 0; i < 1000; ++i) {
    kept.push_back(absl::StrCat("kept-", i));
    lifted.push_back(absl::StrCat("lifted-", i));
  }
  ASSERT_OK(client->Add("blocked", kept).status());
  ASSERT_OK(client->Add("blocked", lifted).status());
  ASSERT_OK(client->Add("blocked", {"twice", "twice"}).status());
  absl::StatusOr<std::vector<bool>> removed = client->Remove("blocked", lifted);
  ASSERT_OK(removed.status());
  EXPECT_EQ(std::count(removed->begin(), removed->end(), true), 1000);
  other->ObserveSequence(client->last_sequence());
  for (bloomclient::BloomClient* reader : {client.get(), other.get()}) {
    absl::StatusOr<std::vector<bool>> present = reader->MightContain("blocked", kept);
    ASSERT_OK(present.status());
    EXPECT_EQ(std::count(present->begin(), present->end(), true), 1000);
    absl::StatusOr<std::vector<uint32_t>> counts = reader->Count("blocked", {"twice"});
    ASSERT_OK(counts.status());
    EXPECT_EQ((*counts)[0], 2u);
    absl::StatusOr<bloom::v1::FilterStats> stats = reader->Stats("blocked");
    ASSERT_OK(stats.status());
    EXPECT_EQ(stats->items_added(), 1002u);
    EXPECT_GT(stats->sub_filters(), 1u) << "the chain grew";
  }
}

TEST(ReplicationTest, EveryClientLanguageReadsItsWritesThroughAFollower) {
  // The Python, Go and Node.js clients track the sequence of their writes as the C++ one does
  // (above): each program adds through the primary and checks through the follower, item by
  // item, plain and pipelined.
  ReplicationCluster cluster(1, {});
  ASSERT_TRUE(cluster.Start());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  bloomtest::TempDir scratch;
  const std::string input = absl::StrCat(scratch.path(), "/items.hex");
  {
    std::ofstream out(input);
    for (int i = 0; i < 200; ++i) out << absl::BytesToHexString(absl::StrCat("ryw-", i)) << "\n";
  }
  const std::string pods =
      absl::StrCat(cluster.primary().target(), ",", cluster.follower(0).target());
  for (const std::string& language : Languages()) {
    for (const std::string mode : {"read-your-writes", "read-your-writes-pipelined"}) {
      const bloomtest::CommandResult result = bloomtest::RunCommand(
          absl::StrCat("timeout 120 ", PolyglotCommand(language), " ", pods, " ryw:", language,
                       mode.size(), " ", mode, " < ", input));
      ASSERT_EQ(result.exit_code, 0) << language << " " << mode << ": " << result.out;
      std::vector<absl::string_view> lines = absl::StrSplit(result.out, '\n', absl::SkipEmpty());
      ASSERT_EQ(lines.size(), 200u) << language << " " << mode << ": " << result.out;
      for (size_t i = 0; i < lines.size(); ++i) {
        EXPECT_EQ(lines[i], "1") << language << " " << mode << ": item " << i
                                 << " added through the primary read absent on the follower";
      }
    }
  }
}

// A primary with mutual TLS and tokens: the follower copies, tails and forwards with the
// credentials its flags give it (CA, client certificate, its own token), and callers' writes
// through the follower reach the primary with the caller's token, refused without one.
TEST(ReplicationTest, AFollowerReachesAMutualTlsPrimaryWithTokenAndCertificate) {
  const bloomtest::TestPki pki;
  bloomtest::TempDir secrets;
  const std::string tokens = secrets.path() + "/tokens", replica_token = secrets.path() + "/rt";
  std::ofstream(tokens) << bloomtest::TokenDigest("writer-token") << " write ingest\n"
                        << bloomtest::TokenDigest("replica-token") << " replication followers\n";
  std::ofstream(replica_token) << "replica-token\n";
  ReplicationCluster cluster(
      1,
      {"--tls_cert_file=" + pki.Path("server1.crt"), "--tls_key_file=" + pki.Path("server1.key"),
       "--tls_client_ca_file=" + pki.Path("ca1.crt"), "--auth_token_file=" + tokens},
      {"--replication_ca_file=" + pki.Path("ca1.crt"),
       "--replication_cert_file=" + pki.Path("client1.crt"),
       "--replication_key_file=" + pki.Path("client1.key"),
       "--replication_token_file=" + replica_token});
  ASSERT_TRUE(cluster.Start());  // the follower copied the primary's snapshot
  ASSERT_TRUE(cluster.WaitCaughtUp());

  bloomclient::ClientOptions options;
  options.timeout = absl::Seconds(10);
  options.token = "writer-token";
  std::unique_ptr<bloomclient::BloomClient> writer =
      bloomclient::BloomClient::Connect(cluster.follower(0).target(), options);
  ASSERT_OK(writer->Reserve("secured", Spec()).status());  // forwarded to the primary
  ASSERT_OK(writer->Add("secured", {"a", "b"}).status());
  absl::StatusOr<std::vector<bool>> present = writer->MightContain("secured", {"a", "b"});
  ASSERT_OK(present.status());  // answered by the follower once it applied the add
  EXPECT_EQ(*present, std::vector<bool>({true, true}));

  options.token = "";
  std::unique_ptr<bloomclient::BloomClient> anonymous =
      bloomclient::BloomClient::Connect(cluster.follower(0).target(), options);
  EXPECT_EQ(anonymous->Add("secured", {"c"}).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(cluster.WaitCaughtUp());
}

TEST(ReplicationTest, StatusShowsEachPodsRoleSequenceAndLag) {
  ReplicationCluster cluster(1, {"--min_replica_acks=1"});
  ASSERT_TRUE(cluster.Start());
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(cluster.primary().target());
  const bloom::v1::FilterSpec spec = Spec();
  ASSERT_TRUE(client->Add("status", {"a"}, &spec).ok());
  ASSERT_TRUE(cluster.WaitCaughtUp());
  auto status = [](const std::string& target) {  // its JSON without spaces and line breaks
    bloomtest::CommandResult result = bloomtest::RunCommand(
        absl::StrCat(BLOOM_CLI_PATH, " --server=", target, " --json replication"));
    result.out = absl::StrReplaceAll(result.out, {{" ", ""}, {"\n", ""}});
    return result;
  };
  const bloomtest::CommandResult primary = status(cluster.primary().target());
  ASSERT_EQ(primary.exit_code, 0) << primary.out;
  EXPECT_NE(primary.out.find("\"role\":\"ROLE_PRIMARY\""), std::string::npos) << primary.out;
  EXPECT_NE(primary.out.find("\"min_replica_acks\":1"), std::string::npos) << primary.out;
  EXPECT_NE(primary.out.find("\"durable_sequence\":\""), std::string::npos) << primary.out;
  const bloomtest::CommandResult follower = status(cluster.follower(0).target());
  ASSERT_EQ(follower.exit_code, 0) << follower.out;
  EXPECT_NE(follower.out.find("\"role\":\"ROLE_FOLLOWER\""), std::string::npos) << follower.out;
  EXPECT_NE(follower.out.find("\"connected\":true"), std::string::npos) << follower.out;
  EXPECT_NE(follower.out.find(cluster.primary().target()), std::string::npos) << follower.out;
  const bloomtest::CommandResult text = bloomtest::RunCommand(
      absl::StrCat(BLOOM_CLI_PATH, " --server=", cluster.follower(0).target(), " replication"));
  EXPECT_NE(text.out.find("lag:"), std::string::npos) << text.out;
}

TEST(ReplicationTest, AClientClaimingEverythingDoesNotAcknowledgeWritesAndTailsAreBounded) {
  // No real follower: a client of the replication service that tails from the end and then
  // claims to hold every sequence there is. Its claim counts only up to what was sent to it,
  // so a write it never received is not acknowledged on its word.
  ReplicationCluster cluster(0, {"--min_replica_acks=1", "--replica_ack_timeout=1s"});
  ASSERT_TRUE(cluster.Start());
  namespace v1 = bloom::replication::v1;
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(cluster.primary().target(), grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::ReplicationService::Stub> stub = v1::ReplicationService::NewStub(channel);
  grpc::ClientContext context;
  auto tail = stub->Tail(&context);
  v1::TailRequest first;
  first.set_follower_id("liar");
  // From the end of the log: what it claims before the add below was never sent to it.
  first.set_start_sequence(static_cast<uint64_t>(cluster.PrimarySequence()) + 1);
  ASSERT_TRUE(tail->Write(first));
  v1::TailRequest claim;
  claim.set_durable_sequence(UINT64_MAX);
  ASSERT_TRUE(tail->Write(claim));
  v1::TailResponse heartbeat;  // the stream is up (its claim is read before this one is sent)
  ASSERT_TRUE(tail->Read(&heartbeat));
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(cluster.primary().target());
  const bloom::v1::FilterSpec spec = Spec();
  const absl::Status added = client->Add("liar", {"x"}, &spec).status();
  EXPECT_TRUE(absl::IsUnavailable(added)) << added;
  context.TryCancel();
  tail->Finish().IgnoreError();
  ASSERT_TRUE(bloomtest::WaitFor([&] {  // the primary has let it go
    grpc::ClientContext status_context;
    v1::StatusResponse status;
    return stub->Status(&status_context, {}, &status).ok() && status.followers_size() == 0;
  }));

  // A stream must say where it starts (sequences start at 1).
  grpc::ClientContext from_zero_context;
  auto from_zero = stub->Tail(&from_zero_context);
  from_zero->Write(v1::TailRequest());
  v1::TailResponse nothing;
  EXPECT_FALSE(from_zero->Read(&nothing));
  EXPECT_EQ(from_zero->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // One caller's Tail streams beyond its share are refused (every stream here comes from the
  // same peer address: one caller without token auth).
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::TailRequest, v1::TailResponse>>> tails;
  v1::TailRequest from_start;
  from_start.set_start_sequence(1);
  for (int i = 0; i < 8; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    tails.push_back(stub->Tail(contexts.back().get()));
    ASSERT_TRUE(tails.back()->Write(from_start));
    v1::TailResponse response;
    ASSERT_TRUE(tails.back()->Read(&response)) << "stream " << i << " was not served";
  }
  grpc::ClientContext one_more;
  auto refused = stub->Tail(&one_more);
  refused->Write(from_start);
  v1::TailResponse response;
  EXPECT_FALSE(refused->Read(&response));
  const grpc::Status status = refused->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("holds 8 Tail streams already"), std::string::npos)
      << status.error_message();
  for (size_t i = 0; i < tails.size(); ++i) {
    contexts[i]->TryCancel();
    tails[i]->Finish().IgnoreError();
  }
}

}  // namespace

// Automatic failover under a nemesis, in the style of Jepsen's set test: three bloom-server
// pods with --min_replica_acks=1 electing their primary through a 3-member etcd, the C++
// pipelined client and the Python client writing through every pod, and readers on every pod,
// while the nemesis, one fault at a time:
// - kills the primary (SIGKILL) and restarts it, 10 times;
// - stops the primary (SIGSTOP) for twice its lease's TTL, then resumes it, 5 times;
// - kills one etcd member and restarts it, 3 times;
// - switches the primary over to a follower, 3 times.
// After healing, the checker proves:
// - every acknowledged add is present on every pod, item by item, and every pod exports every
//   filter byte for byte alike;
// - no two pods acknowledged writes in the same term, and every write acknowledged in a term
//   is held by the primary of every later term when it took over (each pod's --ack_log);
// - each failover's write unavailability is within 10 s (p50 and max printed);
// - reads never failed or answered "absent" for an item acknowledged before the chaos, except
//   on the pods a fault touched (the pod killed or stopped, and those becoming or ceasing to be
//   the primary, which rebuild their server in the new role) while it lasted.
//
// BLOOM_CHAOS_TTL (default 2s) is the pods' --leader_ttl: failover time scales with it, and the
// checks do not depend on it.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/bloom_client.h"
#include "coordination/cluster_state.h"
#include "coordination/etcd_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/chaos_writers.h"
#include "tests/elected_cluster.h"
#include "tests/replication_cluster.h"
#include "tests/support/etcd_process.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace bloomtest {
namespace {

namespace v1 = bloom::replication::v1;

constexpr char kChaosCluster[] = "chaos";
constexpr int kChaosPods = 3;
constexpr char kSeedFilter[] = "chaos:seed";

// One fault, from its start until the cluster was healthy again.
struct Fault {
  std::string what;
  absl::Time start;
  absl::Time healed;
  std::set<int> touched;                              // pods whose reads may fail meanwhile
  absl::Duration unavailable = absl::ZeroDuration();  // for primary kills and stops
};

struct ReadProblem {
  int pod = 0;
  absl::Time at;
  std::string what;
};

// One line of an --ack_log.
struct AckLine {
  int64_t term = 0;
  bool start = false;  // a term's start (sequence: what the primary held), else an ack
  uint64_t sequence = 0;
  std::string pod;
};

std::vector<AckLine> ReadAckLog(const std::string& path) {
  std::vector<AckLine> lines;
  std::ifstream in(path);
  for (std::string text; std::getline(in, text);) {
    AckLine line;
    for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
      const std::pair<std::string, std::string> kv = absl::StrSplit(word, absl::MaxSplits('=', 1));
      if (kv.first == "term") {
        EXPECT_TRUE(absl::SimpleAtoi(kv.second, &line.term)) << text;
      } else if (kv.first == "start" || kv.first == "acked") {
        line.start = kv.first == "start";
        EXPECT_TRUE(absl::SimpleAtoi(kv.second, &line.sequence)) << text;
      } else if (kv.first == "pod") {
        line.pod = kv.second;
      }
    }
    lines.push_back(line);
  }
  return lines;
}

class FailoverChaosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = EtcdCluster::Start(3);
    ASSERT_NE(etcd_, nullptr);
    const std::vector<std::string> endpoints = absl::StrSplit(etcd_->endpoints(), ',');
    absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> client =
        coordination::EtcdClient::Connect(endpoints, absl::Seconds(2));
    ASSERT_TRUE(client.ok()) << client.status();
    etcd_client_ = *std::move(client);
    const char* ttl = std::getenv("BLOOM_CHAOS_TTL");
    ttl_ = ttl != nullptr && *ttl != '\0' ? ttl : "2s";
    ASSERT_TRUE(absl::ParseDuration(ttl_, &ttl_duration_)) << ttl_;
    for (int i = 0; i < kChaosPods; ++i) {
      data_dirs_.push_back(std::make_unique<TempDir>());
      ports_.push_back(FreeLoopbackPort());
      StartPod(i);
    }
  }

  void StartPod(int i) {
    // The process killed before: kept, so that a failing test prints its log too.
    if (pods_[i] != nullptr) stopped_pods_.push_back(std::move(pods_[i]));
    const std::string address = Target(i);
    pods_[i] = ServerProcess::Start(
        data_dirs_[i]->path(),
        {"--listen=" + address, "--advertise_address=" + address,
         "--etcd_endpoints=" + etcd_->endpoints(), absl::StrCat("--cluster=", kChaosCluster),
         "--leader_ttl=" + ttl_, "--min_replica_acks=1", "--replica_ack_timeout=3s",
         "--ack_log=" + AckLogPath(i), "--allow_unauthenticated_replication",
         "--switchover_cooldown=0"});
    ASSERT_NE(pods_[i], nullptr);
  }

  [[nodiscard]] std::string Target(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }
  [[nodiscard]] std::string AckLogPath(int i) const {
    return absl::StrCat(scratch_.path(), "/acks-", i, ".log");
  }
  [[nodiscard]] std::vector<std::string> Targets() const {
    std::vector<std::string> out;
    out.reserve(kChaosPods);
    for (int i = 0; i < kChaosPods; ++i) out.push_back(Target(i));
    return out;
  }

  // The current term (the leader key's creation revision), or 0 without a primary.
  int64_t Term() {
    absl::StatusOr<coordination::KeyValue> leader =
        etcd_client_->Get(coordination::LeaderKey(kChaosCluster));
    return leader.ok() ? leader->create_revision : 0;
  }

  // The pod etcd names as the primary, or -1.
  int Primary() {
    absl::StatusOr<coordination::KeyValue> leader =
        etcd_client_->Get(coordination::LeaderKey(kChaosCluster));
    if (!leader.ok()) return -1;
    absl::StatusOr<coordination::LeaderRecord> record = coordination::DecodeLeader(leader->value);
    if (!record.ok()) return -1;
    for (int i = 0; i < kChaosPods; ++i) {
      if (record->address == Target(i)) return i;
    }
    return -1;
  }

  absl::StatusOr<v1::StatusResponse> Status(int i) { return ReplicationStatusOf(Target(i)); }

  // Healthy: a primary whose sync set holds both other pods, each connected and serving.
  bool Healthy() { return ClusterHealthy(*etcd_client_, kChaosCluster, Targets()); }

  // The time until a write through a pod other than `faulted` is acknowledged again.
  absl::Duration WriteUnavailability(absl::Time since, int faulted) {
    bloomclient::ClientOptions options;
    options.timeout = absl::Seconds(2);
    const int through = (faulted + 1) % kChaosPods;
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(through), options);
    const bloom::v1::FilterSpec spec = Spec();
    for (int n = 0; absl::Now() - since < absl::Seconds(60); ++n) {
      const std::string item = absl::StrCat("probe-", probes_++, "-", n);
      if (client->Add("chaos:probe", {item}, &spec).ok()) {
        acknowledged_.Record("chaos:probe", {item});
        return absl::Now() - since;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return absl::InfiniteDuration();
  }

  // Readers: every pod, a few reads a second of items acknowledged before the chaos.
  void StartReaders(const std::vector<std::string>& seeds) {
    for (int i = 0; i < kChaosPods; ++i) {
      readers_.emplace_back([this, i, seeds] {
        bloomclient::ClientOptions options;
        options.timeout = absl::Seconds(2);
        std::unique_ptr<bloomclient::BloomClient> client =
            bloomclient::BloomClient::Connect(Target(i), options);
        while (!stop_readers_.load()) {
          absl::StatusOr<std::vector<bool>> present = client->MightContain(kSeedFilter, seeds);
          std::string problem;
          if (!present.ok()) {
            problem = present.status().ToString();
          } else if (std::find(present->begin(), present->end(), false) != present->end()) {
            problem = "an acknowledged item read absent";
          }
          std::lock_guard<std::mutex> lock(reads_mu_);
          if (problem.empty()) {
            read_successes_[i].push_back(absl::Now());
          } else {
            read_problems_.push_back({i, absl::Now(), problem});
          }
          reads_.fetch_add(1);
          absl::SleepFor(absl::Milliseconds(25));
        }
      });
    }
  }

  void StopReaders() {
    stop_readers_.store(true);
    for (std::thread& reader : readers_) reader.join();
    readers_.clear();
  }

  // Runs one fault and waits until the cluster has healed.
  void Run(Fault fault, const std::function<void(Fault&)>& inject) {
    const int primary_before = Primary();
    const int64_t term_before = Term();
    fault.start = absl::Now();
    inject(fault);
    ASSERT_TRUE(WaitFor([&] { return Healthy(); }, absl::Seconds(60))) << fault.what;
    // Writes flow again through every pod.
    const size_t before = acknowledged_.size();
    ASSERT_TRUE(WaitFor([&] { return acknowledged_.size() >= before + 50; }, absl::Seconds(30)))
        << "no writes acknowledged after " << fault.what;
    fault.healed = absl::Now();
    // A new term: the old primary stopped being it and the new one became it, rebuilding their
    // servers in their new roles (the same pod, when a primary that lost its lease to an etcd
    // outage is elected again).
    const int primary_after = Primary();
    if (Term() != term_before) {
      for (int pod : {primary_before, primary_after}) {
        if (pod >= 0) fault.touched.insert(pod);
      }
    }
    faults_.push_back(fault);
  }

  TempDir scratch_;
  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<coordination::EtcdClient> etcd_client_;
  std::string ttl_;
  absl::Duration ttl_duration_;
  std::vector<std::unique_ptr<TempDir>> data_dirs_;
  std::vector<int> ports_;
  std::map<int, std::unique_ptr<ServerProcess>> pods_;
  std::vector<std::unique_ptr<ServerProcess>> stopped_pods_;
  Acknowledged acknowledged_;
  int probes_ = 0;
  std::vector<Fault> faults_;
  std::atomic<bool> stop_readers_{false};
  std::atomic<int> reads_{0};
  std::vector<std::thread> readers_;
  std::mutex reads_mu_;
  std::vector<ReadProblem> read_problems_;
  std::map<int, std::vector<absl::Time>> read_successes_;  // by pod, in time order
};

TEST_F(FailoverChaosTest, NoAcknowledgedAddIsLostAndNoTwoPodsLeadOneTerm) {
  ASSERT_TRUE(WaitFor([&] { return Healthy(); }, absl::Seconds(60)));
  // Items acknowledged before the chaos, which every read must find.
  std::vector<std::string> seeds;
  seeds.reserve(100);
  for (int i = 0; i < 100; ++i) seeds.push_back(absl::StrCat("seed-", i));
  {
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(Primary()));
    const bloom::v1::FilterSpec spec = Spec();
    ASSERT_OK(client->Add(kSeedFilter, seeds, &spec).status());
    acknowledged_.Record(kSeedFilter, seeds);
  }
  // Every follower has them before a read is asked of it.
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 0; i < kChaosPods; ++i) {
      std::unique_ptr<bloomclient::BloomClient> client =
          bloomclient::BloomClient::Connect(Target(i));
      absl::StatusOr<std::vector<bool>> present = client->MightContain(kSeedFilter, seeds);
      if (!present.ok() || std::find(present->begin(), present->end(), false) != present->end()) {
        return false;
      }
    }
    return true;
  }));

  std::vector<std::string> kinds;
  kinds.insert(kinds.end(), EnvInt("BLOOM_CHAOS_KILLS", 10), "kill");
  kinds.insert(kinds.end(), EnvInt("BLOOM_CHAOS_STOPS", 5), "stop");
  kinds.insert(kinds.end(), 3, "etcd");
  kinds.insert(kinds.end(), 3, "switchover");
  std::mt19937 random(20261126);
  std::shuffle(kinds.begin(), kinds.end(), random);

  StartReaders(seeds);
  {
    CppWriters cpp(Targets(), &acknowledged_);
    PolyglotWriters python(Targets(), scratch_.path(), &acknowledged_, {"python"});
    for (size_t n = 0; n < kinds.size(); ++n) {
      const std::string& kind = kinds[n];
      absl::SleepFor(absl::Milliseconds(100 + random() % 400));  // under load a while
      if (kind == "kill" || kind == "stop") {
        const int primary = Primary();
        ASSERT_GE(primary, 0);
        Run({absl::StrCat(kind, " ", n, " of primary ", primary), {}, {}, {primary}},
            [&](Fault& fault) {
              if (kind == "kill") {
                pods_[primary]->Kill();
                fault.unavailable = WriteUnavailability(fault.start, primary);
                StartPod(primary);
              } else {
                pods_[primary]->Signal(SIGSTOP);
                fault.unavailable = WriteUnavailability(fault.start, primary);
                const absl::Duration stopped = absl::Now() - fault.start;
                if (stopped < 2 * ttl_duration_) absl::SleepFor(2 * ttl_duration_ - stopped);
                pods_[primary]->Signal(SIGCONT);
              }
            });
      } else if (kind == "etcd") {
        const int member = static_cast<int>(random() % 3);
        Run({absl::StrCat("etcd member ", member, " killed"), {}, {}, {}}, [&](Fault&) {
          etcd_->Kill(member);
          absl::SleepFor(absl::Seconds(1));
          ASSERT_TRUE(etcd_->Restart(member));
        });
      } else {
        const int primary = Primary();
        ASSERT_GE(primary, 0);
        const int target = (primary + 1 + static_cast<int>(random() % 2)) % kChaosPods;
        Run({absl::StrCat("switchover ", n, " from ", primary, " to ", target), {}, {}, {}},
            [&](Fault&) {
              auto stub = v1::ReplicationService::NewStub(
                  grpc::CreateChannel(Target(primary), grpc::InsecureChannelCredentials()));
              grpc::ClientContext context;
              context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
              v1::SwitchoverRequest request;
              request.set_to(Target(target));
              v1::SwitchoverResponse response;
              const grpc::Status moved = stub->Switchover(&context, request, &response);
              ASSERT_TRUE(moved.ok()) << moved.error_message();
              ASSERT_TRUE(WaitFor([&] { return Primary() == target; }));
            });
      }
      if (HasFatalFailure()) break;
    }
    // Both languages' writes were acknowledged across the faults.
    EXPECT_TRUE(WaitFor([&] { return python.min_runs() >= 2; }, absl::Seconds(60)));
    cpp.Stop();
    python.Stop();
  }
  StopReaders();
  ASSERT_FALSE(HasFatalFailure());

  // Healed and quiet: every pod holds the primary's latest sequence.
  ASSERT_TRUE(WaitFor([&] {
    const int primary = Primary();
    if (primary < 0) return false;
    absl::StatusOr<v1::StatusResponse> lead = Status(primary);
    if (!lead.ok()) return false;
    for (int i = 0; i < kChaosPods; ++i) {
      absl::StatusOr<v1::StatusResponse> status = Status(i);
      if (!status.ok() || status->sequence() != lead->sequence()) return false;
    }
    return true;
  }));
  const auto all = acknowledged_.Snapshot();
  // Exports first: a dump carries its pod's count of checks, which the checks below change.
  for (const std::string& name : FilterNames(all)) {
    if (name == kSeedFilter) continue;  // the readers' checks differ per pod, and dumps count them
    const std::string first = ReplicationCluster::Export(Target(0), name);
    EXPECT_FALSE(first.empty()) << name;
    for (int i = 1; i < kChaosPods; ++i) {
      EXPECT_TRUE(ReplicationCluster::Export(Target(i), name) == first)
          << "pod " << i << " exports " << name << " differently from pod 0";
    }
  }
  for (int i = 0; i < kChaosPods; ++i) ExpectAllPresent(Target(i), all);

  // The ack logs: one pod per term, and each term's primary held every write acknowledged in
  // the terms before it.
  std::map<int64_t, std::set<std::string>> acked_by;
  std::map<int64_t, uint64_t> highest_acked;
  std::map<int64_t, uint64_t> start_of;
  for (int i = 0; i < kChaosPods; ++i) {
    for (const AckLine& line : ReadAckLog(AckLogPath(i))) {
      EXPECT_EQ(line.pod, Target(i));
      if (line.start) {
        EXPECT_EQ(start_of.count(line.term), 0u) << "term " << line.term << " began twice";
        start_of[line.term] = line.sequence;
      } else {
        acked_by[line.term].insert(line.pod);
        highest_acked[line.term] = std::max(highest_acked[line.term], line.sequence);
      }
    }
  }
  for (const auto& [term, pods] : acked_by) {
    EXPECT_EQ(pods.size(), 1u) << "term " << term << " was acknowledged by "
                               << absl::StrJoin(pods, " and ");
  }
  for (const auto& [term, start] : start_of) {
    for (const auto& [earlier, highest] : highest_acked) {
      if (earlier >= term) break;
      EXPECT_LE(highest, start) << "term " << earlier << " acknowledged sequence " << highest
                                << ", but the primary of term " << term << " held only " << start
                                << " when it took over";
    }
  }
  // Every kill, stop and switchover made a new term that acknowledged writes.
  EXPECT_GE(acked_by.size(), 13u);

  // The timeline, for a failure's reader.
  const absl::Time began = faults_.empty() ? absl::Now() : faults_.front().start;
  for (const Fault& fault : faults_) {
    std::printf("chaos: +%.1fs %s: healed after %.1fs%s, touching {%s}\n",
                absl::ToDoubleSeconds(fault.start - began), fault.what.c_str(),
                absl::ToDoubleSeconds(fault.healed - fault.start),
                fault.unavailable > absl::ZeroDuration()
                    ? absl::StrCat(", writes unavailable for ",
                                   absl::FormatDuration(
                                       absl::Trunc(fault.unavailable, absl::Milliseconds(1))))
                          .c_str()
                    : "",
                absl::StrJoin(fault.touched, ",").c_str());
  }

  // Failover time.
  std::vector<absl::Duration> unavailable;
  for (const Fault& fault : faults_) {
    if (fault.unavailable > absl::ZeroDuration()) unavailable.push_back(fault.unavailable);
  }
  ASSERT_FALSE(unavailable.empty());
  std::sort(unavailable.begin(), unavailable.end());
  const absl::Duration p50 = unavailable[unavailable.size() / 2];
  const absl::Duration worst = unavailable.back();
  std::printf(
      "chaos: %zu faults, %zu acknowledged items, %d reads; write unavailability after a "
      "primary kill or stop (leader_ttl %s): p50 %s, max %s\n",
      faults_.size(), acknowledged_.size(), reads_.load(), ttl_.c_str(),
      absl::FormatDuration(p50).c_str(), absl::FormatDuration(worst).c_str());
  EXPECT_LE(worst, absl::Seconds(10));

  // Reads: a failure is excused only on a pod a fault touched, from the fault's start until
  // that pod next answered a read (a client's channel to a pod that went away waits out gRPC's
  // reconnect backoff for a moment after the pod is back). An acknowledged item read absent is
  // never excused.
  auto answered_between = [&](int pod, absl::Time from, absl::Time to) {
    const std::vector<absl::Time>& successes = read_successes_[pod];
    auto first = std::lower_bound(successes.begin(), successes.end(), from);
    return first != successes.end() && *first < to;
  };
  int excused = 0;
  int unexcused = 0;
  for (const ReadProblem& problem : read_problems_) {
    const Fault* during = nullptr;  // the fault the failure happened in, if any
    bool touched = false;           // by a fault it happened in, or before the pod was back
    for (const Fault& fault : faults_) {
      if (problem.at < fault.start) continue;
      if (problem.at <= fault.healed) during = &fault;
      if (fault.touched.count(problem.pod) > 0 &&
          (problem.at <= fault.healed ||
           !answered_between(problem.pod, fault.healed, problem.at))) {
        touched = true;
      }
    }
    if (touched && problem.what != "an acknowledged item read absent") {
      ++excused;
      continue;
    }
    if (++unexcused > 10) continue;  // the first few say enough
    ADD_FAILURE() << "a read through pod " << problem.pod << " failed at +"
                  << absl::ToDoubleSeconds(problem.at - began) << "s ("
                  << (during == nullptr ? "no fault" : during->what) << "): " << problem.what;
  }
  EXPECT_EQ(unexcused, 0) << "reads that failed where no fault excuses it";
  std::printf("chaos: %d reads failed on pods a fault touched, %d elsewhere\n", excused, unexcused);
}

}  // namespace
}  // namespace bloomtest

// Slots moving between the groups of a sharded deployment under a nemesis, in the style of
// failover_chaos_test.cc: two groups of three pods (each electing its primary through etcd,
// --min_replica_acks=1), one shard map of 64 slots, a real 3-member etcd. The C++ pipelined
// client and the Python client write through every pod, neither routing by the map (so every
// pod forwards other groups' operations, Pipeline streams included), half of the C++ client's
// filters windowed (their copies caught up in the slices their items went to), and readers
// read through every pod. A mover moves two ranges of slots back and forth between the groups
// (bloom-cli cluster move, run again until it succeeds) while the nemesis, one fault at a time:
// - kills a group's primary (SIGKILL) and restarts it, 4 times;
// - stops a group's primary (SIGSTOP) for twice its lease's TTL, then resumes it, twice;
// - kills one etcd member and restarts it, twice.
// After healing, the checker proves:
// - every acknowledged add is present, item by item, on every pod of the group that owns its
//   filter's slot (asked as forwarded calls, which a pod never forwards again);
// - within that group, every pod exports every filter byte for byte alike;
// - from the ack logs, no slot was acknowledged by two groups under one map version, and no
//   two pods acknowledged writes in one term;
// - every move finished; the write pauses (the mover's figures) are printed, p50 under a second
//   and the longest (a pause that met a failover) under 15 s;
// - reads never answered "absent" for an item acknowledged before the chaos, and failed only
//   while a fault touched the reading pod or a pod of the group its filter lives in (for the
//   seed whose slots move: while any fault lasted); a move alone never failed a read.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/bloom_client.h"
#include "common/slot.h"
#include "coordination/shard_map_record.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "sharding/shard_map.h"
#include "tests/chaos_writers.h"
#include "tests/elected_cluster.h"
#include "tests/replication_cluster.h"
#include "tests/support/etcd_process.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace bloomtest {
namespace {

namespace rv1 = bloom::replication::v1;

constexpr char kChaosMapKey[] = "chaos/shardmap";
const char* const kGroups[] = {"chaos/a", "chaos/b"};
constexpr int kPodsPerGroup = 3;
constexpr int kShardingPods = 2 * kPodsPerGroup;
constexpr uint32_t kSlots = 64;
// The ranges that move back and forth: group a's 0-15 and group b's 32-47.
constexpr uint32_t kMovingRanges[][2] = {{0, 15}, {32, 47}};

int GroupOf(int pod) { return pod / kPodsPerGroup; }

// The first name "<prefix><n>" whose slot is within first..last.
std::string NameInSlots(uint32_t first, uint32_t last, const std::string& prefix) {
  for (int n = 0;; ++n) {
    std::string name = absl::StrCat(prefix, n);
    const uint32_t slot = slots::SlotOf(name, kSlots);
    if (slot >= first && slot <= last) return name;
  }
}

struct ShardingFault {
  std::string what;
  absl::Time start;
  absl::Time healed;
  std::set<int> touched;  // pods whose reads, and reads of whose group's filters, may fail
};

struct ShardingReadProblem {
  int pod = 0;
  size_t seed = 0;  // index in seeds_
  absl::Time at;
  std::string what;
};

class ShardingChaosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = EtcdCluster::Start(3);
    ASSERT_NE(etcd_, nullptr);
    const std::vector<std::string> endpoints = absl::StrSplit(etcd_->endpoints(), ',');
    absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> client =
        coordination::EtcdClient::Connect(endpoints, absl::Seconds(2));
    ASSERT_TRUE(client.ok()) << client.status();
    etcd_client_ = *std::move(client);
    absl::StatusOr<sharding::ShardMap> even =
        sharding::ShardMap::EvenSplit({kGroups[0], kGroups[1]}, kSlots);
    ASSERT_TRUE(even.ok()) << even.status();
    ASSERT_TRUE(coordination::CreateShardMap(*etcd_client_, kChaosMapKey, *even).ok());
    for (int i = 0; i < kShardingPods; ++i) {
      data_dirs_.push_back(std::make_unique<TempDir>());
      ports_.push_back(FreeLoopbackPort());
      StartPod(i);
    }
  }

  void StartPod(int i) {
    if (pods_[i] != nullptr) stopped_pods_.push_back(std::move(pods_[i]));  // its log
    const std::string address = Target(i);
    pods_[i] = ServerProcess::Start(
        data_dirs_[i]->path(),
        {"--listen=" + address, "--advertise_address=" + address,
         "--etcd_endpoints=" + etcd_->endpoints(), absl::StrCat("--cluster=", kGroups[GroupOf(i)]),
         absl::StrCat("--shard_map=", kChaosMapKey), "--leader_ttl=2s", "--min_replica_acks=1",
         "--replica_ack_timeout=3s", "--ack_log=" + AckLogPath(i),
         "--allow_unauthenticated_replication"});
    ASSERT_NE(pods_[i], nullptr);
  }

  [[nodiscard]] std::string Target(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }
  [[nodiscard]] std::string AckLogPath(int i) const {
    return absl::StrCat(scratch_.path(), "/acks-", i, ".log");
  }
  [[nodiscard]] std::vector<std::string> Targets() const {
    std::vector<std::string> out;
    for (int i = 0; i < kShardingPods; ++i) out.push_back(Target(i));
    return out;
  }
  [[nodiscard]] std::vector<std::string> GroupTargets(int group) const {
    std::vector<std::string> out;
    for (int i = 0; i < kPodsPerGroup; ++i) out.push_back(Target(group * kPodsPerGroup + i));
    return out;
  }

  // The pod etcd names as `group`'s primary, or -1; and its term (0 without one).
  int Primary(int group) {
    const int index = NamedPrimary(*etcd_client_, kGroups[group], GroupTargets(group));
    return index < 0 ? -1 : group * kPodsPerGroup + index;
  }
  int64_t Term(int group) {
    absl::StatusOr<coordination::KeyValue> leader =
        etcd_client_->Get(coordination::LeaderKey(kGroups[group]));
    return leader.ok() ? leader->create_revision : 0;
  }

  absl::StatusOr<rv1::StatusResponse> Status(int i) { return ReplicationStatusOf(Target(i)); }

  // A group is healthy with a primary whose sync set holds both other pods, each connected.
  bool Healthy(int group) {
    return ClusterHealthy(*etcd_client_, kGroups[group], GroupTargets(group));
  }
  bool Healthy() { return Healthy(0) && Healthy(1); }

  absl::StatusOr<sharding::ShardMap> Map() {
    absl::StatusOr<coordination::StoredShardMap> stored =
        coordination::ReadShardMap(*etcd_client_, kChaosMapKey);
    if (!stored.ok()) return stored.status();
    return stored->map;
  }

  // Readers: every pod, a few reads a second of the seeds, each acknowledged before the chaos.
  void StartReaders() {
    for (int i = 0; i < kShardingPods; ++i) {
      readers_.emplace_back([this, i] {
        bloomclient::ClientOptions options;
        options.timeout = absl::Seconds(2);
        std::unique_ptr<bloomclient::BloomClient> client =
            bloomclient::BloomClient::Connect(Target(i), options);
        // Connected before the chaos: a first connection made under the writers' load may
        // need a second try, which is no read failing.
        for (int tries = 0; tries < 100 && !client->MightContain(seeds_[0], seed_items_).ok();
             ++tries) {
          absl::SleepFor(absl::Milliseconds(100));
        }
        readers_ready_.fetch_add(1);
        for (size_t n = 0; !stop_readers_.load(); ++n) {
          const size_t seed = n % seeds_.size();
          absl::StatusOr<std::vector<bool>> present =
              client->MightContain(seeds_[seed], seed_items_);
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
            read_problems_.push_back({i, seed, absl::Now(), problem});
          }
          reads_.fetch_add(1);
          absl::SleepFor(absl::Milliseconds(25));
        }
      });
    }
  }
  void WaitForReaders() {
    ASSERT_TRUE(WaitFor([&] { return readers_ready_.load() == kShardingPods; }, absl::Seconds(20)));
  }
  void StopReaders() {
    stop_readers_.store(true);
    for (std::thread& reader : readers_) reader.join();
    readers_.clear();
  }

  // The mover: the moving ranges go to the other group and back, each move run again (through
  // another pod) until it succeeds, until the nemesis is done and every range is back home.
  void StartMover() {
    mover_ = std::thread([this] {
      for (int n = 0;; ++n) {
        const uint32_t* range = kMovingRanges[n % 2];
        const int home = range[0] < kSlots / 2 ? 0 : 1;
        const int to = (n / 2) % 2 == 0 ? 1 - home : home;
        if (nemesis_done_.load() && n % 4 == 0) return;
        const std::string slots = absl::StrCat(range[0], "-", range[1]);
        bool moved = false;
        for (int attempt = 0; attempt < 40 && !moved; ++attempt) {
          int through = (n + attempt) % kShardingPods;
          if (through == faulted_pod_.load()) through = (through + 1) % kShardingPods;
          // Every fifth move's first run is killed (SIGKILL) part way: the next resumes it.
          const bool kill = n % 5 == 2 && attempt == 0;
          const CommandResult run =
              RunCommand(absl::StrCat(kill ? "timeout -s KILL 0.3 " : "timeout 120 ",
                                      BLOOM_CLI_PATH, " --timeout=10s --server=", Target(through),
                                      " cluster move --slots=", slots, " --to=", kGroups[to]));
          std::smatch paused;
          if (run.exit_code == 0 &&
              std::regex_search(run.out, paused, std::regex("writes paused ([0-9]+) ms"))) {
            std::lock_guard<std::mutex> lock(moves_mu_);
            pauses_.push_back(absl::Milliseconds(std::stoi(paused[1])));
            pause_ends_.push_back({pauses_.back(), absl::Now()});
            if (pauses_.back() > absl::Seconds(2)) {
              long_pauses_.push_back(
                  absl::StrCat("+", absl::FormatTime(absl::Now()), ": ", run.out));
            }
            moved = true;
          } else if (run.exit_code == 0) {
            moved = true;  // it found the move already made (a run killed after the flip)
          } else {
            std::lock_guard<std::mutex> lock(moves_mu_);
            ++move_retries_;
            movers_killed_ += kill ? 1 : 0;
            last_move_failure_ = run.out;
            absl::SleepFor(absl::Milliseconds(500));
          }
        }
        if (!moved) {
          std::lock_guard<std::mutex> lock(moves_mu_);
          move_failed_ =
              absl::StrCat("slots ", slots, " to ", kGroups[to], ": ", last_move_failure_);
          return;
        }
        moves_done_.fetch_add(1);
      }
    });
  }

  // Runs one fault and waits until both groups are healthy and writes flow again.
  void Run(ShardingFault fault, const std::function<void()>& inject) {
    const int64_t terms_before[] = {Term(0), Term(1)};
    const int primaries_before[] = {Primary(0), Primary(1)};
    fault.start = absl::Now();
    inject();
    ASSERT_TRUE(WaitFor([&] { return Healthy(); }, absl::Seconds(60))) << fault.what;
    const size_t before = acknowledged_.size();
    ASSERT_TRUE(WaitFor([&] { return acknowledged_.size() >= before + 50; }, absl::Seconds(30)))
        << "no writes acknowledged after " << fault.what;
    fault.healed = absl::Now();
    faulted_pod_.store(-1);
    // A new term: the pods that stopped or became the primary rebuilt their servers.
    for (int g = 0; g < 2; ++g) {
      if (Term(g) == terms_before[g]) continue;
      for (int pod : {primaries_before[g], Primary(g)}) {
        if (pod >= 0) fault.touched.insert(pod);
      }
    }
    faults_.push_back(std::move(fault));
  }

  // Whether `problem` happened where a fault excuses it.
  bool Excused(const ShardingReadProblem& problem) {
    auto answered_between = [&](int pod, absl::Time from, absl::Time to) {
      const std::vector<absl::Time>& successes = read_successes_[pod];
      auto first = std::lower_bound(successes.begin(), successes.end(), from);
      return first != successes.end() && *first < to;
    };
    if (problem.what == "an acknowledged item read absent") return false;
    for (const ShardingFault& fault : faults_) {
      if (problem.at < fault.start) continue;
      const bool during = problem.at <= fault.healed;
      // The reading pod: from the fault until it next answered a read.
      if (fault.touched.count(problem.pod) > 0 &&
          (during || !answered_between(problem.pod, fault.healed, problem.at))) {
        return true;
      }
      if (!during) continue;
      // The filter's group: a read forwarded there may meet the pod the fault touched.
      for (int pod : fault.touched) {
        if (problem.seed == kMovingSeed || GroupOf(pod) == static_cast<int>(problem.seed)) {
          return true;
        }
      }
    }
    return false;
  }

  static constexpr size_t kMovingSeed = 2;  // seeds_: group a's, group b's, then the moving one

  TempDir scratch_;
  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<coordination::EtcdClient> etcd_client_;
  std::vector<std::unique_ptr<TempDir>> data_dirs_;
  std::vector<int> ports_;
  std::map<int, std::unique_ptr<ServerProcess>> pods_;
  std::vector<std::unique_ptr<ServerProcess>> stopped_pods_;
  Acknowledged acknowledged_;
  std::vector<ShardingFault> faults_;
  std::atomic<int> faulted_pod_{-1};

  std::vector<std::string> seeds_;
  std::vector<std::string> seed_items_;
  std::atomic<bool> stop_readers_{false};
  std::atomic<int> reads_{0};
  std::atomic<int> readers_ready_{0};
  std::vector<std::thread> readers_;
  std::mutex reads_mu_;
  std::vector<ShardingReadProblem> read_problems_;
  std::map<int, std::vector<absl::Time>> read_successes_;

  std::thread mover_;
  std::atomic<bool> nemesis_done_{false};
  std::atomic<int> moves_done_{0};
  std::mutex moves_mu_;
  std::vector<absl::Duration> pauses_;
  int move_retries_ = 0;
  int movers_killed_ = 0;
  std::vector<std::string> long_pauses_;  // the mover's output, for a pause over 2 s
  // Each pause's length and about when it ended (when its mover returned).
  std::vector<std::pair<absl::Duration, absl::Time>> pause_ends_;
  std::string last_move_failure_;
  std::string move_failed_;
};

TEST_F(ShardingChaosTest, MovesUnderFaultsLoseNoAcknowledgedAddAndNoSlotHasTwoOwners) {
  ASSERT_TRUE(WaitFor([&] { return Healthy(); }, absl::Seconds(60)));
  // Seeds: one in group a's slots that stay, one in group b's, one in slots that move.
  seeds_ = {NameInSlots(16, 31, "seed:a"), NameInSlots(48, 63, "seed:b"),
            NameInSlots(kMovingRanges[0][0], kMovingRanges[0][1], "seed:moving")};
  for (int i = 0; i < 50; ++i) seed_items_.push_back(absl::StrCat("seed-", i));
  {
    std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(Target(0));
    const bloom::v1::FilterSpec spec = Spec();
    for (const std::string& seed : seeds_) {
      ASSERT_OK(client->Add(seed, seed_items_, &spec).status());
      acknowledged_.Record(seed, seed_items_);
    }
  }
  // Every pod reads them before the chaos.
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 0; i < kShardingPods; ++i) {
      for (const std::string& seed : seeds_) {
        if (!AllPresent(Target(i), seed, seed_items_)) return false;
      }
    }
    return true;
  }));

  std::vector<std::pair<std::string, int>> faults;  // kind, group
  for (int g = 0; g < 2; ++g) {
    faults.insert(faults.end(), 2, {"kill", g});
    faults.insert(faults.end(), 1, {"stop", g});
    faults.emplace_back("etcd", g);
  }
  std::mt19937 random(20261129);
  std::shuffle(faults.begin(), faults.end(), random);

  StartReaders();
  {
    CppWriters cpp(Targets(), &acknowledged_, /*filters=*/16, /*windowed_every=*/2);
    PolyglotWriters python(Targets(), scratch_.path(), &acknowledged_, {"python"});
    WaitForReaders();
    StartMover();
    for (size_t n = 0; n < faults.size(); ++n) {
      const std::string kind = faults[n].first;  // (not a structured binding: lambdas use it)
      const int group = faults[n].second;
      absl::SleepFor(absl::Milliseconds(500 + random() % 1500));  // moves and load meanwhile
      if (kind == "kill" || kind == "stop") {
        const int primary = Primary(group);
        ASSERT_GE(primary, 0);
        faulted_pod_.store(primary);
        Run({absl::StrCat(kind, " ", n, " of group ", group, "'s primary ", primary),
             {},
             {},
             {primary}},
            [&] {
              if (kind == "kill") {
                pods_[primary]->Kill();
                absl::SleepFor(absl::Seconds(1));
                StartPod(primary);
              } else {
                pods_[primary]->Signal(SIGSTOP);
                absl::SleepFor(absl::Seconds(4));  // twice the lease's TTL
                pods_[primary]->Signal(SIGCONT);
              }
            });
      } else {
        const int member = static_cast<int>(random() % 3);
        Run({absl::StrCat("etcd member ", member, " killed"), {}, {}, {}}, [&] {
          etcd_->Kill(member);
          absl::SleepFor(absl::Seconds(1));
          ASSERT_TRUE(etcd_->Restart(member));
          // A pod whose lease was kept alive through that member may lose it a lease's TTL
          // later: the fault lasts until then.
          absl::SleepFor(absl::Seconds(4));
        });
      }
      if (HasFatalFailure()) break;
    }
    nemesis_done_.store(true);
    mover_.join();
    EXPECT_TRUE(WaitFor([&] { return python.min_runs() >= 2; }, absl::Seconds(60)));
    cpp.Stop();
    python.Stop();
  }
  StopReaders();
  ASSERT_FALSE(HasFatalFailure());
  {
    std::lock_guard<std::mutex> lock(moves_mu_);
    ASSERT_TRUE(move_failed_.empty()) << "a move never succeeded: " << move_failed_;
  }
  EXPECT_GE(moves_done_.load(), 4);

  // Healed and quiet: every pod holds its primary's latest sequence, and the latest map.
  ASSERT_TRUE(WaitFor([&] { return Healthy(); }, absl::Seconds(60)));
  for (int g = 0; g < 2; ++g) {
    ASSERT_TRUE(WaitFor([&] {
      absl::StatusOr<rv1::StatusResponse> lead = Status(Primary(g));
      if (!lead.ok()) return false;
      for (int i = g * kPodsPerGroup; i < (g + 1) * kPodsPerGroup; ++i) {
        absl::StatusOr<rv1::StatusResponse> status = Status(i);
        if (!status.ok() || status->sequence() != lead->sequence()) return false;
      }
      return true;
    })) << "group "
        << g;
  }
  absl::StatusOr<sharding::ShardMap> map = Map();
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_FALSE(map->move().has_value()) << "a move was left part way";

  // Every acknowledged add, on every pod of the group that owns it, and the group's pods alike.
  const auto all = acknowledged_.Snapshot();
  for (const auto& [name, items] : all) {
    const std::string& owner = map->OwnerOfName(name);
    const int group = owner == kGroups[0] ? 0 : 1;
    const std::vector<std::string> targets = GroupTargets(group);
    if (name != seeds_[0] && name != seeds_[1] && name != seeds_[2]) {
      // (The seeds' dumps count the readers' checks, which differ per pod.)
      const std::string first = ReplicationCluster::Export(targets[0], name);
      EXPECT_FALSE(first.empty()) << name;
      for (size_t i = 1; i < targets.size(); ++i) {
        EXPECT_TRUE(ReplicationCluster::Export(targets[i], name) == first)
            << targets[i] << " exports " << name << " differently from " << targets[0];
      }
    }
    for (const std::string& target : targets) {
      // As a forwarded call: answered from this pod's own store, or refused.
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      // As if forwarded by a pod holding a map newer than any: never forwarded again.
      context.AddMetadata("bloom-shard-hop", "18446744073709551615");
      bloom::v1::MightContainRequest request;
      request.set_name(name);
      for (const std::string& item : items) request.add_raw_items(item);
      bloom::v1::MightContainResponse response;
      const grpc::Status asked =
          bloom::v1::BloomFilterService::NewStub(
              grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))
              ->MightContain(&context, request, &response);
      ASSERT_TRUE(asked.ok()) << target << " " << name << ": " << asked.error_message();
      ASSERT_EQ(response.present_size(), static_cast<int>(items.size()));
      for (size_t i = 0; i < items.size(); ++i) {
        ASSERT_TRUE(response.present(static_cast<int>(i)))
            << target << " (group " << owner << ") lost the acknowledged add of " << items[i]
            << " to " << name;
      }
    }
  }

  // The ack logs: one pod per term, and one group per slot under each map version.
  std::vector<std::string> logs;
  for (int i = 0; i < kShardingPods; ++i) logs.push_back(AckLogPath(i));
  ExpectOnePrimaryPerTerm(logs);
  std::map<std::pair<uint64_t, uint32_t>, std::set<std::string>> acknowledged_by;
  for (int i = 0; i < kShardingPods; ++i) {
    std::ifstream in(AckLogPath(i));
    for (std::string line; std::getline(in, line);) {
      if (!absl::StartsWith(line, "shard ")) continue;
      std::map<std::string, std::string> fields;
      for (absl::string_view word : absl::StrSplit(line.substr(6), ' ', absl::SkipEmpty())) {
        fields.insert(absl::StrSplit(word, absl::MaxSplits('=', 1)));
      }
      EXPECT_EQ(fields["group"], kGroups[GroupOf(i)]) << line;
      EXPECT_EQ(fields["pod"], Target(i)) << line;
      acknowledged_by[{std::stoull(fields["version"]), std::stoul(fields["slot"])}].insert(
          fields["group"]);
    }
  }
  EXPECT_GT(acknowledged_by.size(), 0U);
  std::set<uint64_t> versions;
  for (const auto& [key, groups] : acknowledged_by) {
    versions.insert(key.first);
    EXPECT_EQ(groups.size(), 1U) << "slot " << key.second << " was acknowledged under map version "
                                 << key.first << " by " << absl::StrJoin(groups, " and ");
  }
  // Writes were acknowledged under many versions of the map: the moves changed it under load.
  EXPECT_GE(versions.size(), 4U);

  // The timeline and the moves' pauses.
  const absl::Time began = faults_.empty() ? absl::Now() : faults_.front().start;
  for (const ShardingFault& fault : faults_) {
    std::printf("shard chaos: +%.1fs %s: healed after %.1fs, touching {%s}\n",
                absl::ToDoubleSeconds(fault.start - began), fault.what.c_str(),
                absl::ToDoubleSeconds(fault.healed - fault.start),
                absl::StrJoin(fault.touched, ",").c_str());
  }
  {
    std::lock_guard<std::mutex> lock(moves_mu_);
    ASSERT_FALSE(pauses_.empty());
    std::sort(pauses_.begin(), pauses_.end());
    std::printf(
        "shard chaos: %d moves (%d runs retried, %d of them killed on purpose), %zu "
        "acknowledged items, %d reads, map version %llu; write pause p50 %s, max %s\n",
        moves_done_.load(), move_retries_, movers_killed_, acknowledged_.size(), reads_.load(),
        static_cast<unsigned long long>(map->version()),
        absl::FormatDuration(pauses_[pauses_.size() / 2]).c_str(),
        absl::FormatDuration(pauses_.back()).c_str());
    // A move paused while no fault lasted pauses writes for well under a second; one whose
    // pause met a stopped or killed primary, or a killed etcd member, waits for that fault to
    // heal and the group's failover: up to 10 s for each fault it met (the nemesis starts one
    // every few seconds, so a pause can meet several), and 5 s more.
    EXPECT_LT(pauses_[pauses_.size() / 2], absl::Seconds(1));
    for (const auto& [length, ended] : pause_ends_) {
      int met = 0;
      for (const ShardingFault& fault : faults_) {
        met += fault.start <= ended && fault.healed >= ended - length - absl::Seconds(1) ? 1 : 0;
      }
      EXPECT_LT(length, absl::Seconds(5) + met * absl::Seconds(10))
          << "a pause that met " << met << " faults: " << absl::StrJoin(long_pauses_, "\n");
    }
  }

  // Reads.
  int excused = 0;
  int unexcused = 0;
  for (const ShardingReadProblem& problem : read_problems_) {
    if (Excused(problem)) {
      ++excused;
      continue;
    }
    if (++unexcused > 10) continue;
    ADD_FAILURE() << "a read of " << seeds_[problem.seed] << " through pod " << problem.pod
                  << " failed at +" << absl::ToDoubleSeconds(problem.at - began)
                  << "s: " << problem.what;
  }
  EXPECT_EQ(unexcused, 0) << "reads that failed where no fault excuses it";
  std::printf("shard chaos: %d reads failed where a fault excuses it, %d elsewhere\n", excused,
              unexcused);
}

}  // namespace
}  // namespace bloomtest

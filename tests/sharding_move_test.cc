// Moving slots between the groups of a sharded deployment (bloom-cli cluster move) while
// writers add through every pod: the mover is killed once and run again, and at the end every
// acknowledged add reads present in the new owner, the old owner holds no copy, and writes
// paused for a bounded time. An aborted move leaves the slots with their owner.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/bloom_client.h"
#include "common/slot.h"
#include "tests/sharded_deployment.h"

namespace bloomtest {
namespace {

// Names "<prefix><n>" whose slots are within first..last, `count` of them.
std::vector<std::string> NamesInSlots(uint32_t first, uint32_t last, const std::string& prefix,
                                      size_t count) {
  std::vector<std::string> names;
  for (int n = 0; names.size() < count; ++n) {
    std::string name = absl::StrCat(prefix, n);
    const uint32_t slot = slots::SlotOf(name, kSlots);
    if (slot >= first && slot <= last) names.push_back(std::move(name));
  }
  return names;
}

// What a bloom-cli run printed, and how it ended.
struct CliRun {
  bool saw = false;    // a line contained the text looked for
  int exit_code = -1;  // -1: killed
  std::string out;
};

// Runs bloom-cli and, once a line of its output contains `at`, calls `act` with its pid (once);
// reads what it prints until it ends.
CliRun RunAndActAt(const std::string& args, const std::string& at,
                   const std::function<void(pid_t)>& act) {
  CliRun run;
  int out[2];
  if (pipe(out) != 0) return run;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    execl("/bin/sh", "sh", "-c", (std::string("exec ") + BLOOM_CLI_PATH + " " + args).c_str(),
          nullptr);
    _exit(127);
  }
  close(out[1]);
  char buffer[512];
  ssize_t got;
  while ((got = read(out[0], buffer, sizeof(buffer))) > 0) {
    run.out.append(buffer, static_cast<size_t>(got));
    if (!run.saw && absl::StrContains(run.out, at)) {
      run.saw = true;
      act(pid);
    }
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

// Runs bloom-cli and kills it (SIGKILL) once a line of its output contains `kill_at`: whether
// it saw that line before the command ended.
bool RunAndKillAt(const std::string& args, const std::string& kill_at) {
  const CliRun run = RunAndActAt(args, kill_at, [](pid_t pid) { kill(pid, SIGKILL); });
  if (!run.saw) ADD_FAILURE() << "bloom-cli ended before \"" << kill_at << "\": " << run.out;
  return run.saw;
}

// Writers adding numbered items to `names` through the pods, in turn, until stopped. A paused
// slot answers UNAVAILABLE meanwhile; the writer goes on with its next item.
class Writers {
 public:
  Writers(const std::vector<std::string>& targets, std::vector<std::string> names)
      : names_(std::move(names)) {
    for (size_t t = 0; t < targets.size(); ++t) {
      threads_.emplace_back([this, target = targets[t], t] { Write(target, t); });
    }
  }
  ~Writers() { Stop(); }

  void Stop() {
    stop_.store(true);
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }
  size_t acknowledged() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_.size();
  }
  std::vector<std::pair<std::string, std::string>> Acknowledged() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_;
  }
  std::vector<std::string> Failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

 private:
  void Write(const std::string& target, size_t writer) {
    bloomclient::ClientOptions options;
    options.timeout = absl::Seconds(3);
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(target, options);
    for (size_t n = 0; !stop_.load(); ++n) {
      absl::SleepFor(absl::Milliseconds(2));  // a steady stream, not a flood to check after
      const std::string& name = names_[(n + writer) % names_.size()];
      const std::string item = absl::StrCat("w", writer, "-", n);
      // Each item is sent once: an add that failed may still have been made (one running when
      // its slot's writes paused is answered "it may or may not have been made"), and sent
      // again a CUCKOO filter would count it twice.
      const absl::Status added = client->Add(name, {item}).status();
      if (added.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        acked_.emplace_back(name, item);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        failed_.push_back(absl::StrCat(name, " ", item, ": ", added.ToString()));
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  const std::vector<std::string> names_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> acked_;
  std::vector<std::string> failed_;  // the adds that failed, with their statuses
  std::vector<std::thread> threads_;
};

TEST_F(ShardingTest, MovingSlotsUnderWritesLosesNoAcknowledgedAdd) {
  // Slots 0-7 of group a's 0-31 move to group b; the filters of slots 8-31 stay.
  std::vector<std::string> moving = NamesInSlots(0, 7, "moving:", 8);
  const std::vector<std::string> staying = NamesInSlots(8, 31, "staying:", 2);
  const std::string cuckoo = NamesInSlots(0, 7, "cuckoo:", 1).front();
  const std::string windowed = NamesInSlots(0, 7, "windowed:", 1).front();
  // A copy at the target of a filter its owner does not hold, as one deleted after it was
  // copied leaves: the move deletes it.
  const std::string stray = NamesInSlots(0, 7, "stray:", 1).front();
  std::unique_ptr<bloomclient::BloomClient> admin = bloomclient::BloomClient::Connect(Target(2));
  for (const std::string& name : moving) ASSERT_TRUE(admin->Reserve(name, Spec()).ok());
  for (const std::string& name : staying) ASSERT_TRUE(admin->Reserve(name, Spec()).ok());
  ASSERT_TRUE(admin->Reserve(cuckoo, Spec(bloom::v1::FILTER_KIND_CUCKOO)).ok());
  bloom::v1::FilterSpec window = Spec();
  window.mutable_window()->set_seconds(3600);
  ASSERT_TRUE(admin->Reserve(windowed, window).ok());
  std::vector<std::string> written = moving;
  written.insert(written.end(), staying.begin(), staying.end());
  written.push_back(cuckoo);
  written.push_back(windowed);

  Writers writers({Target(0), Target(1), Target(2)}, written);
  ASSERT_TRUE(WaitFor([&] { return writers.acknowledged() >= 100; }));
  const std::string move =
      absl::StrCat("--server=", Target(2), " cluster move --slots=0-7 --to=", kGroupB);
  // Killed after its first round of copies, then run again: it resumes.
  ASSERT_TRUE(RunAndKillAt(move, "round 1:"));
  absl::StatusOr<bloom::v1::ShardMap> midway = MapAt(2);
  ASSERT_TRUE(midway.ok());
  EXPECT_TRUE(midway->has_move());
  {
    bloomclient::ClientOptions as_mover;
    as_mover.metadata.emplace_back("bloom-shard-move", "1");
    const absl::Status made =
        bloomclient::BloomClient::Connect(Target(2), as_mover)->Reserve(stray, Spec()).status();
    ASSERT_TRUE(made.ok()) << made;
  }
  const size_t before = writers.acknowledged();
  CommandResult moved = RunCommand(absl::StrCat(BLOOM_CLI_PATH, " ", move));
  ASSERT_EQ(moved.exit_code, 0) << moved.out;
  EXPECT_TRUE(absl::StrContains(moved.out, "moved slots 0-7")) << moved.out;
  std::smatch paused;
  ASSERT_TRUE(std::regex_search(moved.out, paused, std::regex("writes paused ([0-9]+) ms")))
      << moved.out;
  EXPECT_LT(std::stoi(paused[1]), 5000) << moved.out;
  EXPECT_TRUE(std::regex_search(
      moved.out, std::regex("the pause: [0-9]+ ms waiting for the owner's pods, [0-9]+ ms listing "
                            "filters, [0-9]+ ms catching [0-9]+ copies up")))
      << moved.out;
  // While writes paused, the copies were caught up from the owner's journal: at most one filter
  // was copied whole (the windowed one if its owner opened a slice since its copy, the cuckoo
  // one if its chain grew a table). (Unless the first run was killed after it paused
  // writes: the second then copies everything whole, knowing nothing of the copies' journal
  // positions.)
  std::smatch last;
  ASSERT_TRUE(std::regex_search(moved.out, last, std::regex("([0-9]+) filters copied whole and")))
      << moved.out;
  if (absl::StrContains(moved.out, "round 1:")) {
    EXPECT_LE(std::stoi(last[1]), 1) << moved.out;
    // The cuckoo and windowed filters, written throughout, were caught up by their records.
    std::smatch records;
    ASSERT_TRUE(std::regex_search(moved.out, records,
                                  std::regex("items and ([0-9]+) journal records caught up\\)")))
        << moved.out;
    EXPECT_GT(std::stoi(records[1]), 0) << moved.out;
  }
  // Writes go on at the new owner.
  ASSERT_TRUE(WaitFor([&] { return writers.acknowledged() >= before + 100; }));
  writers.Stop();

  WaitForMapEverywhere(1);
  absl::StatusOr<bloom::v1::ShardMap> map = MapAt(0);
  ASSERT_TRUE(map.ok());
  EXPECT_FALSE(map->has_move());
  // The move's metrics: every pod saw the write pause end; the target's primary (pod 2) took
  // the copies and the catch-up.
  for (int pod = 0; pod < 3; ++pod) {
    const std::string metrics = HttpGet(pods_[pod]->metrics_port(), "/metrics");
    EXPECT_EQ(PrometheusSample(metrics, "bloom_shard_move_in_progress"), 0) << pod;
    EXPECT_EQ(PrometheusSample(metrics, "bloom_shard_move_writes_paused"), 0) << pod;
    EXPECT_GE(PrometheusSample(metrics, "bloom_shard_move_pauses_total"), 1) << pod;
    EXPECT_GT(PrometheusSample(metrics, "bloom_shard_move_paused_seconds_total"), 0) << pod;
  }
  const std::string target = HttpGet(pods_[2]->metrics_port(), "/metrics");
  EXPECT_GT(PrometheusSample(target, "bloom_shard_move_copied_bytes_total"), 0);
  if (absl::StrContains(moved.out, "round 1:")) {
    EXPECT_GT(PrometheusSample(target, "bloom_shard_move_caught_up_items_total"), 0);
  }
  ASSERT_GE(map->ranges_size(), 3);
  EXPECT_EQ(map->ranges(0).group(), kGroupB);
  EXPECT_EQ(map->ranges(0).last(), 7U);

  // Every acknowledged add, through every pod, and in the owner's own store.
  std::map<std::string, std::vector<std::string>> by_filter;
  for (const auto& [name, item] : writers.Acknowledged()) by_filter[name].push_back(item);
  for (int pod = 0; pod < 3; ++pod) {
    std::unique_ptr<bloomclient::BloomClient> reader =
        bloomclient::BloomClient::Connect(Target(pod));
    for (const auto& [name, items] : by_filter) {
      absl::StatusOr<std::vector<bool>> present = reader->MightContain(name, items);
      ASSERT_TRUE(present.ok()) << name << ": " << present.status();
      for (size_t i = 0; i < items.size(); ++i) {
        EXPECT_TRUE((*present)[i]) << name << " lost " << items[i] << " (pod " << pod << ")";
      }
    }
  }
  for (const std::string& name : moving) {
    EXPECT_EQ(MissingAt(2, name, by_filter[name]), std::vector<std::string>{}) << name;
  }
  // The cuckoo filter counts every add exactly once: its copy wrote the owner's table values,
  // which replaying the same record twice does not change.
  absl::StatusOr<std::vector<uint32_t>> counts = admin->Count(cuckoo, by_filter[cuckoo]);
  ASSERT_TRUE(counts.ok()) << counts.status();
  const std::string failed = absl::StrJoin(writers.Failed(), "; ");
  for (const uint32_t count : *counts) EXPECT_EQ(count, 1U) << "adds that failed: " << failed;
  // Group a holds no copy of the moved filters any more; it keeps its own.
  bloomclient::ClientOptions mover;
  mover.metadata.emplace_back("bloom-shard-move", "1");
  absl::StatusOr<bloom::v1::ListResponse> left =
      bloomclient::BloomClient::Connect(Target(PrimaryOfA()), mover)->List("", 1000);
  ASSERT_TRUE(left.ok()) << left.status();
  std::vector<std::string> held;
  for (const bloom::v1::FilterStats& stats : left->filters()) held.push_back(stats.name());
  for (const std::string& name : moving) {
    EXPECT_EQ(std::count(held.begin(), held.end(), name), 0) << name;
  }
  for (const std::string& name : staying) EXPECT_EQ(std::count(held.begin(), held.end(), name), 1);
  for (int pod = 0; pod < 3; ++pod) {
    EXPECT_TRUE(
        absl::IsNotFound(bloomclient::BloomClient::Connect(Target(pod))->Stats(stray).status()))
        << "pod " << pod;
  }
}

// A filter made while its slot moves is at the new owner afterwards, and one deleted is gone:
// the first round lists the owner's filters, the later ones ask it which it made since
// (ListMade), and a deleted filter's copy is deleted once its journal read or its copy finds
// it gone.
TEST_F(ShardingTest, FiltersMadeOrDeletedWhileTheirSlotsMoveEndAsTheOwnerLeftThem) {
  std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(Target(0));
  // Enough filters that the first round takes a while.
  const std::vector<std::string> many = NamesInSlots(0, 7, "many:", 600);
  for (const std::string& name : many) ASSERT_TRUE(client->Reserve(name, Spec()).ok());
  const std::string& doomed = many.back();
  const std::string newcomer = NamesInSlots(0, 7, "newcomer:", 1).front();
  // A write the pause refuses is made again, as a client would.
  auto until_served = [](const std::function<absl::Status()>& write) {
    absl::Status status;
    for (int attempt = 0; attempt < 100; ++attempt) {
      status = write();
      if (!absl::IsUnavailable(status)) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return status;
  };
  // One copy at a time (--copies=1): the first round lasts longer still.
  const CliRun run = RunAndActAt(
      absl::StrCat("--server=", Target(2), " cluster move --slots=0-7 --copies=1 --to=", kGroupB),
      "moving slots", [&](pid_t) {
        absl::SleepFor(absl::Milliseconds(50));  // the first round's listing is done by now
        EXPECT_OK(until_served([&] { return client->Reserve(newcomer, Spec()).status(); }));
        EXPECT_OK(until_served([&] { return client->Add(newcomer, {"new"}).status(); }));
        EXPECT_OK(until_served([&] { return client->Delete(doomed); }));
      });
  ASSERT_TRUE(run.saw) << run.out;
  ASSERT_EQ(run.exit_code, 0) << run.out;
  for (int pod = 0; pod < 3; ++pod) {
    std::unique_ptr<bloomclient::BloomClient> reader =
        bloomclient::BloomClient::Connect(Target(pod));
    EXPECT_TRUE(absl::IsNotFound(reader->Stats(doomed).status())) << "pod " << pod;
    absl::StatusOr<std::vector<bool>> present = reader->MightContain(newcomer, {"new"});
    ASSERT_TRUE(present.ok()) << present.status() << " (pod " << pod << ")";
    EXPECT_TRUE((*present)[0]) << "pod " << pod;
    EXPECT_TRUE(reader->Stats(many.front()).ok()) << "pod " << pod;
  }
  // The new owner's primary holds them itself.
  bloomclient::ClientOptions as_mover;
  as_mover.metadata.emplace_back("bloom-shard-move", "1");
  std::unique_ptr<bloomclient::BloomClient> target =
      bloomclient::BloomClient::Connect(Target(2), as_mover);
  EXPECT_TRUE(target->Stats(newcomer).ok());
  EXPECT_TRUE(absl::IsNotFound(target->Stats(doomed).status()));
}

// ListMade (bloom.replication.v1): the owner's primary names the filters of some slots it
// made since a position, so that a mover's rounds need not list every filter it holds.
TEST_F(ShardingTest, TheOwnersPrimaryNamesTheFiltersOfTheMovingSlotsMadeSinceAPosition) {
  namespace rv1 = bloom::replication::v1;
  const int primary = PrimaryOfA();
  auto call = [&](int pod, const rv1::ListMadeRequest& request, rv1::ListMadeResponse* response) {
    grpc::ClientContext context;
    return rv1::ReplicationService::NewStub(
               bloomclient::BloomClient::Connect(Target(pod))->channel())
        ->ListMade(&context, request, response);
  };
  rv1::ListMadeRequest request;
  request.set_first(0);
  request.set_last(7);
  request.set_slot_count(kSlots);
  request.set_start(true);
  rv1::ListMadeResponse started;
  ASSERT_TRUE(call(primary, request, &started).ok());
  ASSERT_TRUE(started.complete());
  std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(Target(2));
  const std::vector<std::string> moving = NamesInSlots(0, 7, "made:", 3);
  for (const std::string& name : moving) ASSERT_TRUE(client->Reserve(name, Spec()).ok());
  for (const std::string& name : NamesInSlots(8, 31, "other:", 2)) {
    ASSERT_TRUE(client->Reserve(name, Spec()).ok());
  }
  request.set_start(false);
  *request.mutable_since() = started.next();
  rv1::ListMadeResponse made;
  ASSERT_TRUE(call(primary, request, &made).ok());
  ASSERT_TRUE(made.complete());
  EXPECT_EQ(std::vector<std::string>(made.names().begin(), made.names().end()), moving);
  // From the next position, nothing yet.
  *request.mutable_since() = made.next();
  ASSERT_TRUE(call(primary, request, &made).ok());
  EXPECT_TRUE(made.complete());
  EXPECT_EQ(made.names_size(), 0);
  // Another pod's position means nothing here: list every filter.
  rv1::ListMadeRequest foreign = request;
  foreign.mutable_since()->set_epoch(request.since().epoch() + 1);
  ASSERT_TRUE(call(primary, foreign, &made).ok());
  EXPECT_FALSE(made.complete());
  // Slots that are not a span, and a follower, are refused.
  rv1::ListMadeRequest past = request;
  past.set_last(kSlots);
  EXPECT_EQ(call(primary, past, &made).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call(1 - primary, request, &made).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ShardingTest, AnAbortedMoveLeavesTheSlotsWithTheirOwner) {
  const std::vector<std::string> names = NamesInSlots(0, 7, "aborted:", 4);
  std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(Target(0));
  for (const std::string& name : names) {
    ASSERT_TRUE(client->Reserve(name, Spec()).ok());
    ASSERT_TRUE(client->Add(name, {"kept"}).ok());
  }
  const std::string move =
      absl::StrCat("--server=", Target(1), " cluster move --slots=0-7 --to=", kGroupB);
  // Slots holding more filters than --max-filters are refused before the move begins.
  CommandResult too_many = RunCommand(absl::StrCat(BLOOM_CLI_PATH, " ", move, " --max-filters=3"));
  EXPECT_EQ(too_many.exit_code, 1) << too_many.out;
  EXPECT_TRUE(absl::StrContains(too_many.out, "hold 4 filters, more than --max-filters=3"))
      << too_many.out;
  absl::StatusOr<bloom::v1::ShardMap> untouched = MapAt(1);
  ASSERT_TRUE(untouched.ok()) << untouched.status();
  EXPECT_FALSE(untouched->has_move()) << "a refused move does not begin";
  EXPECT_EQ(RunCommand(absl::StrCat(BLOOM_CLI_PATH, " ", move, " --max-filters=none")).exit_code,
            2);
  EXPECT_EQ(RunCommand(absl::StrCat(BLOOM_CLI_PATH, " ", move, " --copies=0")).exit_code, 2);
  ASSERT_TRUE(RunAndKillAt(move + " --max-filters=4", "round 1:"));
  // Group b holds copies now; a List through any pod still shows each filter once, from its
  // owner, and can ask for the slots alone, names alone.
  std::vector<std::string> in_order = names;
  std::sort(in_order.begin(), in_order.end());
  for (int pod = 0; pod < 3; ++pod) {
    std::unique_ptr<bloomclient::BloomClient> via = bloomclient::BloomClient::Connect(Target(pod));
    absl::StatusOr<bloom::v1::ListResponse> listed = via->List("aborted:", 100, "");
    ASSERT_TRUE(listed.ok()) << listed.status();
    std::vector<std::string> seen;
    for (const bloom::v1::FilterStats& stats : listed->filters()) {
      seen.push_back(stats.name());
      EXPECT_GT(stats.capacity(), 0U) << stats.name();
    }
    EXPECT_EQ(seen, in_order) << "pod " << pod;
    bloom::v1::ListRequest request;
    request.mutable_slots()->set_first(0);
    request.mutable_slots()->set_last(7);
    request.set_names_only(true);
    grpc::ClientContext context;
    bloom::v1::ListResponse by_slot;
    ASSERT_TRUE(bloom::v1::BloomFilterService::NewStub(via->channel())
                    ->List(&context, request, &by_slot)
                    .ok());
    seen.clear();
    for (const bloom::v1::FilterStats& stats : by_slot.filters()) {
      seen.push_back(stats.name());
      EXPECT_EQ(stats.capacity(), 0U) << stats.name();
    }
    EXPECT_EQ(seen, in_order) << "pod " << pod;
    request.mutable_slots()->set_last(kSlots);  // one past the last
    grpc::ClientContext past_context;
    EXPECT_EQ(bloom::v1::BloomFilterService::NewStub(via->channel())
                  ->List(&past_context, request, &by_slot)
                  .error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  // Another move waits for this one.
  CommandResult other = RunCommand(absl::StrCat(BLOOM_CLI_PATH, " --server=", Target(1),
                                                " cluster move --slots=8-9 --to=", kGroupB));
  EXPECT_EQ(other.exit_code, 1) << other.out;
  EXPECT_TRUE(absl::StrContains(other.out, "are moving")) << other.out;
  CommandResult aborted = RunCommand(absl::StrCat(BLOOM_CLI_PATH, " ", move, " --abort"));
  ASSERT_EQ(aborted.exit_code, 0) << aborted.out;
  EXPECT_TRUE(absl::StrContains(aborted.out, "deleted 4 copies")) << aborted.out;
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<bloom::v1::ShardMap> map = MapAt(2);
    return map.ok() && !map->has_move();
  }));
  for (const std::string& name : names) {
    absl::StatusOr<std::vector<bool>> present = client->MightContain(name, {"kept"});
    ASSERT_TRUE(present.ok()) << present.status();
    EXPECT_TRUE((*present)[0]);
    ASSERT_TRUE(client->Add(name, {"after"}).ok());
    EXPECT_TRUE(HeldBy(PrimaryOfA(), name, "after"));
  }
}

TEST_F(ShardingTest, RebalanceEvensTheGroupsByBytesInMovesOfBoundedFilters) {
  // Every byte in group a: filters of many sizes in its slots (0-31), none in b's.
  std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(Target(0));
  const std::vector<std::string> names = NamesInSlots(0, 31, "heavy:", 16);
  for (size_t i = 0; i < names.size(); ++i) {
    bloom::v1::FilterSpec spec = Spec();
    spec.set_capacity(20'000 * (1 + i % 4));
    ASSERT_TRUE(client->Reserve(names[i], spec).ok());
    ASSERT_TRUE(client->Add(names[i], {"kept"}).ok());
  }
  // At most 4 filters a move: the 16 filters take at least two moves to even.
  const std::string rebalance_command =
      absl::StrCat(BLOOM_CLI_PATH, " --server=", Target(2), " cluster rebalance --tolerance=0.2");
  const std::string rebalance = rebalance_command + " --max-filters=4";
  CommandResult planned = RunCommand(rebalance + " --dry-run");
  ASSERT_EQ(planned.exit_code, 0) << planned.out;
  EXPECT_TRUE(absl::StrContains(planned.out, "from " + std::string(kGroupA) + " to " + kGroupB))
      << planned.out;
  absl::StatusOr<bloom::v1::ShardMap> unchanged = MapAt(2);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(unchanged->version(), 1U) << "a dry run changes nothing";

  CommandResult done = RunCommand(rebalance);
  ASSERT_EQ(done.exit_code, 0) << done.out;
  EXPECT_TRUE(absl::StrContains(done.out, "moved slots")) << done.out;
  EXPECT_TRUE(absl::StrContains(done.out, "balanced")) << done.out;
  const std::regex planned_move(R"(move \d+: slots (\d+)-(\d+) \(\d+ bytes, (\d+) filters\))");
  int moves = 0;
  for (std::sregex_iterator line(done.out.begin(), done.out.end(), planned_move), end; line != end;
       ++line, ++moves) {
    const bool one_slot = (*line)[1] == (*line)[2];
    EXPECT_TRUE(one_slot || std::stoi((*line)[3]) <= 4) << line->str();
  }
  EXPECT_GE(moves, 2) << done.out;
  // Group b owns some of a's former slots now, and every filter still answers, wherever it is.
  WaitForMapEverywhere(1);
  absl::StatusOr<bloom::v1::ShardMap> map = MapAt(0);
  ASSERT_TRUE(map.ok());
  uint32_t b_below_32 = 0;
  for (const bloom::v1::SlotRange& range : map->ranges()) {
    if (range.group() == kGroupB && range.first() < 32) {
      b_below_32 += range.last() - range.first() + 1;
    }
  }
  EXPECT_GT(b_below_32, 0U) << done.out;
  for (const std::string& name : names) {
    absl::StatusOr<std::vector<bool>> present = client->MightContain(name, {"kept"});
    ASSERT_TRUE(present.ok()) << name << ": " << present.status();
    EXPECT_TRUE((*present)[0]) << name;
  }
  // Run again, it finds nothing to do.
  CommandResult again = RunCommand(rebalance);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_TRUE(absl::StrContains(again.out, "balanced")) << again.out;
  EXPECT_FALSE(absl::StrContains(again.out, "moved slots")) << again.out;
  // Bad flags are refused before anything changes.
  CommandResult bad = RunCommand(rebalance + " --tolerance=lots");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  CommandResult no_filters = RunCommand(rebalance_command + " --max-filters=0");
  EXPECT_EQ(no_filters.exit_code, 2) << no_filters.out;
}

// Group a acknowledges a write only once its follower holds it, so that its primary can fail.
class ShardingFailoverTest : public ShardingTest {
 protected:
  void SetUp() override {
    group_a_args_ = {"--min_replica_acks=1", "--replica_ack_timeout=3s"};
    ShardingTest::SetUp();
  }
};

TEST_F(ShardingFailoverTest, AMoveSurvivesTheKillOfTheMoverAndOfTheSourcesPrimary) {
  const std::vector<std::string> moving = NamesInSlots(0, 7, "failover:", 6);
  std::unique_ptr<bloomclient::BloomClient> admin = bloomclient::BloomClient::Connect(Target(2));
  for (const std::string& name : moving) ASSERT_TRUE(admin->Reserve(name, Spec()).ok());
  Writers writers({Target(0), Target(1), Target(2)}, moving);
  ASSERT_TRUE(WaitFor([&] { return writers.acknowledged() >= 100; }));
  const std::string move =
      absl::StrCat("--server=", Target(2), " cluster move --slots=0-7 --to=", kGroupB);
  ASSERT_TRUE(RunAndKillAt(move, "round 1:"));
  // The source's primary dies with the mover: its follower takes over (it holds every
  // acknowledged write), and the move, run again, copies from it.
  const int killed = PrimaryOfA();
  pods_[killed]->Kill();
  // Restarted as Kubernetes would, while the move goes on.
  std::thread restart([&] { StartPod(killed); });
  CommandResult moved = RunCommand(absl::StrCat(BLOOM_CLI_PATH, " ", move));
  restart.join();
  ASSERT_EQ(moved.exit_code, 0) << moved.out;
  EXPECT_TRUE(absl::StrContains(moved.out, "moved slots 0-7")) << moved.out;
  ASSERT_NE(pods_[killed], nullptr);
  const size_t before = writers.acknowledged();
  ASSERT_TRUE(WaitFor([&] { return writers.acknowledged() >= before + 50; }));
  writers.Stop();
  std::map<std::string, std::vector<std::string>> by_filter;
  for (const auto& [name, item] : writers.Acknowledged()) by_filter[name].push_back(item);
  for (const auto& [name, items] : by_filter) {
    EXPECT_EQ(MissingAt(2, name, items), std::vector<std::string>{}) << name;
  }
  // Run again, it finds the slots moved and nothing left to delete.
  CommandResult again = RunCommand(absl::StrCat(BLOOM_CLI_PATH, " ", move));
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_TRUE(absl::StrContains(again.out, "deleted 0 copies")) << again.out;
}

}  // namespace
}  // namespace bloomtest

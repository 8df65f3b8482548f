// Hostile clients, round three: clients posing as followers. A follower's acknowledgements
// decide when a primary with --min_replica_acks acknowledges a write, so a client that could
// tail the log and acknowledge without storing would make the primary acknowledge writes that a
// failover then loses. Each test here is such an attack against real bloom-server processes
// (and a real etcd where the pods elect their primary), and checks that nothing acknowledged is
// lost and no failover is blocked:
// - a client's write token may neither Tail nor Snapshot; without token auth nobody may unless
//   the operator allows it (--allow_unauthenticated_replication);
// - a stream's acknowledgement counts only for what the primary sent on it, whatever start it
//   claimed;
// - with etcd, a stream counts as a member only with that member's secret: posing as a member,
//   or naming none, earns nothing, joins no sync set, and takes no switchover;
// - client strings (an 8 MiB follower_id) are refused before they are logged;
// - Switchover calls cannot come back to back (--switchover_cooldown).
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/bloom_client.h"
#include "coordination/cluster_state.h"
#include "coordination/etcd_client.h"
#include "gtest/gtest.h"
#include "tests/elected_cluster.h"
#include "tests/replication_cluster.h"
#include "tests/support/etcd_process.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace bloomtest {
namespace {

namespace v1 = bloom::replication::v1;

bloom::v1::FilterSpec ImpostorSpec() {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(100'000);
  spec.set_error_rate(0.001);
  return spec;
}

std::unique_ptr<v1::ReplicationService::Stub> ReplicationStub(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return v1::ReplicationService::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
}

// The pod's latest sequence, through its replication Status (0 if it does not answer).
uint64_t LatestSequence(const std::string& target) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::StatusResponse status;
  if (!ReplicationStub(target)->Status(&context, {}, &status).ok()) return 0;
  return status.sequence();
}

// A client posing as a follower: it tails the primary from `start` (0: the primary's latest + 1)
// and acknowledges, at once and without storing anything, the primary's latest sequence as
// each response names it, and `claim` first if set.
class FakeFollower {
 public:
  FakeFollower(const std::string& target, const std::string& name, const std::string& token = "",
               uint64_t start = 0, uint64_t claim = 0)
      : stub_(ReplicationStub(target)) {
    if (!token.empty()) context_.AddMetadata("authorization", "Bearer " + token);
    stream_ = stub_->Tail(&context_);
    v1::TailRequest first;
    first.set_follower_id(name);
    first.set_start_sequence(start != 0 ? start : LatestSequence(target) + 1);
    stream_->Write(first);
    if (claim != 0) {
      v1::TailRequest ack;
      ack.set_durable_sequence(claim);
      stream_->Write(ack);
    }
    reader_ = std::thread([this] {
      v1::TailResponse response;
      while (stream_->Read(&response)) {
        responses_.fetch_add(1);
        v1::TailRequest ack;
        ack.set_durable_sequence(std::max<uint64_t>(response.primary_sequence(), 1));
        if (!stream_->Write(ack)) break;
      }
      status_ = stream_->Finish();
      done_.store(true);
    });
  }
  ~FakeFollower() {
    context_.TryCancel();
    reader_.join();
  }
  FakeFollower(const FakeFollower&) = delete;
  FakeFollower& operator=(const FakeFollower&) = delete;

  int responses() const { return responses_.load(); }
  bool done() const { return done_.load(); }
  // Once done().
  const grpc::Status& status() const { return status_; }

 private:
  std::unique_ptr<v1::ReplicationService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::TailRequest, v1::TailResponse>> stream_;
  std::atomic<int> responses_{0};
  std::atomic<bool> done_{false};
  grpc::Status status_;
  std::thread reader_;
};

// A Snapshot call's status (its chunks read and dropped).
grpc::Status CallSnapshot(const std::string& target, const std::string& token,
                          const std::string& name = "copier") {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  v1::SnapshotRequest request;
  request.set_follower_id(name);
  std::unique_ptr<grpc::ClientReader<v1::SnapshotResponse>> reader =
      ReplicationStub(target)->Snapshot(&context, request);
  v1::SnapshotResponse chunk;
  while (reader->Read(&chunk)) {
  }
  return reader->Finish();
}

// Waits until the fake's stream has ended, and returns how.
grpc::Status Ended(const FakeFollower& fake) {
  EXPECT_TRUE(WaitFor([&] { return fake.done(); }, absl::Seconds(10)));
  return fake.status();
}

// Tokens: a client that writes, one that reads, and the followers'.
class Tokens {
 public:
  Tokens() {
    std::ofstream(path()) << TokenDigest("writer-token") << " write ingest\n"
                          << TokenDigest("reader-token") << " read web\n"
                          << TokenDigest("replica-token") << " replication pods\n";
    std::ofstream(replica_path()) << "replica-token\n";
  }
  std::string path() const { return dir_.path() + "/tokens"; }
  std::string replica_path() const { return dir_.path() + "/replica-token"; }

 private:
  TempDir dir_;
};

// Only the replication token may Tail or Snapshot: a client's write or read token cannot tail
// the log and acknowledge without storing (which would make the primary acknowledge writes no
// follower holds); the real follower, with its token, replicates.
TEST(ImpostorTest, OnlyAReplicationTokenMayTailOrSnapshot) {
  const Tokens tokens;
  ReplicationCluster cluster(
      1, {"--auth_token_file=" + tokens.path(), "--min_replica_acks=1", "--replica_ack_timeout=2s"},
      {"--auth_token_file=" + tokens.path(), "--replication_token_file=" + tokens.replica_path()});
  ASSERT_TRUE(cluster.Start());
  bloomclient::ClientOptions options;
  options.token = "writer-token";
  options.timeout = absl::Seconds(10);
  std::unique_ptr<bloomclient::BloomClient> writer =
      bloomclient::BloomClient::Connect(cluster.primary().target(), options);
  const bloom::v1::FilterSpec spec = ImpostorSpec();
  ASSERT_OK(writer->Add("guarded", {"before"}, &spec).status());  // the follower acknowledged

  for (const char* token : {"writer-token", "reader-token"}) {
    FakeFollower fake(cluster.primary().target(), "pod-2", token);
    const grpc::Status tail = Ended(fake);
    EXPECT_EQ(tail.error_code(), grpc::StatusCode::PERMISSION_DENIED) << token;
    EXPECT_TRUE(absl::StrContains(tail.error_message(), "needs a token with role replication"))
        << tail.error_message();
    EXPECT_EQ(fake.responses(), 0) << token;
    const grpc::Status snapshot = CallSnapshot(cluster.primary().target(), token);
    EXPECT_EQ(snapshot.error_code(), grpc::StatusCode::PERMISSION_DENIED) << token;
  }
  // The replication token may copy, and may do nothing else.
  EXPECT_TRUE(CallSnapshot(cluster.primary().target(), "replica-token").ok());
  options.token = "replica-token";
  std::unique_ptr<bloomclient::BloomClient> replica =
      bloomclient::BloomClient::Connect(cluster.primary().target(), options);
  EXPECT_EQ(replica->Add("guarded", {"x"}).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(replica->MightContain("guarded", {"x"}).status().code(),
            absl::StatusCode::kPermissionDenied);

  // The real follower stopped, a write-token fake in its place: nothing is acknowledged.
  cluster.follower(0).Signal(SIGSTOP);
  FakeFollower fake(cluster.primary().target(), "pod-2", "writer-token");
  for (int i = 0; i < 3; ++i) {
    const absl::Status added = writer->Add("guarded", {absl::StrCat("during-", i)}).status();
    EXPECT_TRUE(absl::IsUnavailable(added)) << added;
  }
  cluster.follower(0).Signal(SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return writer->Add("guarded", {"after"}).ok(); }));
}

// Without token auth (the default on loopback) replication is refused, saying how to allow it:
// otherwise anyone who reaches the port could copy the database or pose as a follower.
TEST(ImpostorTest, WithoutTokenAuthReplicationIsRefusedUnlessAllowed) {
  TempDir data;
  std::unique_ptr<ServerProcess> server = ServerProcess::Start(data.path(), {});
  ASSERT_NE(server, nullptr);
  FakeFollower fake(server->target(), "anyone");
  const grpc::Status tail = Ended(fake);
  EXPECT_EQ(tail.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(tail.error_message(), "--allow_unauthenticated_replication"))
      << tail.error_message();
  const grpc::Status snapshot = CallSnapshot(server->target(), "");
  EXPECT_EQ(snapshot.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // A follower of it waits, NOT_SERVING, and says why in its log.
  TempDir follower_data;
  std::unique_ptr<ServerProcess> follower =
      ServerProcess::Spawn(follower_data.path(), {"--replicate_from=" + server->target()});
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(follower->ReadLog(), "--allow_unauthenticated_replication");
  }));
}

// A stream that claims to start after the primary's latest sequence, and then acknowledges it,
// reading nothing, releases no write: its acknowledgement counts only up to what was sent on it,
// so a write waiting on a stopped follower fails at its timeout.
TEST(ImpostorTest, AClaimedStartCreditsNothing) {
  ReplicationCluster cluster(1, {"--min_replica_acks=1", "--replica_ack_timeout=2s"});
  ASSERT_TRUE(cluster.Start());
  bloomclient::ClientOptions options;
  options.timeout = absl::Seconds(10);
  std::unique_ptr<bloomclient::BloomClient> writer =
      bloomclient::BloomClient::Connect(cluster.primary().target(), options);
  const bloom::v1::FilterSpec spec = ImpostorSpec();
  ASSERT_OK(writer->Add("claimed", {"before"}, &spec).status());

  cluster.follower(0).Signal(SIGSTOP);
  const uint64_t before = LatestSequence(cluster.primary().target());
  absl::Status waited;
  std::thread write([&] { waited = writer->Add("claimed", {"waiting"}).status(); });
  ASSERT_TRUE(WaitFor([&] { return LatestSequence(cluster.primary().target()) > before; }));
  const uint64_t latest = LatestSequence(cluster.primary().target());
  // It claims to hold everything up to the waiting write, and acknowledges it; then a later
  // write is sent to it, which it acknowledges too (it may: it was sent that one).
  FakeFollower fake(cluster.primary().target(), "liar", "", latest + 1, latest);
  std::unique_ptr<bloomclient::BloomClient> other =
      bloomclient::BloomClient::Connect(cluster.primary().target(), options);
  std::thread later([&] { other->Add("claimed", {"later"}).status().IgnoreError(); });
  write.join();
  later.join();
  EXPECT_TRUE(absl::IsUnavailable(waited)) << "acknowledged on a claim: " << waited;
  cluster.follower(0).Signal(SIGCONT);
}

// A follower_id over 253 bytes is refused before anything logs it (an 8 MiB one here).
TEST(ImpostorTest, AHugeFollowerIdIsRefusedBeforeItIsLogged) {
  ReplicationCluster cluster(0, {});
  ASSERT_TRUE(cluster.Start());
  const std::string huge(8 << 20, 'n');
  FakeFollower fake(cluster.primary().target(), huge, "", 1);
  const grpc::Status tail = Ended(fake);
  EXPECT_EQ(tail.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << tail.error_message();
  const grpc::Status snapshot = CallSnapshot(cluster.primary().target(), "", huge);
  EXPECT_EQ(snapshot.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << snapshot.error_message();
  EXPECT_LT(cluster.primary().ReadLog().size(), 1u << 20);
}

// Replication slots are shared: each caller (a token's label) holds at most half of the Tail
// slots, and a stream or snapshot that stops moving (acknowledging, or reading) for
// --transfer_idle_timeout is ended and frees its slot.
TEST(ImpostorTest, ReplicationSlotsAreSharedAndStreamsThatStopMovingEnd) {
  TempDir secrets;
  const std::string tokens = secrets.path() + "/tokens";
  std::ofstream(tokens) << TokenDigest("a") << " replication a\n"
                        << TokenDigest("b") << " replication b\n"
                        << TokenDigest("c") << " replication c\n"
                        << TokenDigest("writer") << " write writer\n";
  ReplicationCluster cluster(0, {"--auth_token_file=" + tokens, "--transfer_idle_timeout=2s"});
  ASSERT_TRUE(cluster.Start());
  const std::string primary = cluster.primary().target();
  bloomclient::ClientOptions options;
  options.token = "writer";
  std::unique_ptr<bloomclient::BloomClient> writer =
      bloomclient::BloomClient::Connect(primary, options);
  const bloom::v1::FilterSpec spec = ImpostorSpec();
  ASSERT_OK(writer->Add("slots", {"x"}, &spec).status());

  {
    std::vector<std::unique_ptr<FakeFollower>> held;
    for (const char* token : {"a", "b"}) {
      for (int i = 0; i < 8; ++i) {
        held.push_back(std::make_unique<FakeFollower>(primary, "pod", token, 1));
      }
    }
    ASSERT_TRUE(WaitFor([&] {
      return std::all_of(held.begin(), held.end(),
                         [](const auto& fake) { return fake->responses() > 0; });
    }));
    FakeFollower ninth(primary, "pod", "a", 1);
    const grpc::Status share = Ended(ninth);
    EXPECT_EQ(share.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_TRUE(absl::StrContains(share.error_message(), "the token 'a' holds 8 Tail streams"))
        << share.error_message();
    FakeFollower third_caller(primary, "pod", "c", 1);
    const grpc::Status all = Ended(third_caller);
    EXPECT_EQ(all.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_TRUE(absl::StrContains(all.error_message(), "serves 16 followers"))
        << all.error_message();
  }

  // A stream that reads what it is sent but never acknowledges it is ended.
  {
    auto stub = ReplicationStub(primary);
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer c");
    auto silent = stub->Tail(&context);
    v1::TailRequest first;
    first.set_follower_id("silent");
    first.set_start_sequence(1);
    ASSERT_TRUE(silent->Write(first));
    std::atomic<bool> reading{true};
    std::thread reader([&] {
      v1::TailResponse response;
      while (silent->Read(&response)) {
      }
      reading.store(false);
    });
    const absl::Time start = absl::Now();
    ASSERT_TRUE(WaitFor([&] { return !reading.load(); }, absl::Seconds(10)));
    reader.join();
    const grpc::Status ended = silent->Finish();
    EXPECT_LT(absl::Now() - start, absl::Seconds(6));
    EXPECT_TRUE(absl::StrContains(cluster.primary().ReadLog(), "acknowledged nothing"))
        << ended.error_message();
  }

  // A Snapshot whose copier stops reading is abandoned, and its caller's slot freed. (Its log
  // of 4 million adds, about 32 MB, is more than the transport buffers.)
  bloom::v1::FilterSpec big;
  big.set_capacity(30'000'000);
  big.set_error_rate(0.01);
  for (int batch = 0; batch < 40; ++batch) {
    std::vector<std::string> items;
    for (int i = 0; i < 100'000; ++i) items.push_back(absl::StrCat("big-", batch, "-", i));
    ASSERT_OK(writer->Add("big", items, &big).status());
  }
  {
    auto stub = ReplicationStub(primary);
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer a");
    v1::SnapshotRequest request;
    request.set_follower_id("stalled");
    auto stalled = stub->Snapshot(&context, request);
    v1::SnapshotResponse chunk;
    ASSERT_TRUE(stalled->Read(&chunk));  // then nothing more is read
    const grpc::Status second = CallSnapshot(primary, "a");
    EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << second.error_message();
    ASSERT_TRUE(WaitFor([&] { return CallSnapshot(primary, "a").ok(); }, absl::Seconds(10)));
    EXPECT_TRUE(absl::StrContains(cluster.primary().ReadLog(), "abandoned a snapshot"));
    context.TryCancel();
  }
}

// Bytes of the archived log files under `data_dir` (0 without an archive).
uint64_t ArchiveBytes(const std::string& data_dir) {
  uint64_t bytes = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir + "/archive", error)) {
    if (entry.is_regular_file(error)) bytes += entry.file_size(error);
  }
  return bytes;
}

// Adds `batches` x 400,000 new items to `filter` (a 60 MB filter) through `target`, with a
// pause after each for the checkpoint (--checkpoint_interval=1s) to write its dirty pages:
// about 60 MB of log each.
void WriteLog(const std::string& target, const std::string& filter, const std::string& tag,
              int batches, absl::Duration pause) {
  std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(target);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(50'000'000);
  spec.set_error_rate(0.01);
  for (int b = 0; b < batches; ++b) {
    std::vector<std::string> items;
    items.reserve(400'000);
    for (int i = 0; i < 400'000; ++i) items.push_back(absl::StrCat(tag, "-", b, "-", i));
    ASSERT_OK(client->Add(filter, items, &spec).status());
    absl::SleepFor(pause);
  }
}

// The archive of log files stays within --replication_log_limit under load (it is purged every
// second and after flushes: RocksDB itself checks its size only every ten minutes), and a
// server nobody replicates from keeps none, through clean shutdowns too.
TEST(ImpostorTest, TheLogArchiveStaysWithinItsLimit) {
  ReplicationCluster cluster(
      1, {"--replication_log_limit=4Mi", "--checkpoint_interval=1s", "--checkpoint_write_rate=0"});
  ASSERT_TRUE(cluster.Start());
  // Several memtables of log: their flushes archive log files while writes go on (RocksDB
  // checked the archive's size at its first archiving only).
  uint64_t most = 0;
  for (int round = 0; round < 6; ++round) {
    WriteLog(cluster.primary().target(), "tailed", absl::StrCat(round), 1,
             absl::Milliseconds(1500));
    // A log file archived this very moment may be there until the purge that follows its
    // flush (milliseconds): the smaller of two looks 200 ms apart.
    const uint64_t first = ArchiveBytes(cluster.primary_dir());
    absl::SleepFor(absl::Milliseconds(200));
    most = std::max(most, std::min(first, ArchiveBytes(cluster.primary_dir())));
  }
  EXPECT_LE(most, uint64_t{4} << 20) << "the archive passed --replication_log_limit";
  ASSERT_TRUE(cluster.WaitCaughtUp());

  // A clean shutdown flushes, archiving every log file: a server without followers keeps none.
  TempDir alone_dir;
  for (int round = 0; round < 2; ++round) {
    std::unique_ptr<ServerProcess> alone =
        ServerProcess::Start(alone_dir.path(), {"--replication_log_limit=4Mi"});
    ASSERT_NE(alone, nullptr);
    WriteLog(alone->target(), "alone", absl::StrCat(round), 1, absl::ZeroDuration());
    EXPECT_EQ(alone->Terminate(), 0);
    EXPECT_EQ(ArchiveBytes(alone_dir.path()), 0u) << "a server without followers kept an archive";
  }
}

// Pods that elect their primary through etcd, with --min_replica_acks=1.
class ImpostorEtcdTest : public ::testing::Test {
 protected:
  static constexpr char kCluster[] = "impostor-test";

  void SetUp() override {
    etcd_ = EtcdProcess::Start();
    ASSERT_NE(etcd_, nullptr);
    etcd_client_ = ConnectEtcd(etcd_->endpoint());
    ASSERT_NE(etcd_client_, nullptr);
  }

  void StartPods(int pods, const std::vector<std::string>& extra) {
    for (int i = 0; i < pods; ++i) {
      data_dirs_.push_back(std::make_unique<TempDir>());
      ports_.push_back(FreeLoopbackPort());
      std::vector<std::string> args = {"--listen=" + Target(i),
                                       "--advertise_address=" + Target(i),
                                       "--etcd_endpoints=" + etcd_->endpoint(),
                                       absl::StrCat("--cluster=", kCluster),
                                       "--leader_ttl=3s",
                                       "--min_replica_acks=1",
                                       "--replica_ack_timeout=2s",
                                       "--allow_unauthenticated_replication"};
      args.insert(args.end(), extra.begin(), extra.end());
      pods_.push_back(ServerProcess::Start(data_dirs_[i]->path(), args));
      ASSERT_NE(pods_.back(), nullptr);
    }
  }

  [[nodiscard]] std::string Target(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }

  // The pod etcd names as the primary, or -1.
  int Primary() {
    std::vector<std::string> targets;
    for (size_t i = 0; i < ports_.size(); ++i) targets.push_back(Target(static_cast<int>(i)));
    return NamedPrimary(*etcd_client_, kCluster, targets);
  }

  std::vector<std::string> SyncSetNames() {
    absl::StatusOr<coordination::KeyValue> sync =
        etcd_client_->Get(coordination::SyncKey(kCluster));
    if (!sync.ok()) return {};
    absl::StatusOr<coordination::SyncSet> set = coordination::DecodeSyncSet(sync->value);
    return set.ok() ? set->names : std::vector<std::string>{};
  }

  bool Add(int pod, const std::string& item) {
    if (!AddOne(Target(pod), "guarded", item)) return false;
    acknowledged_.push_back(item);
    return true;
  }

  grpc::Status Switchover(int pod, const std::string& to) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::SwitchoverRequest request;
    request.set_to(to);
    v1::SwitchoverResponse response;
    return ReplicationStub(Target(pod))->Switchover(&context, request, &response);
  }

  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<coordination::EtcdClient> etcd_client_;
  std::vector<std::unique_ptr<TempDir>> data_dirs_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<ServerProcess>> pods_;
  std::vector<std::string> acknowledged_;
};

// Fakes with a replication token, one naming itself after the real follower and one with a new
// name: neither counts as a follower (else failover could elect a follower lacking the writes
// acknowledged through the fake), neither joins the sync set (else no pod would take over),
// neither can be handed over to; the primary's death elects the real follower at once, with
// every acknowledged add.
TEST_F(ImpostorEtcdTest, FakesPosingAsAMemberOrNamingNoneCountForNothing) {
  StartPods(3, {"--switchover_cooldown=0"});
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }));
  const std::vector<int> followers = {(primary + 1) % 3, (primary + 2) % 3};
  int n = 0;
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("before-", n++)); }));

  FakeFollower posing(Target(primary), Target(followers[0]));  // a member's name
  FakeFollower ghost(Target(primary), "ghost");
  ASSERT_TRUE(WaitFor([&] { return posing.responses() > 0 && ghost.responses() > 0; }));
  for (int f : followers) pods_[f]->Signal(SIGSTOP);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(Add(primary, absl::StrCat("during-", i))) << "acknowledged through a fake";
  }
  const std::vector<std::string> names = SyncSetNames();
  EXPECT_EQ(std::count(names.begin(), names.end(), "ghost"), 0);
  const grpc::Status to_ghost = Switchover(primary, "ghost");
  EXPECT_EQ(to_ghost.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << to_ghost.error_message();
  EXPECT_EQ(Primary(), primary);

  for (int f : followers) pods_[f]->Signal(SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("after-", n++)); }));
  for (const std::string& name : SyncSetNames()) {
    EXPECT_TRUE(name == Target(followers[0]) || name == Target(followers[1])) << name;
  }

  // The primary dies: a real follower takes over at once, holding everything acknowledged.
  const absl::Time killed = absl::Now();
  pods_[primary]->Kill();
  ASSERT_TRUE(
      WaitFor([&] { return Add(followers[0], absl::StrCat("elected-", n++)); }, absl::Seconds(20)));
  EXPECT_LT(absl::Now() - killed, absl::Seconds(12));
  const int elected = Primary();
  ASSERT_TRUE(elected == followers[0] || elected == followers[1]) << elected;
  EXPECT_TRUE(AllPresent(Target(elected), "guarded", acknowledged_))
      << "an acknowledged add is lost";
}

// Switchover calls in a row do not bounce the primary (each costs writes made meanwhile): a
// primary takes one only --switchover_cooldown after its last one or its taking over.
TEST_F(ImpostorEtcdTest, SwitchoversCannotComeBackToBack) {
  StartPods(2, {"--switchover_cooldown=3s"});
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }));
  int n = 0;
  ASSERT_TRUE(WaitFor([&] { return Add(primary, absl::StrCat("before-", n++)); }));
  const int target = 1 - primary;
  ASSERT_TRUE(WaitFor([&] { return Switchover(primary, Target(target)).ok(); }));
  ASSERT_TRUE(WaitFor([&] { return Primary() == target; }));
  ASSERT_TRUE(WaitFor([&] { return Add(target, absl::StrCat("moved-", n++)); }));
  // The new primary took over just now: it refuses, saying why and when to come back.
  const grpc::Status again = Switchover(target, Target(primary));
  EXPECT_EQ(again.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << again.error_message();
  EXPECT_TRUE(absl::StrContains(again.error_message(), "--switchover_cooldown"))
      << again.error_message();
  EXPECT_EQ(Primary(), target);
  // Past the cooldown it is taken.
  ASSERT_TRUE(WaitFor([&] { return Switchover(target, Target(primary)).ok(); }));
  ASSERT_TRUE(WaitFor([&] { return Primary() == primary; }));
}

}  // namespace
}  // namespace bloomtest

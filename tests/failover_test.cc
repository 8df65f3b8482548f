// Automatic failover through etcd with real processes: a real etcd (tests/etcd_process.h) and
// three bloom-server pods with --etcd_endpoints and --min_replica_acks=1, writers going through
// every pod. Killing the primary (SIGKILL) elects another, which acknowledges writes within
// seconds; every acknowledged add is then present on the pods left; the killed pod, restarted,
// rejoins as a follower with everything; a SIGTERMed primary hands over at once; a planned
// switchover (the Switchover call, bloom-cli switchover) moves the primary losing nothing; a
// primary paused (SIGSTOP) past its lease acknowledges nothing when it resumes; a pod that cannot
// reach etcd never serves as a primary. Each FailoverTest runs twice: against a plaintext etcd,
// and against one with TLS, client certificates required and etcd's users on
// (tests/support/secure_etcd.h), where the pods reach it as a user that may write only the
// cluster's keys.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <map>
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
#include "tests/support/etcd_process.h"
#include "tests/support/secure_etcd.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace bloomtest {
namespace {

constexpr char kCluster[] = "failover-test";

bloom::v1::FilterSpec Spec() {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(100'000);
  spec.set_error_rate(0.001);
  return spec;
}

// Whether etcd runs with TLS, client certificates and users.
using SecuredEtcd = bool;

class FailoverTest : public ::testing::TestWithParam<SecuredEtcd> {
 protected:
  void SetUp() override {
    coordination::EtcdSecurity root;  // the test reads the leader key as etcd's root
    if (GetParam()) {
      pki_ = std::make_unique<TestPki>();
      secure_etcd_ = SecureEtcd::Start(*pki_, absl::StrCat(kCluster, "/"));
      ASSERT_NE(secure_etcd_, nullptr);
      etcd_endpoint_ = secure_etcd_->endpoint();
      etcd_flags_ = secure_etcd_->PodFlags();
      root.ca_file = pki_->Path("ca1.crt");
      root.cert_file = pki_->Path("client1.crt");
      root.key_file = pki_->Path("client1.key");
      root.username = "root";
      root.password = SecureEtcd::kRootPassword;
    } else {
      etcd_ = EtcdProcess::Start();
      ASSERT_NE(etcd_, nullptr);
      etcd_endpoint_ = etcd_->endpoint();
      etcd_flags_ = {"--etcd_endpoints=" + etcd_endpoint_};
    }
    absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> client =
        coordination::EtcdClient::Connect({etcd_endpoint_}, absl::Seconds(2), root);
    ASSERT_TRUE(client.ok()) << client.status();
    etcd_client_ = *std::move(client);
    for (int i = 0; i < 3; ++i) {
      data_dirs_.push_back(std::make_unique<TempDir>());
      ports_.push_back(FreeLoopbackPort());
      StartPod(i);
    }
  }

  void StartPod(int i) {
    const std::string address = absl::StrCat("127.0.0.1:", ports_[i]);
    std::vector<std::string> flags = {"--listen=" + address,
                                      "--advertise_address=" + address,
                                      absl::StrCat("--cluster=", kCluster),
                                      "--leader_ttl=3s",
                                      "--min_replica_acks=1",
                                      "--replica_ack_timeout=3s",
                                      "--allow_unauthenticated_replication",
                                      "--switchover_cooldown=0"};
    flags.insert(flags.end(), etcd_flags_.begin(), etcd_flags_.end());
    pods_[i] = ServerProcess::Start(data_dirs_[i]->path(), flags);
    ASSERT_NE(pods_[i], nullptr);
  }

  [[nodiscard]] std::string Target(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }

  // The pod etcd names as the primary, or -1.
  int Primary() {
    absl::StatusOr<coordination::KeyValue> leader =
        etcd_client_->Get(coordination::LeaderKey(kCluster));
    if (!leader.ok()) return -1;
    absl::StatusOr<coordination::LeaderRecord> record = coordination::DecodeLeader(leader->value);
    if (!record.ok()) return -1;
    for (int i = 0; i < 3; ++i) {
      if (record->address == Target(i)) return i;
    }
    return -1;
  }

  // Adds a batch of new items through pod `i` (forwarded to the primary); records them if the
  // add was acknowledged.
  bool AddThrough(int i, const std::string& tag) {
    bloomclient::ClientOptions options;
    options.timeout = absl::Seconds(5);
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(i), options);
    std::vector<std::string> items;
    items.reserve(50);
    for (int k = 0; k < 50; ++k) items.push_back(absl::StrCat(tag, "-", k));
    const bloom::v1::FilterSpec spec = Spec();
    if (!client->Add("failover", items, &spec).ok()) return false;
    acknowledged_.insert(acknowledged_.end(), items.begin(), items.end());
    return true;
  }

  // Once pod `i` has caught up (a follower may be a moment behind: these reads carry no
  // sequence to wait for), every acknowledged add reads present through it.
  void ExpectAllAcknowledgedPresent(int i) {
    std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(Target(i));
    WaitFor([&] {
      absl::StatusOr<std::vector<bool>> present = client->MightContain("failover", acknowledged_);
      return present.ok() && std::find(present->begin(), present->end(), false) == present->end();
    });
    absl::StatusOr<std::vector<bool>> present = client->MightContain("failover", acknowledged_);
    ASSERT_TRUE(present.ok()) << Target(i) << ": " << present.status();
    for (size_t k = 0; k < acknowledged_.size(); ++k) {
      ASSERT_TRUE((*present)[k]) << Target(i) << " lost the acknowledged add of "
                                 << acknowledged_[k];
    }
  }

  std::unique_ptr<TestPki> pki_;
  std::unique_ptr<SecureEtcd> secure_etcd_;  // or:
  std::unique_ptr<EtcdProcess> etcd_;
  std::string etcd_endpoint_;
  std::vector<std::string> etcd_flags_;  // the pods' flags to reach it
  std::unique_ptr<coordination::EtcdClient> etcd_client_;
  std::vector<std::unique_ptr<TempDir>> data_dirs_;
  std::vector<int> ports_;
  std::map<int, std::unique_ptr<ServerProcess>> pods_;
  std::vector<std::string> acknowledged_;
};

TEST_P(FailoverTest, AKilledPrimaryIsReplacedAndRejoinsAsAFollower) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }));
  // Writes through every pod, acknowledged once a follower in the sync set holds them.
  int batch = 0;
  ASSERT_TRUE(WaitFor([&] { return AddThrough(0, absl::StrCat("first-", batch++)); }));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitFor([&] { return AddThrough(i, absl::StrCat("before-", i, "-", batch++)); }));
  }

  const absl::Time killed = absl::Now();
  pods_[primary]->Kill();
  const int survivor = (primary + 1) % 3;
  ASSERT_TRUE(WaitFor([&] { return AddThrough(survivor, absl::StrCat("after-", batch++)); },
                      absl::Seconds(20)));
  const absl::Duration failover = absl::Now() - killed;
  EXPECT_LT(failover, absl::Seconds(10)) << failover;
  const int elected = Primary();
  EXPECT_GE(elected, 0);
  EXPECT_NE(elected, primary);
  for (int i = 0; i < 3; ++i) {
    if (i != primary) ExpectAllAcknowledgedPresent(i);
  }

  // The old primary comes back: a follower of the new one, with every acknowledged add.
  StartPod(primary);
  ASSERT_TRUE(WaitFor([&] { return AddThrough(primary, absl::StrCat("back-", batch++)); }));
  ASSERT_TRUE(WaitFor(
      [&] { return pods_[primary]->ReadLog().find("is now follower") != std::string::npos; }));
  EXPECT_EQ(Primary(), elected);
  ASSERT_TRUE(WaitFor([&] {
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(primary));
    absl::StatusOr<std::vector<bool>> present = client->MightContain("failover", acknowledged_);
    if (!present.ok()) return false;
    for (bool p : *present) {
      if (!p) return false;
    }
    return true;
  }));
  ExpectAllAcknowledgedPresent(primary);
}

TEST_P(FailoverTest, StatusSaysTheTermThePrimaryAndItsSyncSet) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }));
  absl::StatusOr<coordination::KeyValue> leader =
      etcd_client_->Get(coordination::LeaderKey(kCluster));
  ASSERT_TRUE(leader.ok()) << leader.status();
  namespace v1 = bloom::replication::v1;
  auto status_of = [&](int i) {
    auto stub = v1::ReplicationService::NewStub(
        grpc::CreateChannel(Target(i), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::StatusResponse status;
    EXPECT_TRUE(stub->Status(&context, {}, &status).ok());
    return status;
  };
  // The primary's sync set fills as its two followers connect.
  ASSERT_TRUE(WaitFor([&] { return status_of(primary).cluster().sync_set_size() == 2; }));
  for (int i = 0; i < 3; ++i) {
    const v1::StatusResponse status = status_of(i);
    EXPECT_EQ(status.role(),
              i == primary ? v1::StatusResponse::ROLE_PRIMARY : v1::StatusResponse::ROLE_FOLLOWER)
        << i;
    EXPECT_EQ(status.cluster().name(), kCluster);
    EXPECT_EQ(status.cluster().term(), leader->create_revision) << i;
    EXPECT_EQ(status.cluster().leader_address(), Target(primary)) << i;
  }
  const v1::StatusResponse primary_status = status_of(primary);
  for (const std::string& name : primary_status.cluster().sync_set()) {
    EXPECT_NE(name, Target(primary));  // its followers, by their member names
  }
}

TEST_P(FailoverTest, AStoppedPrimaryHandsOverAtOnce) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }));
  int batch = 0;
  ASSERT_TRUE(WaitFor([&] { return AddThrough(primary, absl::StrCat("first-", batch++)); }));
  const absl::Time stopped = absl::Now();
  EXPECT_EQ(pods_[primary]->Terminate(), 0);
  const int survivor = (primary + 1) % 3;
  ASSERT_TRUE(WaitFor([&] { return AddThrough(survivor, absl::StrCat("after-", batch++)); }));
  // Resigning ends the lease: no wait for its 3 s TTL.
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(3));
  const int elected = Primary();
  EXPECT_GE(elected, 0);
  EXPECT_NE(elected, primary);
  for (int i = 0; i < 3; ++i) {
    if (i != primary) ExpectAllAcknowledgedPresent(i);
  }
}

TEST_P(FailoverTest, APlannedSwitchoverMovesThePrimaryLosingNothing) {
  namespace v1 = bloom::replication::v1;
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }));
  const int target = (primary + 1) % 3;
  const int other = (primary + 2) % 3;
  auto switchover = [&](int pod, const std::string& to, v1::SwitchoverResponse* response) {
    auto stub = v1::ReplicationService::NewStub(
        grpc::CreateChannel(Target(pod), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::SwitchoverRequest request;
    request.set_to(to);
    return stub->Switchover(&context, request, response);
  };
  int batch = 0;
  // Both followers in the sync set: each holds what was acknowledged.
  ASSERT_TRUE(WaitFor([&] { return AddThrough(other, absl::StrCat("first-", batch++)); }));

  v1::SwitchoverResponse response;
  grpc::Status refused = switchover(target, Target(target), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find(Target(primary)), std::string::npos)
      << refused.error_message();  // names the primary
  refused = switchover(primary, "no-such-pod", &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("no-such-pod is not following"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(Primary(), primary);  // and nothing changed

  // A writer goes on through the third pod during the switchover.
  std::atomic<bool> writing{true};
  std::vector<std::string> written;
  int refusals = 0;
  std::atomic<int> attempts{0};
  std::thread writer([&] {
    bloomclient::ClientOptions options;
    options.timeout = absl::Seconds(5);
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(other), options);
    const bloom::v1::FilterSpec spec = Spec();
    for (int n = 0; writing.load(); ++n) {
      const std::vector<std::string> items = {absl::StrCat("during-", n, "-a"),
                                              absl::StrCat("during-", n, "-b")};
      if (client->Add("failover", items, &spec).ok()) {
        written.insert(written.end(), items.begin(), items.end());
      } else {
        ++refusals;
      }
      attempts.fetch_add(1);
    }
  });
  // The switchover starts with the writes under way.
  EXPECT_TRUE(WaitFor([&] { return attempts.load() >= 20; }));  // (the writer is joined below)
  const absl::Time started = absl::Now();
  grpc::Status moved = switchover(primary, Target(target), &response);
  ASSERT_TRUE(moved.ok()) << moved.error_message();
  EXPECT_EQ(response.primary(), Target(target));
  ASSERT_TRUE(WaitFor([&] { return Primary() == target; }));
  // An election's settle time, not the lease's TTL.
  EXPECT_LT(absl::Now() - started, absl::Seconds(3));
  ASSERT_TRUE(WaitFor([&] { return AddThrough(other, absl::StrCat("after-", batch++)); }));
  writing = false;
  writer.join();
  acknowledged_.insert(acknowledged_.end(), written.begin(), written.end());
  EXPECT_GT(written.size(), 0u) << refusals << " refused";

  // The old primary follows the new one, without copying its data again: it applied nothing
  // that the target lacks.
  ASSERT_TRUE(WaitFor(
      [&] { return pods_[primary]->ReadLog().find("is now follower") != std::string::npos; }));
  EXPECT_EQ(pods_[primary]->ReadLog().find("copying its data anew"), std::string::npos);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitFor([&] { return AddThrough(i, absl::StrCat("last-", i, "-", batch++)); }));
  }
  for (int i = 0; i < 3; ++i) ExpectAllAcknowledgedPresent(i);

  // bloom-cli, through any pod, to whichever follower holds the most.
  const CommandResult cli =
      RunCommand(absl::StrCat(BLOOM_CLI_PATH, " --server=", Target(other), " switchover 2>&1"));
  EXPECT_EQ(cli.exit_code, 0) << cli.out;
  EXPECT_NE(cli.out.find("handed over from " + Target(target)), std::string::npos) << cli.out;
  EXPECT_NE(Primary(), target);
  const CommandResult again =
      RunCommand(absl::StrCat(BLOOM_CLI_PATH, " --server=", Target(other),
                              " switchover --to=", Target(Primary()), " 2>&1"));
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("is the primary already"), std::string::npos) << again.out;
}

TEST_P(FailoverTest, APrimaryPausedPastItsLeaseAcknowledgesNothingWhenItResumes) {
  int primary = -1;
  ASSERT_TRUE(WaitFor([&] { return (primary = Primary()) >= 0; }));
  int batch = 0;
  ASSERT_TRUE(WaitFor([&] { return AddThrough(primary, absl::StrCat("first-", batch++)); }));

  pods_[primary]->Signal(SIGSTOP);
  int elected = -1;
  ASSERT_TRUE(WaitFor([&] { return (elected = Primary()) >= 0 && elected != primary; }));
  // A write sent to the paused pod itself waits in its socket until it resumes.
  std::atomic<bool> done{false};
  absl::Status answered;
  std::thread late([&] {
    bloomclient::ClientOptions options;
    options.timeout = absl::Seconds(15);
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(primary), options);
    const bloom::v1::FilterSpec spec = Spec();
    answered = client->Add("failover", {"sent-to-the-paused-primary"}, &spec).status();
    done = true;
  });
  absl::SleepFor(absl::Milliseconds(500));
  pods_[primary]->Signal(SIGCONT);
  late.join();
  // Not acknowledged: its lease's bound passed while it was paused.
  EXPECT_FALSE(answered.ok());
  EXPECT_TRUE(absl::IsUnavailable(answered)) << answered;

  // It steps down and follows the new primary; writes go on through every pod.
  ASSERT_TRUE(WaitFor(
      [&] { return pods_[primary]->ReadLog().find("is now follower") != std::string::npos; }));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitFor([&] { return AddThrough(i, absl::StrCat("after-", i, "-", batch++)); }));
  }
  EXPECT_EQ(Primary(), elected);
  for (int i = 0; i < 3; ++i) {
    if (i != primary) ExpectAllAcknowledgedPresent(i);
  }
}

INSTANTIATE_TEST_SUITE_P(Etcd, FailoverTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<SecuredEtcd>& info) {
                           return info.param ? "TlsCertificatesAndUsers" : "Plaintext";
                         });

TEST(FailoverAloneTest, ASwitchoverWithoutEtcdIsRefusedNamingWhatItNeeds) {
  TempDir data;
  std::unique_ptr<ServerProcess> server = ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  namespace v1 = bloom::replication::v1;
  auto stub = v1::ReplicationService::NewStub(
      grpc::CreateChannel(server->target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::SwitchoverRequest request;
  request.set_to("127.0.0.1:1");
  v1::SwitchoverResponse response;
  const grpc::Status refused = stub->Switchover(&context, request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("--etcd_endpoints"), std::string::npos)
      << refused.error_message();
  // bloom-cli says the same before it asks.
  const CommandResult cli =
      RunCommand(absl::StrCat(BLOOM_CLI_PATH, " --server=", server->target(), " switchover 2>&1"));
  EXPECT_EQ(cli.exit_code, 1) << cli.out;
  EXPECT_NE(cli.out.find("FAILED_PRECONDITION"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("--etcd_endpoints"), std::string::npos) << cli.out;
}

TEST(FailoverAloneTest, APodThatCannotReachEtcdNeverServesAsPrimary) {
  TempDir data;
  const int port = FreeLoopbackPort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const std::string no_etcd = absl::StrCat("127.0.0.1:", FreeLoopbackPort());
  std::unique_ptr<ServerProcess> pod =
      ServerProcess::Spawn(data.path(), {"--listen=" + address, "--advertise_address=" + address,
                                         "--etcd_endpoints=" + no_etcd, "--leader_ttl=2s"});
  ASSERT_TRUE(
      WaitFor([&] { return pod->ReadLog().find("no etcd lease yet") != std::string::npos; }));
  absl::SleepFor(absl::Seconds(3));  // more than a TTL
  const std::string log = pod->ReadLog();
  EXPECT_EQ(log.find("is now primary"), std::string::npos) << log;
  // Nothing is served: a write cannot be acknowledged by a pod that was never elected.
  bloomclient::ClientOptions options;
  options.timeout = absl::Seconds(1);
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(address, options);
  const bloom::v1::FilterSpec spec = Spec();
  absl::Status added = client->Add("alone", {"x"}, &spec).status();
  EXPECT_FALSE(added.ok());
  EXPECT_TRUE(absl::IsUnavailable(added) || absl::IsDeadlineExceeded(added)) << added;
}

// The flags of a pod of the cluster "secured" on `etcd`, with `changes` made: each replaces the
// flag of its name ("--name=value"; "--name=" drops it).
std::vector<std::string> SecuredPodFlags(const SecureEtcd& etcd, const std::string& address,
                                         const std::vector<std::string>& changes) {
  std::vector<std::string> flags = {"--listen=" + address, "--advertise_address=" + address,
                                    "--cluster=secured", "--leader_ttl=2s"};
  const std::vector<std::string> etcd_flags = etcd.PodFlags();
  flags.insert(flags.end(), etcd_flags.begin(), etcd_flags.end());
  std::vector<std::string> changed;
  for (std::string flag : flags) {
    for (const std::string& change : changes) {
      if (absl::StartsWith(flag, change.substr(0, change.find('=') + 1))) flag = change;
    }
    if (flag.back() != '=') changed.push_back(flag);
  }
  return changed;
}

// A pod of the cluster "secured" on an etcd with TLS, client certificates and users.
class SecuredEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = SecureEtcd::Start(pki_, "secured/");
    ASSERT_NE(etcd_, nullptr);
  }

  TestPki pki_;
  std::unique_ptr<SecureEtcd> etcd_;
  TempDir data_;
  const std::string address_ = absl::StrCat("127.0.0.1:", FreeLoopbackPort());
};

TEST_F(SecuredEtcdTest, APodWithAWrongCaCertificateOrPasswordNeverLeadsAndSaysWhichFlag) {
  const std::string wrong_password = data_.path() + "/wrong-password";
  std::ofstream(wrong_password) << "guess\n";
  struct Case {
    std::vector<std::string> changes;
    std::string named;  // in the error the pod exits with
  };
  const Case kExits[] = {
      {{"--etcd_ca_file=" + pki_.Path("ca2.crt")}, "--etcd_ca_file"},
      {{"--etcd_password_file=" + wrong_password}, "--etcd_password_file"},
      {{"--etcd_ca_file=" + pki_.Path("nothing-here.crt")}, "--etcd_ca_file"},
      // Another cluster's keys: the user's role may write only "secured/".
      {{"--cluster=elsewhere"}, "readwrite"},
  };
  for (const Case& bad : kExits) {
    std::vector<std::string> flags = SecuredPodFlags(*etcd_, address_, bad.changes);
    flags.push_back("--data_dir=" + data_.path());
    std::string output;
    EXPECT_EQ(ServerProcess::RunToExit(flags, &output), 1) << output;
    EXPECT_NE(output.find(bad.named), std::string::npos) << bad.named << ": " << output;
    EXPECT_EQ(output.find("is now primary"), std::string::npos) << output;
  }

  // Without a client certificate etcd closes the connection, which may also be an etcd that
  // is down: the pod says what to check and waits, never leading.
  std::unique_ptr<ServerProcess> pod = ServerProcess::Spawn(
      data_.path(), SecuredPodFlags(*etcd_, address_, {"--etcd_cert_file=", "--etcd_key_file="}));
  ASSERT_TRUE(WaitFor([&] { return pod->ReadLog().find("--etcd_cert_file") != std::string::npos; }))
      << pod->ReadLog();
  absl::SleepFor(absl::Seconds(3));  // more than a TTL
  EXPECT_EQ(pod->ReadLog().find("is now primary"), std::string::npos) << pod->ReadLog();
  EXPECT_EQ(etcd_->Etcdctl("get --prefix secured/").out, "");  // no leader, no member
}

TEST_F(SecuredEtcdTest, AClientWithoutThePodsCredentialsCannotWriteTheLeaderKey) {
  std::vector<std::string> flags = SecuredPodFlags(*etcd_, address_, {});
  flags.push_back("--metrics_listen=127.0.0.1:0");
  std::unique_ptr<ServerProcess> pod = ServerProcess::Start(data_.path(), flags);
  ASSERT_NE(pod, nullptr);
  // The etcd certificates' expiry is exported, for the alert that warns before they expire.
  const std::string metrics = HttpGet(pod->metrics_port(), "/metrics");
  for (const char* certificate : {"etcd_client", "etcd_ca"}) {
    EXPECT_GT(
        PrometheusSample(metrics, absl::StrCat("bloom_tls_certificate_expiry_timestamp_seconds{"
                                               "certificate=\"",
                                               certificate, "\"}")),
        absl::ToUnixSeconds(absl::Now()))
        << certificate;
  }
  const std::string leader_key = coordination::LeaderKey("secured");
  ASSERT_TRUE(WaitFor([&] {
    return etcd_->Etcdctl("get --print-value-only " + leader_key).out.find(address_) !=
           std::string::npos;
  }));

  coordination::EtcdSecurity trusted;  // the pods' CA and certificate
  trusted.ca_file = pki_.Path("ca1.crt");
  trusted.cert_file = pki_.Path("client1.crt");
  trusted.key_file = pki_.Path("client1.key");
  coordination::EtcdSecurity plaintext;
  coordination::EtcdSecurity certificate_only = trusted;  // etcd's user: its common name
  coordination::EtcdSecurity guessed = trusted;
  guessed.username = SecureEtcd::kUser;
  guessed.password = "guess";
  coordination::EtcdSecurity foreign;
  foreign.ca_file = pki_.Path("ca1.crt");
  foreign.cert_file = pki_.Path("client2.crt");
  foreign.key_file = pki_.Path("client2.key");
  for (const coordination::EtcdSecurity& intruder :
       {plaintext, certificate_only, guessed, foreign}) {
    absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> client =
        coordination::EtcdClient::Connect({etcd_->endpoint()}, absl::Seconds(2), intruder);
    ASSERT_TRUE(client.ok()) << client.status();
    const absl::Status put = (*client)->Put(leader_key, "127.0.0.1:1").status();
    EXPECT_FALSE(put.ok());
    const absl::Status erased = (*client)->DeleteIfValue(leader_key, "anything").status();
    EXPECT_FALSE(erased.ok());
  }
  // etcdctl as an operator without credentials gets nowhere either.
  const CommandResult bare = RunCommand(absl::StrCat(
      "ETCDCTL_API=3 etcdctl --endpoints=https://", etcd_->endpoint(),
      " --cacert=", pki_.Path("ca1.crt"), " put ", leader_key, " x --command-timeout=3s 2>&1"));
  EXPECT_NE(bare.exit_code, 0) << bare.out;
  EXPECT_NE(etcd_->Etcdctl("get --print-value-only " + leader_key).out.find(address_),
            std::string::npos);
  // And the pod leads on, its writes acknowledged.
  std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(address_);
  const bloom::v1::FilterSpec spec = Spec();
  EXPECT_TRUE(client->Add("secured", {"x"}, &spec).ok());
}

}  // namespace
}  // namespace bloomtest

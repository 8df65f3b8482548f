// TLS, mutual TLS, certificate rotation, token roles and token reload, against the real
// bloom-server binary. Certificates come from a test CA made with openssl at test time.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/bloom_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/test_pki.h"
#include "tests/support/testing.h"

namespace {

using bloomclient::BloomClient;
using bloomclient::ClientOptions;
using bloomtest::RunCommand;
using bloomtest::ServerProcess;

using bloomtest::TestPki;

std::unique_ptr<BloomClient> TlsClient(const ServerProcess& server, const std::string& ca,
                                       const std::string& cert = "", const std::string& key = "",
                                       const std::string& token = "") {
  ClientOptions options;
  options.timeout = absl::Seconds(5);
  options.tls.enabled = true;
  options.tls.ca_file = ca;
  options.tls.cert_file = cert;
  options.tls.key_file = key;
  options.token = token;
  absl::StatusOr<std::unique_ptr<BloomClient>> client = BloomClient::Open(server.target(), options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

// A call that reaches the service: NOT_FOUND for a filter that does not exist.
absl::StatusCode Probe(BloomClient& client) { return client.Stats("absent").status().code(); }

class SecurityTest : public ::testing::Test {
 protected:
  TestPki pki_;
  bloomtest::TempDir data_;
};

TEST_F(SecurityTest, TlsServesTlsClientsAndRefusesOthers) {
  auto server = ServerProcess::Start(data_.path(), {"--tls_cert_file=" + pki_.Path("server1.crt"),
                                                    "--tls_key_file=" + pki_.Path("server1.key")});
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->ReadLog().find("TLS, no auth"), std::string::npos) << server->ReadLog();

  auto good = TlsClient(*server, pki_.Path("ca1.crt"));
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(Probe(*good), absl::StatusCode::kNotFound);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1000);
  spec.set_error_rate(0.01);
  ASSERT_OK(good->Reserve("f", spec).status());
  ASSERT_OK(good->Add("f", {"a"}).status());

  // Plaintext cannot talk to a TLS port, nor can a client that does not trust the server.
  ClientOptions plain_options;
  plain_options.timeout = absl::Seconds(3);
  auto plain = BloomClient::Connect(server->target(), plain_options);
  EXPECT_EQ(Probe(*plain), absl::StatusCode::kUnavailable);
  auto untrusting = TlsClient(*server, pki_.Path("ca2.crt"));
  ASSERT_NE(untrusting, nullptr);
  EXPECT_EQ(Probe(*untrusting), absl::StatusCode::kUnavailable);
}

TEST_F(SecurityTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  auto server =
      ServerProcess::Start(data_.path(), {"--tls_cert_file=" + pki_.Path("server1.crt"),
                                          "--tls_key_file=" + pki_.Path("server1.key"),
                                          "--tls_client_ca_file=" + pki_.Path("ca1.crt")});
  ASSERT_NE(server, nullptr);
  auto without = TlsClient(*server, pki_.Path("ca1.crt"));
  EXPECT_EQ(Probe(*without), absl::StatusCode::kUnavailable);
  auto foreign =
      TlsClient(*server, pki_.Path("ca1.crt"), pki_.Path("client2.crt"), pki_.Path("client2.key"));
  EXPECT_EQ(Probe(*foreign), absl::StatusCode::kUnavailable);
  auto member =
      TlsClient(*server, pki_.Path("ca1.crt"), pki_.Path("client1.crt"), pki_.Path("client1.key"));
  EXPECT_EQ(Probe(*member), absl::StatusCode::kNotFound);
}

TEST_F(SecurityTest, RotatedCertificatesAreServedWithoutARestart) {
  bloomtest::TempDir live;
  const std::string cert = live.path() + "/tls.crt", key = live.path() + "/tls.key";
  auto install = [&](const std::string& name) {
    // Key first, then certificate, each replaced atomically (as a Secret update is).
    for (const auto& [from, to] :
         {std::pair{pki_.Path(name + ".key"), key}, std::pair{pki_.Path(name + ".crt"), cert}}) {
      ASSERT_EQ(RunCommand("cp " + from + " " + to + ".new && mv " + to + ".new " + to).exit_code,
                0);
    }
  };
  install("server1");
  auto server = ServerProcess::Start(
      data_.path(), {"--tls_cert_file=" + cert, "--tls_key_file=" + key, "--tls_reload_interval=1s",
                     "--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  // The metrics say when the certificate in the file expires, read at each scrape.
  auto expiry_of = [](const std::string& file) {
    const bloomtest::CommandResult end = RunCommand(
        "date -d \"$(openssl x509 -enddate -noout -in " + file + " | cut -d= -f2)\" +%s");
    return std::stod(end.out);
  };
  auto scraped_expiry = [&] {
    return bloomtest::PrometheusSample(
        bloomtest::HttpGet(server->metrics_port(), "/metrics"),
        R"(bloom_tls_certificate_expiry_timestamp_seconds{certificate="server"})");
  };
  EXPECT_EQ(scraped_expiry(), expiry_of(pki_.Path("server1.crt")));
  auto old_client = TlsClient(*server, pki_.Path("ca1.crt"));
  ASSERT_EQ(Probe(*old_client), absl::StatusCode::kNotFound);
  auto new_client = TlsClient(*server, pki_.Path("ca2.crt"));
  ASSERT_EQ(Probe(*new_client), absl::StatusCode::kUnavailable);

  install("server2");
  kill(server->pid(), SIGHUP);  // logs whether the new files are usable
  absl::StatusCode code = absl::StatusCode::kUnavailable;
  for (absl::Time deadline = absl::Now() + absl::Seconds(15);
       code != absl::StatusCode::kNotFound && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(250));
    new_client = TlsClient(*server, pki_.Path("ca2.crt"));
    code = Probe(*new_client);
  }
  EXPECT_EQ(code, absl::StatusCode::kNotFound) << "the new certificate was never served";
  EXPECT_EQ(scraped_expiry(), expiry_of(pki_.Path("server2.crt")));
  // Same process; the connection made before the rotation still works.
  EXPECT_EQ(Probe(*old_client), absl::StatusCode::kNotFound);
  EXPECT_NE(server->ReadLog().find("SIGHUP: TLS files are valid"), std::string::npos)
      << server->ReadLog();
}

TEST_F(SecurityTest, TheHealthPortAnswersProbesInPlaintextAndNothingElse) {
  auto server = ServerProcess::Start(
      data_.path(),
      {"--tls_cert_file=" + pki_.Path("server1.crt"), "--tls_key_file=" + pki_.Path("server1.key"),
       "--tls_client_ca_file=" + pki_.Path("ca1.crt"), "--health_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->health_port(), 0);
  auto health = BloomClient::Connect(absl::StrCat("127.0.0.1:", server->health_port()));
  absl::StatusOr<bool> serving = health->Serving();
  ASSERT_OK(serving.status());
  EXPECT_TRUE(*serving);
  EXPECT_EQ(Probe(*health), absl::StatusCode::kUnimplemented);
}

// Token roles: every RPC with no token, a wrong token, a read token and a write token.
TEST_F(SecurityTest, TokensAndRolesGateEveryRpc) {
  bloomtest::TempDir secrets;
  const std::string tokens = secrets.path() + "/tokens";
  std::ofstream(tokens) << absl::StrCat(bloomtest::TokenDigest("reader-token"),
                                        " read dashboards\n",
                                        bloomtest::TokenDigest("writer-token"), " write ingest\n");
  auto server = ServerProcess::Start(data_.path(), {"--auth_token_file=" + tokens});
  ASSERT_NE(server, nullptr);

  auto client = [&](const std::string& token) {
    ClientOptions options;
    options.timeout = absl::Seconds(5);
    options.token = token;
    return BloomClient::Connect(server->target(), options);
  };
  auto none = client(""), wrong = client("guess"), reader = client("reader-token"),
       writer = client("writer-token");
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1000);
  spec.set_error_rate(0.01);
  ASSERT_OK(writer->Reserve("f", spec).status());
  ASSERT_OK(writer->Add("f", {"a"}).status());
  std::stringstream dump;
  ASSERT_OK(writer->Export("f", dump));
  bloom::v1::FilterSpec cuckoo = spec;
  cuckoo.set_kind(bloom::v1::FILTER_KIND_CUCKOO);
  ASSERT_OK(writer->Reserve("c", cuckoo).status());
  ASSERT_OK(writer->Add("c", {"a", "a", "a"}).status());

  using Code = absl::StatusCode;
  struct Rpc {
    const char* name;
    bool writes;
    std::function<Code(BloomClient&)> call;
  };
  const std::vector<Rpc> rpcs = {
      {"Reserve", true, [&](BloomClient& c) { return c.Reserve("g", spec).status().code(); }},
      {"Add", true, [](BloomClient& c) { return c.Add("f", {"b"}).status().code(); }},
      {"MightContain", false,
       [](BloomClient& c) { return c.MightContain("f", {"a"}).status().code(); }},
      {"Stats", false, [](BloomClient& c) { return c.Stats("f").status().code(); }},
      {"List", false, [](BloomClient& c) { return c.List().status().code(); }},
      {"Export", false,
       [](BloomClient& c) {
         std::stringstream out;
         return c.Export("f", out).code();
       }},
      {"Import", true,
       [&](BloomClient& c) {
         std::stringstream in(dump.str());
         return c.Import("imported", in).status().code();
       }},
      {"Reserve like", true,
       [](BloomClient& c) { return c.ReserveLike("h", "f").status().code(); }},
      {"Merge", true, [](BloomClient& c) { return c.Merge("h", {"f"}).status().code(); }},
      {"Remove", true, [](BloomClient& c) { return c.Remove("c", {"a"}).status().code(); }},
      {"Count", false, [](BloomClient& c) { return c.Count("c", {"a"}).status().code(); }},
      {"Delete", true, [](BloomClient& c) { return c.Delete("g").code(); }},
  };
  for (const Rpc& rpc : rpcs) {
    SCOPED_TRACE(rpc.name);
    EXPECT_EQ(rpc.call(*none), Code::kUnauthenticated);
    EXPECT_EQ(rpc.call(*wrong), Code::kUnauthenticated);
    EXPECT_EQ(rpc.call(*reader), rpc.writes ? Code::kPermissionDenied : Code::kOk);
    EXPECT_EQ(rpc.call(*writer), Code::kOk);
  }
  // Health stays open for probes.
  absl::StatusOr<bool> serving = none->Serving();
  ASSERT_OK(serving.status());
  EXPECT_TRUE(*serving);
  // Refusals are logged, tokens never.
  const std::string log = server->ReadLog();
  EXPECT_NE(log.find("refused"), std::string::npos) << log;
  EXPECT_EQ(log.find("guess"), std::string::npos) << log;
  EXPECT_EQ(log.find("reader-token"), std::string::npos) << log;
}

// The calls that change the cluster need the admin role: a write token cannot move the
// primary, change the shard map (which could give a slot to a group holding none of its
// filters), or hold and read a slot move's journals.
TEST_F(SecurityTest, OnlyAdminTokensChangeTheCluster) {
  bloomtest::TempDir secrets;
  const std::string tokens = secrets.path() + "/tokens";
  std::ofstream(tokens) << absl::StrCat(bloomtest::TokenDigest("writer-token"), " write ingest\n",
                                        bloomtest::TokenDigest("admin-token"), " admin ops\n");
  auto server = ServerProcess::Start(data_.path(), {"--auth_token_file=" + tokens});
  ASSERT_NE(server, nullptr);
  namespace v1 = bloom::replication::v1;
  auto stub = v1::ReplicationService::NewStub(
      grpc::CreateChannel(server->target(), grpc::InsecureChannelCredentials()));
  using Call = std::function<grpc::Status(grpc::ClientContext&)>;
  const std::vector<std::pair<std::string, Call>> calls = {
      {"Switchover",
       [&](grpc::ClientContext& context) {
         v1::SwitchoverRequest request;
         v1::SwitchoverResponse response;
         return stub->Switchover(&context, request, &response);
       }},
      {"ChangeShardMap",
       [&](grpc::ClientContext& context) {
         v1::ChangeShardMapRequest request;
         request.set_add_group("bloom/g9");
         v1::ChangeShardMapResponse response;
         return stub->ChangeShardMap(&context, request, &response);
       }},
      {"ReadJournal",
       [&](grpc::ClientContext& context) {
         v1::ReadJournalRequest request;
         request.add_cursors()->set_name("f");
         v1::ReadJournalResponse response;
         return stub->ReadJournal(&context, request, &response);
       }},
      {"ApplyJournal",
       [&](grpc::ClientContext& context) {
         v1::ApplyJournalRequest request;
         request.add_deltas()->set_name("f");
         v1::ApplyJournalResponse response;
         return stub->ApplyJournal(&context, request, &response);
       }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    grpc::ClientContext as_writer;
    as_writer.AddMetadata("authorization", "Bearer writer-token");
    const grpc::Status refused = call(as_writer);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_NE(refused.error_message().find("needs a token with role admin"), std::string::npos)
        << refused.error_message();
    // An admin token gets past the gate (this lone, unsharded pod then refuses for its own
    // reasons, or answers).
    grpc::ClientContext as_admin;
    as_admin.AddMetadata("authorization", "Bearer admin-token");
    const grpc::Status admitted = call(as_admin);
    EXPECT_NE(admitted.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << admitted.error_message();
    EXPECT_NE(admitted.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // A slot mover's calls (the bloom-shard-move header reaches a group's copy of a slot moving
  // to it, which the move replaces) are refused to a write token as their headers arrive.
  auto filters = bloom::v1::BloomFilterService::NewStub(
      grpc::CreateChannel(server->target(), grpc::InsecureChannelCredentials()));
  for (const char* token : {"writer-token", "admin-token"}) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    context.AddMetadata("bloom-shard-move", "1");
    bloom::v1::AddRequest add;
    add.set_name("moved");
    add.add_items("x");
    add.mutable_create_if_missing()->set_capacity(1000);
    add.mutable_create_if_missing()->set_error_rate(0.01);
    bloom::v1::AddResponse added;
    const grpc::Status status = filters->Add(&context, add, &added);
    if (std::string(token) == "writer-token") {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
      EXPECT_NE(status.error_message().find("needs a token with role admin"), std::string::npos)
          << status.error_message();
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
  }
  // And an admin token may do what a write token may.
  ClientOptions options;
  options.token = "admin-token";
  auto admin = BloomClient::Connect(server->target(), options);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1000);
  spec.set_error_rate(0.01);
  EXPECT_OK(admin->Add("f", {"a"}, &spec).status());
}

TEST_F(SecurityTest, TokenFileChangesApplyWithoutARestart) {
  bloomtest::TempDir secrets;
  const std::string tokens = secrets.path() + "/tokens";
  auto write_tokens = [&](const std::string& token, const char* role) {
    std::ofstream(tokens + ".new") << bloomtest::TokenDigest(token) << " " << role << "\n";
    ASSERT_EQ(std::rename((tokens + ".new").c_str(), tokens.c_str()), 0);
  };
  write_tokens("first", "write");
  auto server = ServerProcess::Start(data_.path(), {"--auth_token_file=" + tokens});
  ASSERT_NE(server, nullptr);
  ClientOptions first_options, second_options;
  first_options.token = "first";
  second_options.token = "second";
  auto first = BloomClient::Connect(server->target(), first_options);
  auto second = BloomClient::Connect(server->target(), second_options);
  EXPECT_EQ(Probe(*first), absl::StatusCode::kNotFound);
  EXPECT_EQ(Probe(*second), absl::StatusCode::kUnauthenticated);

  // A change is noticed by polling (about once a second) ...
  write_tokens("second", "read");
  absl::StatusCode code = absl::StatusCode::kUnauthenticated;
  for (absl::Time deadline = absl::Now() + absl::Seconds(10);
       code == absl::StatusCode::kUnauthenticated && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(100));
    code = Probe(*second);
  }
  EXPECT_EQ(code, absl::StatusCode::kNotFound);
  EXPECT_EQ(Probe(*first), absl::StatusCode::kUnauthenticated);  // revoked

  // ... a broken file keeps the tokens in force and is reported ...
  std::ofstream(tokens) << "not a digest\n";
  kill(server->pid(), SIGHUP);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(Probe(*second), absl::StatusCode::kNotFound);
  EXPECT_NE(server->ReadLog().find("token file not reloaded"), std::string::npos);

  // ... and SIGHUP reloads at once.
  write_tokens("first", "write");
  kill(server->pid(), SIGHUP);
  code = absl::StatusCode::kUnauthenticated;
  for (absl::Time deadline = absl::Now() + absl::Seconds(5);
       code == absl::StatusCode::kUnauthenticated && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(20));
    code = Probe(*first);
  }
  EXPECT_EQ(code, absl::StatusCode::kNotFound);
}

TEST_F(SecurityTest, BadSecuritySettingsFailFastWithAClearMessage) {
  bloomtest::TempDir secrets;
  std::ofstream(secrets.path() + "/tokens") << "secret write\n";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--tls_cert_file=" + pki_.Path("server1.crt"),
        "--tls_key_file=" + pki_.Path("server2.key")},
       "does not belong to the certificate"},
      {{"--tls_cert_file=" + pki_.Path("server1.crt")}, "both a certificate file and a key file"},
      {{"--tls_cert_file=" + pki_.Path("missing.crt"),
        "--tls_key_file=" + pki_.Path("server1.key")},
       "cannot read the TLS certificate file"},
      {{"--tls_cert_file=" + pki_.Path("server1.key"),
        "--tls_key_file=" + pki_.Path("server1.key")},
       "holds no PEM certificate"},
      {{"--tls_client_ca_file=" + pki_.Path("ca1.crt")}, "needs --tls_cert_file"},
      {{"--auth_token_file=" + secrets.path() + "/tokens"}, "line 1: the first field must be"},
      {{"--auth_token_file=" + secrets.path() + "/absent"}, "token file"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--listen=127.0.0.1:0", "--data_dir=" + data_.path()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    std::string output;
    EXPECT_EQ(ServerProcess::RunToExit(args, &output), 1) << output;
    EXPECT_NE(output.find(c.message), std::string::npos) << c.message << "\n" << output;
  }
}

TEST_F(SecurityTest, NonLoopbackWithoutTlsOrAuthWarns) {
  auto server = ServerProcess::Start(data_.path(), {"--listen=0.0.0.0:0"});
  ASSERT_NE(server, nullptr);
  const std::string log = server->ReadLog();
  EXPECT_NE(log.find("without TLS"), std::string::npos) << log;
  EXPECT_NE(log.find("without authentication"), std::string::npos) << log;

  bloomtest::TempDir data2;
  auto local = ServerProcess::Start(data2.path());
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local->ReadLog().find("without TLS"), std::string::npos);
}

// Transport guards: an oversized request is refused with RESOURCE_EXHAUSTED (nothing
// allocated for it beyond gRPC's read), and the server goes on serving.
TEST_F(SecurityTest, OversizedRequestsAreRefusedAndTheServerServesOn) {
  auto server = ServerProcess::Start(data_.path(),
                                     {"--max_message_bytes=64Ki", "--max_concurrent_streams=4"});
  ASSERT_NE(server, nullptr);
  auto client = BloomClient::Connect(server->target());
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1000);
  spec.set_error_rate(0.01);
  ASSERT_OK(client->Reserve("f", spec).status());
  const std::vector<std::string> big(1, std::string(100 << 10, 'x'));
  absl::Status refused = client->Add("f", big).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  // Calls within the limits still work, also many at once on one connection (gRPC queues
  // streams beyond max_concurrent_streams instead of failing them).
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      if (client->Add("f", {absl::StrCat("item-", i)}).ok()) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 16);
  absl::StatusOr<std::vector<bool>> present = client->MightContain("f", {"item-3", "item-15"});
  ASSERT_OK(present.status());
  EXPECT_EQ(*present, std::vector<bool>({true, true}));
}

}  // namespace

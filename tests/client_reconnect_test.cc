// BloomClient after the server restarts on the same address, unary and pipelined: the client is
// back as soon as the server serves again, without waiting for gRPC's backup poller.
//
// Why this needs a test of its own: with a fail-fast call, gRPC (C-core, 1.51) keeps a channel
// in TRANSIENT_FAILURE until a new connection is READY, and every call in between fails at
// once without polling the channel's sockets. Nothing then reads the restarted server's
// handshake but the backup poller, every 5 seconds by default (grpc/grpc#28866), so a client
// relying on it is 5 to 15 seconds late. This binary turns the backup poller off, so a client
// that depends on it never reconnects and the test fails.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

// Before main(), so before gRPC reads its configuration.
const int kNoBackupPolling = setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "0", 1);

using bloomclient::BloomClient;
using bloomclient::ClientOptions;
using bloomtest::ServerProcess;

bloom::v1::FilterSpec Spec() {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1000);
  spec.set_error_rate(0.01);
  return spec;
}

// Calls MightContain every 100 ms until it answers or `limit` passes; returns the last result.
absl::StatusOr<std::vector<bool>> RetryUntilAnswered(BloomClient& client, absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  absl::StatusOr<std::vector<bool>> result = client.MightContain("f", {"before", "never"});
  while (!result.ok() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
    result = client.MightContain("f", {"before", "never"});
  }
  return result;
}

// Kills the server; calls made while it is down fail at once (fail-fast) and leave the
// channel reconnecting, in backoff, with nothing polling it.
void KillAndCallWhileDown(ServerProcess& server, BloomClient& client) {
  server.Kill();
  for (int i = 0; i < 3; ++i) {
    const absl::Time started = absl::Now();
    absl::StatusOr<std::vector<bool>> down = client.MightContain("f", {"before"});
    EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
    EXPECT_LT(absl::Now() - started, absl::Seconds(5)) << "a call to a dead server waited";
    absl::SleepFor(absl::Milliseconds(300));
  }
}

// Unary calls, or the pipelined mode (one Pipeline stream, reopened after a break).
class ClientReconnectTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { ASSERT_EQ(kNoBackupPolling, 0); }
  static ClientOptions Options() {
    ClientOptions options;
    options.pipelined = GetParam();
    return options;
  }
  bloomtest::TempDir data_;
};

// Each restart comes after calls failed while the server was down. The client answers well
// within the limit when it polls its own reconnection; never, without it.
TEST_P(ClientReconnectTest, AFailFastClientReconnectsAfterEachOfSeveralRestarts) {
  auto server = ServerProcess::Start(data_.path());
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  auto client = BloomClient::Connect(server->target(), Options());
  const bloom::v1::FilterSpec spec = Spec();
  ASSERT_OK(client->Add("f", {"before"}, &spec).status());
  for (int restart = 0; restart < 3; ++restart) {
    KillAndCallWhileDown(*server, *client);
    server = ServerProcess::Start(data_.path(), {absl::StrCat("--listen=127.0.0.1:", port)});
    ASSERT_NE(server, nullptr);
    absl::StatusOr<std::vector<bool>> after = RetryUntilAnswered(*client, absl::Seconds(20));
    ASSERT_TRUE(after.ok()) << "after restart " << restart << ": " << after.status();
    EXPECT_EQ(*after, std::vector<bool>({true, false}));
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ClientReconnectTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Pipelined" : "Unary";
                         });

}  // namespace

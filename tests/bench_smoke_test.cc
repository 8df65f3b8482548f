// CI smoke run of bloom-bench (benchmarks are not tests): it drives a real bloom-server and a
// real redis-server for a couple of seconds, verifying answers as it goes: it must work, find
// no false negatives, and report its figures.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloomtest::CommandResult;

CommandResult Shell(const std::string& command) { return bloomtest::RunCommand(command); }

TEST(BenchSmokeTest, BloomServerMixedWorkloadVerifies) {
  bloomtest::TempDir data;
  auto server = bloomtest::ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  const CommandResult run = Shell(absl::StrCat(
      BLOOM_BENCH_PATH, " --target=bloom --address=", server->target(),
      " --duration=2s --clients=4 --batch=500 --mix=both --keys=uniform --key_space=200000",
      " --preload=50000 --server_pid=", server->pid()));
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, "false negatives: 0;")) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, "CPU s per million keys")) << run.out;
  const CommandResult json =
      Shell(absl::StrCat(BLOOM_BENCH_PATH, " --target=bloom --address=", server->target(),
                         " --ops=20000 --batch=1 --clients=8 --json"));
  EXPECT_EQ(json.exit_code, 0) << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"false_negatives\":0")) << json.out;
}

// Counts of cuckoo filters (--count: a count above 0 reads present) verify as checks do, over
// unary calls and through the pipelined client, which sends them on its Pipeline stream.
TEST(BenchSmokeTest, CuckooCountsVerifyOverUnaryCallsAndThePipelinedClient) {
  bloomtest::TempDir data;
  auto server = bloomtest::ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  for (const char* transport : {"unary", "client"}) {
    const CommandResult run =
        Shell(absl::StrCat(BLOOM_BENCH_PATH, " --target=bloom-cuckoo --transport=", transport,
                           " --address=", server->target(),
                           " --ops=20000 --batch=1 --clients=8 --mix=both --count --keys=unique",
                           " --capacity=100000 --error_rate=0.01"));
    EXPECT_EQ(run.exit_code, 0) << transport << ": " << run.out;
    EXPECT_TRUE(absl::StrContains(run.out, "false negatives: 0;")) << transport << ": " << run.out;
  }
}

// The echo floor (bloom-bench --serve_echo) must serve every transport compare.sh drives it
// with. Through the pipelined client it says it packs, so the client sends each batch as one
// message with the rest in `more`: an echo that left `more` unanswered would leave those calls
// waiting for answers until they time out, and the run would fail.
TEST(BenchSmokeTest, EchoFloorServesEveryTransport) {
  bloomtest::TempDir dir;
  const std::string port_file = dir.path() + "/port";
  const pid_t echo = fork();
  if (echo == 0) {
    const std::string serve = "--serve_echo=127.0.0.1:0";
    const std::string port_flag = "--port_file=" + port_file;
    execl(BLOOM_BENCH_PATH, BLOOM_BENCH_PATH, serve.c_str(), port_flag.c_str(), nullptr);
    _exit(127);
  }
  std::string port;
  ASSERT_TRUE(bloomtest::WaitFor([&] {
    port = std::string(absl::StripTrailingAsciiWhitespace(Shell("cat " + port_file).out));
    return !port.empty() && absl::ascii_isdigit(static_cast<unsigned char>(port[0]));
  })) << "the echo server did not start";
  for (const char* transport : {"unary", "pipeline", "client"}) {
    const CommandResult run = Shell(absl::StrCat(
        BLOOM_BENCH_PATH, " --target=bloom --transport=", transport, " --address=127.0.0.1:", port,
        " --duration=1s --clients=20 --batch=1 --mix=both --keys=uniform --key_space=100000",
        " --capacity=1000 --filters=100 --server_pid=", echo));
    EXPECT_EQ(run.exit_code, 0) << transport << ": " << run.out;
    EXPECT_TRUE(absl::StrContains(run.out, "keys/s")) << transport << ": " << run.out;
  }
  kill(echo, SIGTERM);
  waitpid(echo, nullptr, 0);
}

TEST(BenchSmokeTest, RedisBitmapBaselineVerifiesAndBloomModuleIsSkippedCleanly) {
  bloomtest::TempDir dir;
  // A free port: bind, read, close (the race with other processes is acceptable in a test).
  const CommandResult port_out = Shell(
      "/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); "
      "print(s.getsockname()[1])'");
  const std::string port(absl::StripTrailingAsciiWhitespace(port_out.out));
  const pid_t redis = fork();
  if (redis == 0) {
    execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1", "--save",
           "", "--appendonly", "no", "--dir", dir.path().c_str(), nullptr);
    _exit(127);
  }
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    up = Shell(absl::StrCat("redis-cli -p ", port, " ping")).out.find("PONG") != std::string::npos;
    if (!up) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(up) << "redis-server did not start";
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const CommandResult bitmap = Shell(absl::StrCat(
      BLOOM_BENCH_PATH, " --target=redis-bitmap --address=", address,
      " --duration=1s --clients=2 --batch=100 --mix=both --keys=uniform --key_space=100000",
      " --capacity=100000 --preload=5000 --server_pid=", redis));
  EXPECT_EQ(bitmap.exit_code, 0) << bitmap.out;
  EXPECT_TRUE(absl::StrContains(bitmap.out, "false negatives: 0;")) << bitmap.out;
  const CommandResult bf = Shell(
      absl::StrCat(BLOOM_BENCH_PATH, " --target=redis-bf --address=", address, " --duration=1s"));
  EXPECT_EQ(bf.exit_code, 0) << bf.out;  // Debian's Redis has no Bloom module: a clean skip
  EXPECT_TRUE(absl::StrContains(bf.out, "skipped") || absl::StrContains(bf.out, "keys/s"))
      << bf.out;
  kill(redis, SIGKILL);
  waitpid(redis, nullptr, 0);
}

}  // namespace

// bloom-cli against the real server: exit codes, one-line errors, bulk load, JSON.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using Result = bloomtest::CommandResult;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = bloomtest::ServerProcess::Start(data_.path());
    ASSERT_NE(server_, nullptr);
  }
  Result Cli(const std::string& args) {
    return bloomtest::RunCommand(
        absl::StrCat(BLOOM_CLI_PATH, " --server=", server_->target(), " ", args));
  }

  bloomtest::TempDir data_, files_;
  std::unique_ptr<bloomtest::ServerProcess> server_;
};

TEST_F(CliTest, ReserveBulkAddCheckStatsAndErrors) {
  Result r = Cli("reserve ids --capacity=10000 --error-rate=0.001");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "created ids\n");

  const std::string file = files_.path() + "/ids.txt";
  {
    std::ofstream out(file);
    for (int i = 0; i < 25'000; ++i) out << "id-" << i << "\n";
  }
  r = Cli(absl::StrCat("add ids --file=", file));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(absl::StartsWith(r.out, "25000 items: ")) << r.out;
  r = Cli(absl::StrCat("check ids --file=", file));
  EXPECT_EQ(r.out, "25000 items: 25000 maybe present\n");
  r = Cli(absl::StrCat("add ids --file=- < ", file));  // stdin
  EXPECT_EQ(r.out, "25000 items: 0 new\n");

  r = Cli("check ids id-7 never-added");
  EXPECT_EQ(r.out, "id-7\tmaybe\nnever-added\tno\n");
  r = Cli("--json stats ids");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.out, "\"items_added\": \"2")) << r.out;  // uint64 as string
  EXPECT_TRUE(absl::StrContains(r.out, "\"name\": \"ids\"")) << r.out;

  r = Cli("stats missing");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "bloom-cli: NOT_FOUND: filter 'missing' not found\n");
  r = Cli("reserve ids --capacity=5 --error-rate=0.001");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StartsWith(r.out, "bloom-cli: ALREADY_EXISTS")) << r.out;
  r = Cli("frobnicate ids");
  EXPECT_EQ(r.exit_code, 2);
  r = Cli("reserve x --capacity=ten --error-rate=0.1");
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(CliTest, ExportImportListDelete) {
  ASSERT_EQ(Cli("add src a b c --create-capacity=100 --create-error-rate=0.01").exit_code, 0);
  const std::string dump = files_.path() + "/src.dump";
  Result r = Cli(absl::StrCat("export src --out=", dump));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = Cli(absl::StrCat("import dst --in=", dump));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "items_added:           3")) << r.out;
  r = Cli("list");
  EXPECT_TRUE(absl::StrContains(r.out, "dst\titems_added=3")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "src\titems_added=3")) << r.out;
  EXPECT_EQ(Cli("delete src").out, "deleted src\n");
  EXPECT_EQ(Cli("check dst a zzz").out, "a\tmaybe\nzzz\tno\n");
  r = Cli(absl::StrCat("import dst --in=", dump));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StartsWith(r.out, "bloom-cli: ALREADY_EXISTS")) << r.out;
}

// Two shards' filters made alike, and their union (the Merge RPC; storage/filter_merge_test.cc
// tests the union itself).
TEST_F(CliTest, ReserveLikeAndMerge) {
  ASSERT_EQ(Cli("reserve shard-1 --capacity=1000 --error-rate=0.01").exit_code, 0);
  Result r = Cli("reserve shard-2 --like=shard-1");
  EXPECT_EQ(r.out, "created shard-2\n");
  ASSERT_EQ(Cli("reserve all --like=shard-1").exit_code, 0);
  ASSERT_EQ(Cli("add shard-1 a b").exit_code, 0);
  ASSERT_EQ(Cli("add shard-2 c").exit_code, 0);
  r = Cli("merge all shard-1 shard-2");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(absl::StartsWith(r.out, "merged 2 filter(s) into all: about 3 distinct items"))
      << r.out;
  EXPECT_EQ(Cli("check all a b c d").out, "a\tmaybe\nb\tmaybe\nc\tmaybe\nd\tno\n");

  ASSERT_EQ(Cli("reserve stranger --capacity=1000 --error-rate=0.01").exit_code, 0);
  r = Cli("merge all stranger");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StartsWith(r.out,
                               "bloom-cli: FAILED_PRECONDITION: filter 'stranger' hashes "
                               "with another seed"))
      << r.out;
  EXPECT_EQ(Cli("merge all").exit_code, 2);
  EXPECT_EQ(Cli("reserve x --like=shard-1 --capacity=5").exit_code, 2);
  r = Cli("reserve x --like=missing");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StartsWith(r.out, "bloom-cli: NOT_FOUND")) << r.out;
}

// One filter per server, made alike through a dump, united on one server: each exports its
// filter, and `import --merge` ORs the dumps into the one there.
TEST_F(CliTest, CuckooKindRemoveAndCount) {
  ASSERT_EQ(Cli("reserve blocked --capacity=1000 --error-rate=0.01 --kind=cuckoo").exit_code, 0);
  ASSERT_EQ(Cli("add blocked a b b c").exit_code, 0);
  EXPECT_EQ(Cli("count blocked a b z").out, "a\t1\nb\t2\nz\t0\n");
  EXPECT_EQ(Cli("remove blocked a z").out, "a\tremoved\nz\tabsent\n");
  EXPECT_EQ(Cli("check blocked a b").out, "a\tno\nb\tmaybe\n");
  EXPECT_EQ(Cli("--json count blocked b").out, "{\"counts\": [2]}\n");
  EXPECT_EQ(Cli("--json remove blocked b").out, "{\"removed\": [true]}\n");
  Result r = Cli("stats blocked");
  EXPECT_TRUE(absl::StrContains(r.out, "kind:                  cuckoo")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "11-bit fingerprints")) << r.out;
  // Created by an add, removed from a file.
  ASSERT_EQ(
      Cli("add feed --create-capacity=100 --create-error-rate=0.01 --kind=cuckoo x y").exit_code,
      0);
  const std::string file = absl::StrCat(files_.path(), "/gone.txt");
  std::ofstream(file) << "x\nnot-there\n";
  EXPECT_EQ(Cli(absl::StrCat("remove feed --file=", file)).out, "2 items: 1 removed\n");
  ASSERT_EQ(Cli("reserve plain --capacity=1000 --error-rate=0.01").exit_code, 0);
  r = Cli("remove plain a");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StartsWith(r.out, "bloom-cli: FAILED_PRECONDITION: Remove needs a CUCKOO"))
      << r.out;
  EXPECT_EQ(Cli("reserve w --capacity=10 --error-rate=0.01 --kind=quotient").exit_code, 2);
  EXPECT_EQ(Cli("count blocked").exit_code, 2);
}

TEST_F(CliTest, ImportMergeUnitesFiltersExportedFromTwoServers) {
  bloomtest::TempDir other_data;
  std::unique_ptr<bloomtest::ServerProcess> other =
      bloomtest::ServerProcess::Start(other_data.path());
  ASSERT_NE(other, nullptr);
  auto cli_at = [&](const bloomtest::ServerProcess& server, const std::string& args) {
    return bloomtest::RunCommand(
        absl::StrCat(BLOOM_CLI_PATH, " --server=", server.target(), " ", args));
  };
  const std::string empty = files_.path() + "/empty.dump";
  const std::string from_other = files_.path() + "/other.dump";
  ASSERT_EQ(Cli("reserve seen --capacity=1000 --error-rate=0.01").exit_code, 0);
  ASSERT_EQ(Cli(absl::StrCat("export seen --out=", empty)).exit_code, 0);  // before any add
  ASSERT_EQ(cli_at(*other, absl::StrCat("import seen --in=", empty)).exit_code, 0);
  ASSERT_EQ(Cli("add seen here").exit_code, 0);
  ASSERT_EQ(cli_at(*other, "add seen there").exit_code, 0);
  ASSERT_EQ(cli_at(*other, absl::StrCat("export seen --out=", from_other)).exit_code, 0);

  Result r = Cli(absl::StrCat("import seen --in=", from_other));  // no --merge: the name is taken
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StartsWith(r.out, "bloom-cli: ALREADY_EXISTS")) << r.out;
  r = Cli(absl::StrCat("import seen --merge --in=", from_other));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "items_added:           2")) << r.out;
  EXPECT_EQ(Cli("check seen here there elsewhere").out,
            "here\tmaybe\nthere\tmaybe\nelsewhere\tno\n");
  // A name that does not exist yet is created from the dump, with or without --merge.
  r = Cli(absl::StrCat("import fresh --merge --in=", from_other));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Cli("check fresh there").out, "there\tmaybe\n");
  // A dump of a filter not made alike is refused, and changes nothing.
  ASSERT_EQ(cli_at(*other, "reserve stranger --capacity=1000 --error-rate=0.01").exit_code, 0);
  const std::string stranger = files_.path() + "/stranger.dump";
  ASSERT_EQ(cli_at(*other, absl::StrCat("export stranger --out=", stranger)).exit_code, 0);
  r = Cli(absl::StrCat("import seen --merge --in=", stranger));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.out, "FAILED_PRECONDITION")) << r.out;
}

TEST_F(CliTest, WindowAndIdleTtlFlags) {
  Result r =
      Cli("reserve seen --capacity=1000 --error-rate=0.01 --window=7d --window-slices=4 "
          "--idle-ttl=30d");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = Cli("stats seen");
  EXPECT_TRUE(absl::StrContains(r.out, "window:                168h in 4 slices")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "unless used (idle_ttl 720h)")) << r.out;
  r = Cli("--json stats seen");
  EXPECT_TRUE(absl::StrContains(r.out, "\"window\": \"604800s\"")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\"slice_start\"")) << r.out;
  r = Cli("add feed:1 a --create-capacity=100 --create-error-rate=0.01 --window=12h");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(Cli("check feed:1 a").out, "a\tmaybe\n");
  r = Cli("reserve bad --capacity=10 --error-rate=0.01 --window=500ms");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.out, "INVALID_ARGUMENT: spec.window must be")) << r.out;
  EXPECT_EQ(Cli("reserve bad --capacity=10 --error-rate=0.01 --window=soon").exit_code, 2);
}

// hash-token makes the token file's digest; --token-file and $BLOOM_TOKEN send the token.
TEST(CliSecurityTest, HashTokenAndTokenSources) {
  bloomtest::TempDir data, secrets;
  Result hashed = bloomtest::RunCommand(
      absl::StrCat("printf 'cli-secret\\n' | ", BLOOM_CLI_PATH, " hash-token"));
  ASSERT_EQ(hashed.exit_code, 0) << hashed.out;
  // The same digest sha256sum gives for the token without its newline.
  EXPECT_EQ(hashed.out, bloomtest::TokenDigest("cli-secret") + "\n");
  const std::string tokens = secrets.path() + "/tokens", token = secrets.path() + "/token";
  std::ofstream(tokens) << hashed.out.substr(0, 64) << " write cli\n";
  std::ofstream(token) << "cli-secret\n";
  auto server = bloomtest::ServerProcess::Start(data.path(), {"--auth_token_file=" + tokens});
  ASSERT_NE(server, nullptr);
  const std::string cli = absl::StrCat(BLOOM_CLI_PATH, " --server=", server->target(), " ");

  Result anonymous = bloomtest::RunCommand(cli + "list");
  EXPECT_EQ(anonymous.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(anonymous.out, "UNAUTHENTICATED")) << anonymous.out;
  Result from_file = bloomtest::RunCommand(cli + "--token-file=" + token +
                                           " reserve t --capacity=100 --error-rate=0.01");
  EXPECT_EQ(from_file.exit_code, 0) << from_file.out;
  Result from_env = bloomtest::RunCommand("BLOOM_TOKEN=cli-secret " + cli + "add t x");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.out;
  Result health = bloomtest::RunCommand(cli + "health");  // no token needed
  EXPECT_EQ(health.exit_code, 0) << health.out;
  Result missing = bloomtest::RunCommand(cli + "--token-file=/nonexistent list");
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
}

}  // namespace

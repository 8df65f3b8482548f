// bloom-cli against the real server: exit codes, one-line errors, bulk load, JSON.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing.h"
#include "gtest/gtest.h"
#include "tests/server_process.h"

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

}  // namespace

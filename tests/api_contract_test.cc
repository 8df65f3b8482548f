// The API contract, checked mechanically with buf (npm @bufbuild/buf, pinned in protos/):
// `buf lint` passes, `buf breaking` finds nothing against the last release's proto (the commit
// in protos/buf-breaking-baseline) and does find a renumbered field or a changed type; and the
// `buf curl` block of docs/api.md runs against a real server, through reflection only, printing
// what the document says it prints.
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/support/files.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloomtest::CommandResult;
using bloomtest::RunCommand;

const std::string kSource = BLOOM_SOURCE_DIR;
const std::string kBuf = kSource + "/protos/node_modules/.bin/buf";

using bloomtest::ReadFile;

class ApiContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(RunCommand(kBuf + " --version").exit_code, 0)
        << kBuf << " is missing: run scripts/install-client-deps.sh";
  }
};

TEST_F(ApiContractTest, BufLintPasses) {
  CommandResult lint = RunCommand("cd " + kSource + "/protos && " + kBuf + " lint");
  EXPECT_EQ(lint.exit_code, 0) << lint.out;
}

std::string Baseline() {
  for (absl::string_view line : absl::StrSplit(ReadFile(kSource + "/protos/buf-breaking-baseline"),
                                               '\n', absl::SkipWhitespace())) {
    if (!absl::StartsWith(line, "#")) return std::string(absl::StripAsciiWhitespace(line));
  }
  return "";
}

TEST_F(ApiContractTest, NothingBreaksAgainstTheLastRelease) {
  const std::string baseline = Baseline();
  ASSERT_EQ(baseline.size(), 40u) << "protos/buf-breaking-baseline names no commit";
  CommandResult breaking = RunCommand(
      absl::StrCat("cd ", kSource, " && ", kBuf, " breaking protos --against '.git#ref=", baseline,
                   ",subdir=protos'"));
  EXPECT_EQ(breaking.exit_code, 0) << breaking.out;
}

// buf breaking must fail for real breaks: a copy of protos/ with one change each.
TEST_F(ApiContractTest, BufBreakingCatchesRenumberedFieldsAndChangedTypes) {
  const std::string proto = ReadFile(kSource + "/protos/bloom/v1/bloom.proto");
  const std::string config = ReadFile(kSource + "/protos/buf.yaml");
  struct Break {
    std::string from, to, reported;
  };
  for (const Break& change : std::vector<Break>{
           {"bool absent_if_missing = 4;", "bool absent_if_missing = 6;", "absent_if_missing"},
           {"double error_rate = 2;", "float error_rate = 2;", "error_rate"},
           {"rpc Delete(DeleteRequest) returns (DeleteResponse);", "", "Delete"}}) {
    ASSERT_TRUE(absl::StrContains(proto, change.from)) << change.from;
    bloomtest::TempDir copy;
    ASSERT_EQ(RunCommand("mkdir -p " + copy.path() + "/bloom/v1").exit_code, 0);
    std::ofstream(copy.path() + "/buf.yaml") << config;
    std::ofstream(copy.path() + "/bloom/v1/bloom.proto")
        << absl::StrReplaceAll(proto, {{change.from, change.to}});
    CommandResult breaking = RunCommand(absl::StrCat("cd ", copy.path(), " && ", kBuf,
                                                     " breaking . --against ", kSource, "/protos"));
    EXPECT_NE(breaking.exit_code, 0) << "not reported as breaking: " << change.to;
    EXPECT_TRUE(absl::StrContains(breaking.out, change.reported)) << breaking.out;
  }
}

// The buf curl block of docs/api.md, between <!-- buf-curl:begin --> and <!-- buf-curl:end -->:
// each command (continued with a trailing backslash) and the `# =>` lines after it.
struct DocumentedCommand {
  std::string command;
  std::vector<std::string> expected;  // fragments of its output, JSON on one line
};

std::vector<DocumentedCommand> DocumentedBufCurlBlock() {
  const std::string doc = ReadFile(kSource + "/docs/api.md");
  const size_t begin = doc.find("<!-- buf-curl:begin -->");
  const size_t end = doc.find("<!-- buf-curl:end -->");
  std::vector<DocumentedCommand> commands;
  if (begin == std::string::npos || end == std::string::npos) return commands;
  bool continued = false;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(doc).substr(begin, end - begin), '\n')) {
    if (absl::StartsWith(line, "```") || absl::StartsWith(line, "<!--")) continue;
    if (absl::ConsumePrefix(&line, "# => ")) {
      if (!commands.empty()) commands.back().expected.emplace_back(line);
      continue;
    }
    if (continued) {
      commands.back().command += absl::StrCat("\n", line);
    } else if (!line.empty()) {
      commands.push_back({std::string(line), {}});
    }
    continued = absl::EndsWith(line, "\\");
  }
  return commands;
}

// buf curl's pretty-printed JSON on one line: newlines and indentation out, `": "` as `":`.
std::string OneLine(const std::string& output) {
  std::string joined = std::regex_replace(output, std::regex("\n *"), "");
  return absl::StrReplaceAll(joined, {{"\": ", "\":"}});
}

TEST_F(ApiContractTest, DocumentedBufCurlCommandsWork) {
  std::vector<DocumentedCommand> commands = DocumentedBufCurlBlock();
  ASSERT_GE(commands.size(), 10u) << "the buf-curl block of docs/api.md is missing or short";
  bloomtest::TempDir data, work;
  auto server = bloomtest::ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);

  // One shell runs the block (its variables carry over), with markers around each command.
  std::string script = absl::StrCat("cd ", work.path(), "\n");
  int expectations = 0;
  for (size_t i = 0; i < commands.size(); ++i) {
    const std::string command =
        absl::StrReplaceAll(commands[i].command, {{"127.0.0.1:50051", server->target()}});
    absl::StrAppend(&script, "echo '@@begin ", i, "'\n", command, "\necho \"@@end ", i, " $?\"\n");
    expectations += commands[i].expected.size();
  }
  EXPECT_GE(expectations, 12) << "too few `# =>` lines to check the RPCs";
  std::ofstream(work.path() + "/block.sh") << script;
  CommandResult run = RunCommand(absl::StrCat("PATH=", kSource, "/protos/node_modules/.bin:$PATH",
                                              " bash ", work.path(), "/block.sh"));
  for (size_t i = 0; i < commands.size(); ++i) {
    const std::string begin = absl::StrCat("@@begin ", i, "\n");
    const std::string end = absl::StrCat("@@end ", i, " ");
    const size_t from = run.out.find(begin);
    const size_t to = run.out.find(end);
    ASSERT_TRUE(from != std::string::npos && to != std::string::npos && from < to)
        << "command " << i << " did not finish: " << commands[i].command << "\n"
        << run.out;
    const std::string output =
        OneLine(run.out.substr(from + begin.size(), to - from - begin.size()));
    const std::string status =
        run.out.substr(to + end.size(), run.out.find('\n', to) - to - end.size());
    bool error_expected = false;
    for (const std::string& fragment : commands[i].expected) {
      error_expected |= absl::StrContains(fragment, "\"code\":\"");
      EXPECT_TRUE(absl::StrContains(output, fragment))
          << commands[i].command << "\nprinted: " << output << "\nexpected: " << fragment;
    }
    if (!error_expected) {
      EXPECT_EQ(status, "0") << commands[i].command << "\nprinted: " << output;
    }
  }
}

}  // namespace

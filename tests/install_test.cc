// What a user installs (packaging/CMakeLists.txt, client/python/pyproject.toml): with
// `cmake --install` into a fresh prefix, the binaries report the project's version, and a
// program outside this repository builds against the installed C++ client, through
// find_package(BloomClient) and through pkg-config, and talks to a real server; nothing of the
// source tree is on those builds' include paths. The Python wheel installs into a fresh venv and
// runs the example.
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"

namespace {

using bloomtest::CommandResult;
using bloomtest::RunCommand;
using bloomtest::TempDir;

// A user's program: reserve, add, check. Prints what the check answered ("110").
constexpr char kProgram[] = R"(#include <iostream>
#include <string>
#include <vector>

#include "client/bloom_client.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(argv[1]);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1000);
  spec.set_error_rate(0.01);
  absl::StatusOr<bloom::v1::ReserveResponse> reserved = client->Reserve("installed", spec);
  if (!reserved.ok()) {
    std::cerr << reserved.status() << "\n";
    return 1;
  }
  const std::vector<std::string> added = {"alice", "bob"};
  if (absl::StatusOr<std::vector<bool>> result = client->Add("installed", added); !result.ok()) {
    std::cerr << result.status() << "\n";
    return 1;
  }
  const std::vector<std::string> asked = {"alice", "bob", "carol"};
  absl::StatusOr<std::vector<bool>> seen = client->MightContain("installed", asked);
  if (!seen.ok()) {
    std::cerr << seen.status() << "\n";
    return 1;
  }
  for (bool present : *seen) std::cout << (present ? '1' : '0');
  std::cout << "\n";
  return 0;
}
)";

constexpr char kCMakeProject[] = R"(cmake_minimum_required(VERSION 3.22)
project(uses_bloom_client LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(BloomClient 0.1 CONFIG REQUIRED)
add_executable(app main.cc)
target_link_libraries(app PRIVATE BloomClient::bloom_client)
)";

class InstallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Installed() = new TempDir();
    const CommandResult installed =
        RunCommand(absl::StrCat("cmake --install ", BLOOM_BINARY_DIR, " --prefix ", Prefix()));
    ASSERT_EQ(installed.exit_code, 0) << installed.out;
  }
  static void TearDownTestSuite() {
    delete Installed();
    Installed() = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(Installed(), nullptr);
    ASSERT_EQ(RunCommand("test -x " + Prefix() + "/bin/bloom-server").exit_code, 0)
        << "cmake --install failed (see the first test)";
  }
  static std::string Prefix() { return Installed()->path(); }

 private:
  // The install prefix, shared by the suite's tests.
  static TempDir*& Installed() {
    static TempDir* prefix = nullptr;
    return prefix;
  }
};

// Runs the program kProgram was built into against a fresh real server: it must answer "110".
void ExpectTheProgramReadsItsAdds(const std::string& program) {
  TempDir data;
  std::unique_ptr<bloomtest::ServerProcess> server = bloomtest::ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  const CommandResult ran = RunCommand(program + " " + server->target());
  EXPECT_EQ(ran.exit_code, 0) << ran.out;
  EXPECT_EQ(ran.out, "110\n");
}

TEST_F(InstallTest, BinariesReportTheProjectVersion) {
  for (const std::string name : {"bloom-server", "bloom-cli"}) {
    const CommandResult version = RunCommand(absl::StrCat(Prefix(), "/bin/", name, " --version"));
    EXPECT_EQ(version.exit_code, 0) << version.out;
    EXPECT_EQ(version.out, absl::StrCat(name, " ", BLOOM_VERSION, "\n"));
  }
}

TEST_F(InstallTest, AnExternalCMakeProjectFindsTheClientAndTalksToAServer) {
  TempDir project;
  std::ofstream(project.path() + "/CMakeLists.txt") << kCMakeProject;
  std::ofstream(project.path() + "/main.cc") << kProgram;
  const CommandResult built = RunCommand(absl::StrCat(
      "cd ", project.path(), " && cmake -S . -B build -G Ninja -DCMAKE_PREFIX_PATH=", Prefix(),
      " >/dev/null && cmake --build build"));
  ASSERT_EQ(built.exit_code, 0) << built.out;
  // The build used the installed headers, not this repository's.
  const CommandResult flags = RunCommand(
      absl::StrCat("grep -l ", BLOOM_SOURCE_DIR, " ", project.path(), "/build/build.ninja"));
  EXPECT_NE(flags.exit_code, 0) << "the external build refers to the source tree";

  ExpectTheProgramReadsItsAdds(project.path() + "/build/app");
}

TEST_F(InstallTest, PkgConfigBuildsTheSameProgram) {
  TempDir project;
  std::ofstream(project.path() + "/main.cc") << kProgram;
  const std::string pkg_config =
      absl::StrCat("PKG_CONFIG_PATH=", Prefix(), "/", BLOOM_LIBDIR, "/pkgconfig pkg-config");
  const CommandResult version = RunCommand(pkg_config + " --modversion bloom-client");
  ASSERT_EQ(version.exit_code, 0) << version.out;
  EXPECT_EQ(version.out, absl::StrCat(BLOOM_VERSION, "\n"));
  const CommandResult built =
      RunCommand(absl::StrCat("cd ", project.path(), " && c++ -std=c++20 main.cc -o app $(",
                              pkg_config, " --cflags --libs bloom-client)"));
  ASSERT_EQ(built.exit_code, 0) << built.out;

  ExpectTheProgramReadsItsAdds(project.path() + "/app");
}

// client/python as a wheel: built from a copy of the sources it needs (so the tree stays clean),
// installed into a fresh venv that sees Debian's grpcio and protobuf but nothing of this
// repository, and example.py run from outside the repository against a real server.
TEST_F(InstallTest, PythonWheelInstallsIntoAFreshVenvAndRunsTheExample) {
  TempDir work;
  const std::string src = work.path() + "/src";
  const CommandResult built = RunCommand(absl::StrCat(
      "mkdir -p ", src, "/client && cp -r ", BLOOM_SOURCE_DIR, "/client/python ", src,
      "/client/ && cp -r ", BLOOM_SOURCE_DIR, "/protos ", BLOOM_SOURCE_DIR, "/CMakeLists.txt ", src,
      "/ && cd ", src, "/client/python && /usr/bin/python3 -m build --no-isolation --wheel",
      " --outdir ", work.path(), "/dist ."));
  ASSERT_EQ(built.exit_code, 0) << built.out;
  const std::string wheel =
      absl::StrCat(work.path(), "/dist/bloom_client-", BLOOM_VERSION, "-py3-none-any.whl");
  ASSERT_EQ(RunCommand("test -f " + wheel).exit_code, 0) << built.out;
  const CommandResult installed = RunCommand(
      absl::StrCat("/usr/bin/python3 -m venv --system-site-packages ", work.path(), "/venv && ",
                   work.path(), "/venv/bin/pip install --no-deps --no-index ", wheel));
  ASSERT_EQ(installed.exit_code, 0) << installed.out;

  TempDir data;
  std::unique_ptr<bloomtest::ServerProcess> server = bloomtest::ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  const CommandResult ran = RunCommand(absl::StrCat(
      "mkdir ", work.path(), "/run && cp ", BLOOM_SOURCE_DIR, "/client/python/example.py ",
      work.path(), "/run/ && cd ", work.path(), "/run && env -u PYTHONPATH ", work.path(),
      "/venv/bin/python example.py ", server->target()));
  EXPECT_EQ(ran.exit_code, 0) << ran.out;
  EXPECT_NE(ran.out.find("1500: may exist"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("424242: does not exist"), std::string::npos) << ran.out;
  // The module came from the venv, not from a path into this repository.
  const CommandResult where =
      RunCommand(absl::StrCat("cd ", work.path(), " && env -u PYTHONPATH ", work.path(),
                              "/venv/bin/python -c 'import bloom_client, bloom.v1.bloom_pb2 as p; "
                              "print(bloom_client.__file__); print(p.__file__)'"));
  ASSERT_EQ(where.exit_code, 0) << where.out;
  EXPECT_EQ(where.out.find(BLOOM_SOURCE_DIR), std::string::npos) << where.out;
  EXPECT_NE(where.out.find(work.path() + "/venv/"), std::string::npos) << where.out;
}

}  // namespace

// The packages users install, beside install_test.cc's C++ and Python ones:
//  - the Node.js client as `npm pack` makes it, installed into a fresh project and run there;
//  - the Go client module (client/go/go.mod) built offline by the go_build fixture, whose example
//    runs against a real server;
//  - the Java client (client/java/pom.xml) installed by Maven into a fresh local repository, and
//    a Maven project outside the tree (client/java/example) that depends on it by coordinates,
//    built and run against a real server;
//  - the server's .deb (packaging/CMakeLists.txt): what it holds (programs, systemd unit, the
//    bloom user, conffile), lintian without errors, its unit file as systemd reads it, and its
//    programs started from an unpacked copy with the package's own /etc/default settings.
// Each checks that it carries the project's one version (CMakeLists.txt).
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"

namespace {

using bloomtest::CommandResult;
using bloomtest::RunCommand;
using bloomtest::TempDir;

// The example programs guard a cache: 1500 is among the ids added, 424242 is not.
void ExpectTheExampleAnswered(const CommandResult& ran) {
  EXPECT_EQ(ran.exit_code, 0) << ran.out;
  EXPECT_TRUE(absl::StrContains(ran.out, "1500: may exist")) << ran.out;
  EXPECT_TRUE(absl::StrContains(ran.out, "424242: does not exist")) << ran.out;
}

// client/node packed from a copy of what it needs (its prepack script copies bloom.proto in, so
// the tree stays clean), installed from the tarball into a fresh project whose only dependency
// it is, and its example run there, outside this repository.
TEST(PackageTest, NodeTarballInstallsIntoAFreshProjectAndRunsTheExample) {
  TempDir work;
  const std::string src = work.path() + "/src";
  const CommandResult packed = RunCommand(
      absl::StrCat("mkdir -p ", src, "/client/node ", src, "/protos/bloom && cd ", BLOOM_SOURCE_DIR,
                   "/client/node && cp *.js *.d.ts package.json ", src, "/client/node/ && cp -r ",
                   BLOOM_SOURCE_DIR, "/protos/bloom/v1 ", src, "/protos/bloom/ && cd ", src,
                   "/client/node && npm pack --silent --pack-destination ", work.path()));
  ASSERT_EQ(packed.exit_code, 0) << packed.out;
  const std::string tarball =
      absl::StrCat(work.path(), "/bloom-server-client-", BLOOM_VERSION, ".tgz");
  const CommandResult listed = RunCommand("tar tzf " + tarball);
  ASSERT_EQ(listed.exit_code, 0) << packed.out << listed.out;
  for (const char* file :
       {"package/index.js", "package/index.d.ts", "package/pipeline.js", "package/items.js",
        "package/shards.js", "package/protos/bloom/v1/bloom.proto"}) {
    EXPECT_TRUE(absl::StrContains(listed.out, file)) << file << " missing from\n" << listed.out;
  }
  EXPECT_FALSE(absl::StrContains(listed.out, "package/test/")) << listed.out;
  EXPECT_FALSE(absl::StrContains(listed.out, "polyglot")) << listed.out;

  // From npm's cache (scripts/install-client-deps.sh filled it) where it can.
  const std::string app = work.path() + "/app";
  const CommandResult installed = RunCommand(absl::StrCat(
      "mkdir ", app, " && cd ", app, " && echo '{\"name\": \"app\", \"private\": true}' >",
      " package.json && npm install --silent --prefer-offline --no-audit --no-fund ", tarball));
  ASSERT_EQ(installed.exit_code, 0) << installed.out;

  TempDir data;
  std::unique_ptr<bloomtest::ServerProcess> server = bloomtest::ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  ExpectTheExampleAnswered(
      RunCommand(absl::StrCat("cp ", BLOOM_SOURCE_DIR, "/client/node/example.js ", app, "/ && cd ",
                              app, " && node example.js ", server->target())));
  // The client came from the installed package, not from this repository.
  const CommandResult where = RunCommand(
      absl::StrCat("cd ", app, " && node -p \"require.resolve('@bloom-server/client') + ' ' + ",
                   "require('@bloom-server/client/package.json').version\""));
  ASSERT_EQ(where.exit_code, 0) << where.out;
  EXPECT_EQ(where.out,
            absl::StrCat(app, "/node_modules/@bloom-server/client/index.js ", BLOOM_VERSION, "\n"));
}

// The go_build fixture built client/go as a module, offline, against the committed stubs
// (client/go/build.sh; the go_stubs test checks they are current). Its example runs here.
TEST(PackageTest, GoModuleExampleTalksToAServer) {
  const std::string module = absl::StrCat(BLOOM_BINARY_DIR, "/go/module");
  const CommandResult listed = RunCommand(
      absl::StrCat("cd ", module, " && GOFLAGS=-mod=vendor GOPROXY=off GOCACHE=", BLOOM_BINARY_DIR,
                   "/go/cache GOPATH=", BLOOM_BINARY_DIR, "/go/path go list -m"));
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  EXPECT_EQ(listed.out, "github.com/bloom-server/bloom-server/client/go\n");

  TempDir data;
  std::unique_ptr<bloomtest::ServerProcess> server = bloomtest::ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  ExpectTheExampleAnswered(
      RunCommand(absl::StrCat(BLOOM_BINARY_DIR, "/go/bin/example ", server->target())));
}

// Maven, offline, installs client/java into a fresh local repository, taking its dependencies from
// Debian's /usr/share/maven-repo through a file:// mirror (the only remote offline Maven is let
// reach here); then a copy of client/java/example, whose only dependency is
// io.bloomserver:bloom-client at the project's version, builds from that repository alone and
// runs against a server. The jar lands under the project's version: a pom with another fails.
TEST(PackageTest, JavaClientInstallsIntoAFreshRepositoryAndAnOutsideProjectUsesIt) {
  TempDir work;
  const std::string repo = work.path() + "/m2", settings = work.path() + "/settings.xml";
  std::ofstream(settings)
      << "<settings><mirrors><mirror><id>debian</id><mirrorOf>*</mirrorOf>"
         "<url>file:///usr/share/maven-repo</url></mirror></mirrors></settings>\n";
  const std::string mvn =
      absl::StrCat("mvn -o -q -B -Dstyle.color=never -s ", settings,
                   " -Daether.offline.protocols=file -Dmaven.repo.local=", repo);
  const CommandResult installed = RunCommand(
      absl::StrCat(mvn, " -f ", BLOOM_SOURCE_DIR, "/client/java/pom.xml",
                   " -Dbloom.build.directory=", work.path(), "/client install -DskipTests"));
  ASSERT_EQ(installed.exit_code, 0) << installed.out;
  const std::string jar = absl::StrCat(repo, "/io/bloomserver/bloom-client/", BLOOM_VERSION,
                                       "/bloom-client-", BLOOM_VERSION, ".jar");
  ASSERT_TRUE(std::ifstream(jar).good())
      << jar << " missing: client/java/pom.xml's version is not the project's, " << BLOOM_VERSION;
  const CommandResult listed = RunCommand("unzip -l " + jar);
  ASSERT_EQ(listed.exit_code, 0) << listed.out;
  for (const char* file :
       {"io/bloomserver/client/BloomClient.class", "io/bloomserver/client/RemoteBloomFilter.class",
        "io/bloomserver/bloom/v1/BloomFilterServiceGrpc.class"}) {
    EXPECT_TRUE(absl::StrContains(listed.out, file)) << file << " missing from\n" << listed.out;
  }
  EXPECT_FALSE(absl::StrContains(listed.out, "Polyglot")) << "test code in the jar";

  const std::string app = work.path() + "/app";
  const CommandResult built =
      RunCommand(absl::StrCat("cp -r ", BLOOM_SOURCE_DIR, "/client/java/example ", app, " && cd ",
                              app, " && ", mvn, " -Dbloom.client.version=", BLOOM_VERSION,
                              " package dependency:build-classpath -Dmdep.outputFile=classpath"));
  ASSERT_EQ(built.exit_code, 0) << built.out;
  const CommandResult classpath = RunCommand("cat " + app + "/classpath");
  EXPECT_TRUE(absl::StrContains(classpath.out, jar)) << classpath.out;

  TempDir data;
  std::unique_ptr<bloomtest::ServerProcess> server = bloomtest::ServerProcess::Start(data.path());
  ASSERT_NE(server, nullptr);
  ExpectTheExampleAnswered(
      RunCommand(absl::StrCat("cd ", app, " && java -cp target/classes:$(cat ",
                              "classpath) example.CacheGuard ", server->target())));
}

class DebianPackageTest : public ::testing::Test {
 protected:
  // One .deb for the suite: cpack strips and packs the build's programs.
  static void SetUpTestSuite() {
    Work() = new TempDir();
    const CommandResult packed = RunCommand(absl::StrCat("cpack --config ", BLOOM_BINARY_DIR,
                                                         "/CPackConfig.cmake -B ", Work()->path()));
    Packed() = packed.exit_code == 0 ? "" : packed.out;
  }
  static void TearDownTestSuite() {
    delete Work();
    Work() = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(Packed(), "") << "cpack failed";
    ASSERT_EQ(RunCommand("test -f " + Deb()).exit_code, 0) << "no " << Deb();
  }
  static std::string Deb() {
    return absl::StrCat(Work()->path(), "/bloom-server_", BLOOM_VERSION, "_amd64.deb");
  }

 private:
  static TempDir*& Work() {
    static TempDir* work = nullptr;
    return work;
  }
  static std::string& Packed() {  // cpack's output if it failed
    static std::string out;
    return out;
  }
};

TEST_F(DebianPackageTest, HoldsTheProgramsTheUnitAndTheUserCreation) {
  const CommandResult info = RunCommand("dpkg-deb --info " + Deb());
  ASSERT_EQ(info.exit_code, 0) << info.out;
  EXPECT_TRUE(absl::StrContains(info.out, " Package: bloom-server\n")) << info.out;
  EXPECT_TRUE(absl::StrContains(info.out, absl::StrCat(" Version: ", BLOOM_VERSION, "\n")))
      << info.out;
  // dpkg-shlibdeps found the runtime libraries.
  for (const char* library : {"librocksdb", "libgrpc++", "libprotobuf", "libabsl"}) {
    EXPECT_TRUE(absl::StrContains(info.out, library)) << library << " not in Depends:\n"
                                                      << info.out;
  }
  const CommandResult postinst = RunCommand("dpkg-deb --info " + Deb() + " postinst");
  EXPECT_TRUE(absl::StrContains(postinst.out, "adduser --system --group")) << postinst.out;
  const CommandResult conffiles = RunCommand("dpkg-deb --info " + Deb() + " conffiles");
  EXPECT_EQ(conffiles.out, "/etc/default/bloom-server\n");

  const CommandResult contents = RunCommand("dpkg-deb --contents " + Deb());
  ASSERT_EQ(contents.exit_code, 0) << contents.out;
  for (const char* file :
       {"./usr/bin/bloom-server", "./usr/bin/bloom-cli",
        "./lib/systemd/system/bloom-server.service", "./etc/default/bloom-server",
        "./usr/share/doc/bloom-server/copyright", "./usr/share/doc/bloom-server/changelog.gz"}) {
    EXPECT_TRUE(absl::StrContains(contents.out, file)) << file << " missing from\n" << contents.out;
  }
  // The server package carries no client library or headers.
  EXPECT_FALSE(absl::StrContains(contents.out, "include/")) << contents.out;
}

// Warnings left: no-manual-page (the programs' --help is their manual).
TEST_F(DebianPackageTest, LintianFindsNoErrors) {
  const CommandResult lintian = RunCommand("lintian --fail-on error " + Deb());
  EXPECT_EQ(lintian.exit_code, 0) << lintian.out;
  EXPECT_FALSE(absl::StrContains(lintian.out, "\nE: ")) << lintian.out;
}

// Unpacked into a throwaway root: systemd reads the unit without complaint (only that
// /usr/bin/bloom-server is not installed on this machine), every BLOOM_* variable that
// /etc/default/bloom-server sets or shows is a real server flag, and the unpacked programs, with
// those settings, serve and answer.
TEST_F(DebianPackageTest, UnpackedProgramsServeWithTheDefaultSettings) {
  TempDir root;
  ASSERT_EQ(RunCommand(absl::StrCat("dpkg-deb -x ", Deb(), " ", root.path())).exit_code, 0);

  if (RunCommand("command -v systemd-analyze").exit_code == 0) {
    const CommandResult verified = RunCommand(absl::StrCat(
        "systemd-analyze verify ", root.path(), "/lib/systemd/system/bloom-server.service"));
    for (absl::string_view line : absl::StrSplit(verified.out, '\n', absl::SkipEmpty())) {
      EXPECT_TRUE(absl::StrContains(line, "/usr/bin/bloom-server is not executable")) << line;
    }
  }

  const std::string server = root.path() + "/usr/bin/bloom-server";
  const CommandResult help = RunCommand(server + " --helpfull");
  std::ifstream defaults(root.path() + "/etc/default/bloom-server");
  std::string line;
  int variables = 0;
  while (std::getline(defaults, line)) {
    const size_t start = line.find("BLOOM_");
    const size_t equals = line.find('=');
    if (start > 1 || equals == std::string::npos) continue;  // "BLOOM_X=" or "#BLOOM_X="
    std::string flag = absl::AsciiStrToLower(line.substr(start + 6, equals - start - 6));
    EXPECT_TRUE(absl::StrContains(help.out, absl::StrCat("-", flag, " ")) ||
                absl::StrContains(help.out, absl::StrCat("-", flag, ")")))
        << line << ": no --" << flag << " flag";
    ++variables;
  }
  EXPECT_GE(variables, 5);

  TempDir run;
  const CommandResult served = RunCommand(absl::StrCat(
      "cd ", run.path(), " && set -a && . ", root.path(), "/etc/default/bloom-server && set +a",
      " && BLOOM_DATA_DIR=", run.path(), "/data BLOOM_LISTEN=127.0.0.1:0 BLOOM_PORT_FILE=port ",
      server, " >server.log 2>&1 & pid=$!; cd ", run.path(),
      " && for i in $(seq 100); do [ -s port ] && break; sleep 0.1; done;", " cli=\"", root.path(),
      "/usr/bin/bloom-cli --server=127.0.0.1:$(cat port)\";",
      " $cli reserve packaged --capacity=1000 --error-rate=0.01 && $cli add packaged alice &&",
      " $cli check packaged alice carol; status=$?; kill -TERM $pid; wait $pid;",
      " echo exit=$?; exit $status"));
  EXPECT_EQ(served.exit_code, 0) << served.out;
  EXPECT_TRUE(absl::StrContains(served.out, "maybe")) << served.out;
  EXPECT_TRUE(absl::StrContains(served.out, "no")) << served.out;
  EXPECT_TRUE(absl::StrContains(served.out, "exit=0")) << served.out;
}

}  // namespace

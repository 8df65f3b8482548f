// The container image cannot be built here (no Docker engine), so check what it depends on:
// every shared library of bloom-server and bloom-cli comes from a package in
// scripts/runtime-packages.txt, and the Dockerfile uses the scripts and paths this build has.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/support/files.h"
#include "tests/support/testing.h"

namespace {

std::string Shell(const std::string& command) { return bloomtest::RunCommand(command).out; }

using bloomtest::ReadFile;

std::set<std::string> RuntimePackages() {
  std::set<std::string> packages;
  for (absl::string_view line :
       absl::StrSplit(ReadFile(absl::StrCat(BLOOM_SOURCE_DIR, "/scripts/runtime-packages.txt")),
                      '\n', absl::SkipWhitespace())) {
    if (!absl::StartsWith(line, "#"))
      packages.insert(std::string(absl::StripAsciiWhitespace(line)));
  }
  return packages;
}

// The Debian package owning `library`; dpkg may record it under /lib or /usr/lib (merged /usr).
std::string OwningPackage(const std::string& library) {
  for (const std::string& path :
       {library, absl::StrCat("/usr", library), std::string(absl::StripPrefix(library, "/usr"))}) {
    const bloomtest::CommandResult owner =
        bloomtest::RunCommand(absl::StrCat("dpkg -S '", path, "'"));
    if (owner.exit_code == 0) return owner.out.substr(0, owner.out.find(':'));
  }
  return "";
}

TEST(ImageTest, RuntimePackagesCoverEverySharedLibrary) {
  const std::set<std::string> packages = RuntimePackages();
  ASSERT_FALSE(packages.empty());
  for (const char* binary : {BLOOM_SERVER_PATH, BLOOM_CLI_PATH}) {
    const std::string ldd = Shell(absl::StrCat("ldd '", binary, "'"));
    ASSERT_FALSE(absl::StrContains(ldd, "not found")) << ldd;
    int libraries = 0;
    for (absl::string_view line : absl::StrSplit(ldd, '\n', absl::SkipWhitespace())) {
      const size_t arrow = line.find("=> /");
      if (arrow == absl::string_view::npos) continue;
      std::string path(line.substr(arrow + 3));
      path = path.substr(0, path.find(' '));
      const std::string resolved =
          std::string(absl::StripAsciiWhitespace(Shell(absl::StrCat("readlink -f '", path, "'"))));
      const std::string package = OwningPackage(resolved);
      ASSERT_FALSE(package.empty()) << "no Debian package owns " << resolved;
      EXPECT_TRUE(packages.count(package)) << binary << " needs " << resolved << " from " << package
                                           << ", missing in runtime-packages.txt";
      ++libraries;
    }
    EXPECT_GT(libraries, 5) << ldd;
  }
}

TEST(ImageTest, DockerfileWrapsTheScriptsAndRunsUnprivileged) {
  const std::string dockerfile = ReadFile(absl::StrCat(BLOOM_SOURCE_DIR, "/Dockerfile"));
  for (const char* expected :
       {"FROM debian:bookworm-slim AS build", "./scripts/install-deps.sh", "./scripts/build.sh",
        "install-runtime-deps.sh", "/build/server/bloom-server", "/build/client/bloom-cli",
        "USER 10001:10001", "BLOOM_DATA_DIR=/data", "EXPOSE 50051 9090"}) {
    EXPECT_TRUE(absl::StrContains(dockerfile, expected)) << expected;
  }
  // The paths the image copies are where scripts/build.sh puts the binaries.
  EXPECT_TRUE(absl::EndsWith(BLOOM_SERVER_PATH, "/server/bloom-server"));
  EXPECT_TRUE(absl::EndsWith(BLOOM_CLI_PATH, "/client/bloom-cli"));
}

}  // namespace

// The container image cannot be built here (no Docker engine), so check what it depends on:
// every shared library of bloom-server and bloom-cli comes from a package in
// scripts/runtime-packages.txt, and the Dockerfile uses the scripts and paths this build has.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
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

using bloomtest::ReadFile;
using bloomtest::RunCommand;

std::set<std::string> RuntimePackages() {
  std::set<std::string> packages;
  for (absl::string_view line :
       absl::StrSplit(ReadFile(absl::StrCat(BLOOM_SOURCE_DIR, "/scripts/runtime-packages.txt")),
                      '\n', absl::SkipWhitespace())) {
    if (!absl::StartsWith(line, "#")) {
      packages.insert(std::string(absl::StripAsciiWhitespace(line)));
    }
  }
  return packages;
}

// The Debian package owning each of `libraries`, from one dpkg query: each query reads dpkg's
// whole database, a third of a second. dpkg may record a library under /lib or /usr/lib
// (merged /usr), so every form of each path is asked for. A library no package owns is left
// out of the map.
std::map<std::string, std::string> OwningPackages(const std::set<std::string>& libraries) {
  std::map<std::string, std::string> library_of_form;
  for (const std::string& library : libraries) {
    for (const std::string& form : {library, absl::StrCat("/usr", library),
                                    std::string(absl::StripPrefix(library, "/usr"))}) {
      library_of_form.emplace(form, library);
    }
  }
  std::string command = "dpkg -S";
  for (const auto& [form, library] : library_of_form) absl::StrAppend(&command, " '", form, "'");
  // Lines read "package:arch: /path" (or "package-a, package-b: /path" for a directory);
  // forms dpkg does not know are reported on stderr, which fails no line here.
  std::map<std::string, std::string> owners;
  for (absl::string_view line :
       absl::StrSplit(RunCommand(command).out, '\n', absl::SkipWhitespace())) {
    const size_t path_start = line.find(": /");
    if (path_start == absl::string_view::npos) continue;
    const std::string path(line.substr(path_start + 2));
    const auto form = library_of_form.find(path);
    if (form == library_of_form.end()) continue;
    const absl::string_view packages = line.substr(0, path_start);
    const std::string package(packages.substr(0, packages.find_first_of(":,")));
    owners.emplace(form->second, package);
  }
  return owners;
}

TEST(ImageTest, RuntimePackagesCoverEverySharedLibrary) {
  const std::set<std::string> packages = RuntimePackages();
  ASSERT_FALSE(packages.empty());
  std::map<std::string, std::set<std::string>> libraries_of_binary;
  std::set<std::string> libraries;
  for (const char* binary : {BLOOM_SERVER_PATH, BLOOM_CLI_PATH}) {
    const std::string ldd = RunCommand(absl::StrCat("ldd '", binary, "'")).out;
    ASSERT_FALSE(absl::StrContains(ldd, "not found")) << ldd;
    for (absl::string_view line : absl::StrSplit(ldd, '\n', absl::SkipWhitespace())) {
      const size_t arrow = line.find("=> /");
      if (arrow == absl::string_view::npos) continue;
      std::string path(line.substr(arrow + 3));
      path = path.substr(0, path.find(' '));
      const std::string resolved = std::string(
          absl::StripAsciiWhitespace(RunCommand(absl::StrCat("readlink -f '", path, "'")).out));
      libraries_of_binary[binary].insert(resolved);
      libraries.insert(resolved);
    }
    EXPECT_GT(libraries_of_binary[binary].size(), 5u) << ldd;
  }
  const std::map<std::string, std::string> owners = OwningPackages(libraries);
  for (const auto& [binary, needed] : libraries_of_binary) {
    for (const std::string& library : needed) {
      const auto owner = owners.find(library);
      ASSERT_NE(owner, owners.end()) << "no Debian package owns " << library;
      EXPECT_TRUE(packages.count(owner->second))
          << binary << " needs " << library << " from " << owner->second
          << ", missing in runtime-packages.txt";
    }
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

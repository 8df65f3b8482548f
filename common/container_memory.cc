#include "common/container_memory.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace bloomsys {
namespace {

// A cgroup hierarchy this process is in: where it is mounted and which group is ours.
struct Hierarchy {
  bool v2 = false;
  std::string mount_point;  // e.g. /sys/fs/cgroup/memory
  std::string mount_root;   // the group at the mount point, e.g. "/" in a container
  std::string group;        // ours, from /proc/self/cgroup, e.g. /system.slice/x.service
};

// Limits at or above this mean "none": v1 reports an unlimited group as 2^63 rounded down to
// a page.
constexpr uint64_t kNoLimit = 1ULL << 60;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The group of the v2 hierarchy ("0::/path") and of the v1 hierarchy with the memory
// controller ("4:memory:/path", or with others: "7:cpu,memory:/path").
void GroupsFromProcCgroup(absl::string_view proc_cgroup, std::string& v1, std::string& v2) {
  for (absl::string_view line : absl::StrSplit(proc_cgroup, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    if (fields[0] == "0" && fields[1].empty()) {
      v2.assign(fields[2].data(), fields[2].size());
    } else {
      for (absl::string_view controller : absl::StrSplit(fields[1], ',')) {
        if (controller == "memory") v1.assign(fields[2].data(), fields[2].size());
      }
    }
  }
}

// The cgroup mounts of `mountinfo` that can hold a memory limit for `v1_group`/`v2_group`.
std::vector<Hierarchy> MemoryHierarchies(absl::string_view mountinfo, const std::string& v1_group,
                                         const std::string& v2_group) {
  std::vector<Hierarchy> found;
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n', absl::SkipWhitespace())) {
    // "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory"
    std::vector<absl::string_view> halves = absl::StrSplit(line, absl::MaxSplits(" - ", 1));
    if (halves.size() != 2) continue;
    std::vector<absl::string_view> mount = absl::StrSplit(halves[0], ' ');
    std::vector<absl::string_view> filesystem = absl::StrSplit(halves[1], ' ');
    if (mount.size() < 5 || filesystem.size() < 3) continue;
    Hierarchy hierarchy;
    hierarchy.mount_root.assign(mount[3].data(), mount[3].size());
    hierarchy.mount_point.assign(mount[4].data(), mount[4].size());
    if (filesystem[0] == "cgroup2" && !v2_group.empty()) {
      hierarchy.v2 = true;
      hierarchy.group = v2_group;
    } else if (filesystem[0] == "cgroup" && !v1_group.empty()) {
      bool memory = false;
      for (absl::string_view option : absl::StrSplit(filesystem[2], ',')) {
        memory = memory || option == "memory";
      }
      if (!memory) continue;
      hierarchy.group = v1_group;
    } else {
      continue;
    }
    found.push_back(std::move(hierarchy));
  }
  return found;
}

// The limit in one group's directory, if it has one.
absl::optional<uint64_t> LimitIn(const std::string& directory, bool v2) {
  const std::string text = ReadFile(directory + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &bytes) || bytes == 0 ||
      bytes >= kNoLimit) {
    return absl::nullopt;  // "max", absent, unreadable or unlimited
  }
  return bytes;
}

}  // namespace

absl::optional<ContainerMemory> FindCgroupMemoryLimit(absl::string_view proc_cgroup,
                                                      absl::string_view mountinfo,
                                                      const std::string& root) {
  std::string v1_group, v2_group;
  GroupsFromProcCgroup(proc_cgroup, v1_group, v2_group);
  absl::optional<ContainerMemory> smallest;
  for (const Hierarchy& hierarchy : MemoryHierarchies(mountinfo, v1_group, v2_group)) {
    // Our group below the mount: the mount shows the group `mount_root` at `mount_point`. In a
    // cgroup namespace both are "/"; a group outside what is mounted leaves only the mount.
    absl::string_view below = hierarchy.group;
    if (hierarchy.mount_root != "/" && !absl::ConsumePrefix(&below, hierarchy.mount_root)) {
      below = "";
    }
    if (!below.empty() && below.front() != '/') below = "";  // a prefix of a sibling's name
    const std::string top = root + hierarchy.mount_point;
    std::string directory = top + std::string(absl::StripSuffix(below, "/"));
    // This group, then each ancestor up to the mount point.
    while (true) {
      if (absl::optional<uint64_t> limit = LimitIn(directory, hierarchy.v2);
          limit.has_value() && (!smallest.has_value() || *limit < smallest->bytes)) {
        smallest = ContainerMemory{
            *limit, directory + (hierarchy.v2 ? "/memory.max" : "/memory.limit_in_bytes")};
      }
      if (directory.size() <= top.size()) break;
      directory.erase(directory.rfind('/'));
    }
  }
  return smallest;
}

ContainerMemory FindContainerMemory() {
  uint64_t bytes = 0;
  if (const char* env = std::getenv("BLOOM_CONTAINER_MEMORY_BYTES");
      env != nullptr && absl::SimpleAtoi(env, &bytes) && bytes > 0) {
    return {bytes, "$BLOOM_CONTAINER_MEMORY_BYTES"};
  }
  ContainerMemory physical{
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)),
      "physical memory"};
  absl::optional<ContainerMemory> cgroup =
      FindCgroupMemoryLimit(ReadFile("/proc/self/cgroup"), ReadFile("/proc/self/mountinfo"));
  if (cgroup.has_value() && cgroup->bytes < physical.bytes) return *cgroup;
  return physical;
}

}  // namespace bloomsys

#include "common/container_memory.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace bloomsys {
namespace {

// A file tree that mimics /sys/fs/cgroup, with limit files where a test puts them.
class FakeCgroupsTest : public ::testing::Test {
 protected:
  void Write(const std::string& path, const std::string& text) {
    const std::string full = root_.path() + path;
    ASSERT_EQ(bloomtest::RunCommand("mkdir -p " + full.substr(0, full.rfind('/'))).exit_code, 0);
    std::ofstream(full) << text;
  }
  absl::optional<ContainerMemory> Find(const std::string& proc_cgroup,
                                       const std::string& mountinfo) {
    return FindCgroupMemoryLimit(proc_cgroup, mountinfo, root_.path());
  }
  bloomtest::TempDir root_;
};

constexpr char kV1Mounts[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST_F(FakeCgroupsTest, V1GroupDeepBelowTheMountTakesTheSmallestLimitOfItsAncestors) {
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  Write("/sys/fs/cgroup/memory/outer/memory.limit_in_bytes", "4294967296\n");
  Write("/sys/fs/cgroup/memory/outer/inner/memory.limit_in_bytes", "9223372036854771712\n");
  absl::optional<ContainerMemory> found =
      Find("9:name=systemd:/\n4:memory:/outer/inner\n1:cpu:/\n0::/\n", kV1Mounts);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->bytes, 4294967296u);
  EXPECT_EQ(found->source, root_.path() + "/sys/fs/cgroup/memory/outer/memory.limit_in_bytes");

  // The group's own limit, when smaller, wins.
  Write("/sys/fs/cgroup/memory/outer/inner/memory.limit_in_bytes", "1073741824\n");
  found = Find("4:cpu,memory:/outer/inner\n", kV1Mounts);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->bytes, 1073741824u);
}

TEST_F(FakeCgroupsTest, V2SystemdUnitWithMemoryMaxIsFound) {
  const std::string mounts = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n";
  Write("/sys/fs/cgroup/system.slice/memory.max", "max\n");
  Write("/sys/fs/cgroup/system.slice/bloom-server.service/memory.max", "2147483648\n");
  absl::optional<ContainerMemory> found = Find("0::/system.slice/bloom-server.service\n", mounts);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->bytes, 2147483648u);
  EXPECT_EQ(found->source,
            root_.path() + "/sys/fs/cgroup/system.slice/bloom-server.service/memory.max");
}

TEST_F(FakeCgroupsTest, NamespacedContainerReadsTheMountsOwnLimit) {
  // In a cgroup namespace the group is "/" and the mount's root is the container's group.
  const std::string mounts = "30 23 0:26 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
  Write("/sys/fs/cgroup/memory.max", "536870912\n");
  absl::optional<ContainerMemory> found = Find("0::/\n", mounts);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->bytes, 536870912u);
}

TEST_F(FakeCgroupsTest, AMountOfASubtreeStripsItsRootFromTheGroup) {
  const std::string mounts =
      "35 31 0:32 /kubepods/pod1 /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n";
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "3221225472\n");
  Write("/sys/fs/cgroup/memory/ctr/memory.limit_in_bytes", "1610612736\n");
  absl::optional<ContainerMemory> found = Find("4:memory:/kubepods/pod1/ctr\n", mounts);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->bytes, 1610612736u);
}

TEST_F(FakeCgroupsTest, NoLimitAnywhereIsNullopt) {
  Write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  Write("/sys/fs/cgroup/unified/memory.max", "max\n");
  EXPECT_FALSE(Find("4:memory:/\n0::/\n", kV1Mounts).has_value());
  // Garbage in either file is no limit, not a crash.
  EXPECT_FALSE(Find("garbage\n::\n", "nonsense - line\n").has_value());
  EXPECT_FALSE(Find("", "").has_value());
}

TEST(ContainerMemoryTest, TheEnvironmentOverridesAndTheMachineBoundsTheRest) {
  ASSERT_EQ(setenv("BLOOM_CONTAINER_MEMORY_BYTES", "123456789", 1), 0);
  ContainerMemory memory = FindContainerMemory();
  EXPECT_EQ(memory.bytes, 123456789u);
  EXPECT_EQ(memory.source, "$BLOOM_CONTAINER_MEMORY_BYTES");
  ASSERT_EQ(unsetenv("BLOOM_CONTAINER_MEMORY_BYTES"), 0);
  memory = FindContainerMemory();
  EXPECT_GT(memory.bytes, 0u);
  EXPECT_LE(memory.bytes, static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                              static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_FALSE(memory.source.empty());
}

}  // namespace
}  // namespace bloomsys

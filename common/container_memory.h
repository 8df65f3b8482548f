// How much memory this process may use: the smallest memory limit of its own cgroup and of
// every ancestor group, under cgroup v1 and v2, else the machine's physical memory.
//
//   ContainerMemory memory = FindContainerMemory();
//   LogInfo(absl::StrCat("memory: ", memory.bytes, " bytes (", memory.source, ")"));
//
// The process's groups come from /proc/self/cgroup and where each hierarchy is mounted from
// /proc/self/mountinfo, so a limit is found whether or not the process has a cgroup namespace
// of its own: a Kubernetes container (namespaced, its group at the mount's root), a systemd
// unit with MemoryMax= (not namespaced, its group deep below the mount), or a group made by
// hand. A limit set on an ancestor binds the process as much as its own, so every level up to
// the mount is read and the smallest limit wins.
//
// Thread-safety: the functions are thread-safe (they only read files).
#ifndef COMMON_CONTAINER_MEMORY_H_
#define COMMON_CONTAINER_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace bloomsys {

struct ContainerMemory {
  uint64_t bytes = 0;
  // Where `bytes` came from: the limit file's path, the environment variable, or "physical
  // memory".
  std::string source;
};

// The smallest cgroup memory limit (v1 memory.limit_in_bytes, v2 memory.max) of the groups
// named in `proc_cgroup` (the text of /proc/self/cgroup) and their ancestors, found through
// the mounts in `mountinfo` (the text of /proc/self/mountinfo). Paths are read under
// `root` ("" for the real file system; tests pass a directory that mimics one). nullopt when
// no group has a limit.
absl::optional<ContainerMemory> FindCgroupMemoryLimit(absl::string_view proc_cgroup,
                                                      absl::string_view mountinfo,
                                                      const std::string& root = "");

// $BLOOM_CONTAINER_MEMORY_BYTES when set to a positive number (Kubernetes' downward API,
// resourceFieldRef limits.memory); else the smaller of this process's cgroup limit and the
// machine's physical memory.
ContainerMemory FindContainerMemory();

}  // namespace bloomsys

#endif  // COMMON_CONTAINER_MEMORY_H_

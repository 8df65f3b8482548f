// The open-file limit of this process. Every client connection is a descriptor, so the usual
// soft limit of 1,024 would lock new clients out long before memory or CPU run short; the
// server raises it to the hard limit at start-up.
//
// Thread-safety: call once at start-up, before threads that open files.
#ifndef COMMON_OPEN_FILES_H_
#define COMMON_OPEN_FILES_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace bloomsys {

struct OpenFileLimit {
  uint64_t before = 0;  // the soft limit found
  uint64_t now = 0;     // the soft limit in force (the hard limit when raising worked)
};

// Raises the soft RLIMIT_NOFILE to the hard limit. An error when the limits cannot be read or
// set; the limit in force is then unchanged.
absl::StatusOr<OpenFileLimit> RaiseOpenFileLimit();

}  // namespace bloomsys

#endif  // COMMON_OPEN_FILES_H_

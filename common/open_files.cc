#include "common/open_files.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace bloomsys {

absl::StatusOr<OpenFileLimit> RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  OpenFileLimit result{limit.rlim_cur, limit.rlim_cur};
  if (limit.rlim_cur == limit.rlim_max) return result;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(
        absl::StrCat("setrlimit(RLIMIT_NOFILE, ", limit.rlim_max, "): ", std::strerror(errno)));
  }
  result.now = limit.rlim_max;
  return result;
}

}  // namespace bloomsys

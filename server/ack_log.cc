// AckLog (ack_log.h): one write(2) per line.
#include "server/ack_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace server {

absl::StatusOr<std::unique_ptr<AckLog>> AckLog::Open(const std::string& path, std::string pod) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--ack_log=", path, ": cannot open: ", std::strerror(errno)));
  }
  return std::unique_ptr<AckLog>(new AckLog(fd, std::move(pod)));
}

AckLog::~AckLog() { close(fd_); }

void AckLog::BeginTerm(int64_t term, uint64_t start_sequence) {
  bloomsync::BlockingLock lock(&mu_);
  term_.store(term);
  highest_.store(0);
  Append(absl::StrCat("term=", term, " start=", start_sequence, " pod=", pod_, "\n"));
}

void AckLog::Acknowledged(uint64_t sequence) {
  if (sequence <= highest_.load(std::memory_order_relaxed)) return;
  bloomsync::BlockingLock lock(&mu_);
  if (sequence <= highest_.load(std::memory_order_relaxed)) return;
  highest_.store(sequence, std::memory_order_relaxed);
  Append(absl::StrCat("term=", term_.load(), " acked=", sequence, " pod=", pod_, "\n"));
}

void AckLog::Settled(uint32_t slot, uint64_t version, const std::string& group) {
  bloomsync::BlockingLock lock(&mu_);
  if (!settled_.emplace(version, slot).second) return;
  Append(absl::StrCat("shard version=", version, " slot=", slot, " group=", group, " pod=", pod_,
                      "\n"));
}

void AckLog::Append(const std::string& line) {
  // A short line in one write(2) with O_APPEND is never interleaved with another.
  if (write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    bloomlog::LogWarning(absl::StrCat("--ack_log: write failed: ", std::strerror(errno)));
  }
}

}  // namespace server

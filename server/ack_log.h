// AckLog: --ack_log, what a primary elected through etcd acknowledged, by term, for checkers
// of failover (tests/failover_chaos_test.cc). Lines are appended, each with one write(2) on a
// file opened with O_APPEND, so that a line written survives kill -9 of the process:
//
//   term=42 start=1200 pod=pod-1     this pod leads term 42, holding sequence 1200 at takeover
//   term=42 acked=1275 pod=pod-1     it acknowledged a write covering sequence 1275
//
// An acked line is written before the write it covers is answered, and only for a sequence
// higher than any before in the term, so the log holds every term's highest acknowledged
// sequence at the cost of a write(2) per new highest.
//
// Thread-safety: Acknowledged() is thread-safe; BeginTerm() is called between terms, when no
// write is being acknowledged.
#ifndef SERVER_ACK_LOG_H_
#define SERVER_ACK_LOG_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/blocking_mutex.h"

namespace server {

class AckLog {
 public:
  // Opens (creating, or appending to) the file at `path`; `pod` names this pod in each line.
  static absl::StatusOr<std::unique_ptr<AckLog>> Open(const std::string& path, std::string pod);
  ~AckLog();
  AckLog(const AckLog&) = delete;
  AckLog& operator=(const AckLog&) = delete;

  void BeginTerm(int64_t term, uint64_t start_sequence);
  void Acknowledged(uint64_t sequence);

 private:
  AckLog(int fd, std::string pod) : fd_(fd), pod_(std::move(pod)) {}
  void Append(const std::string& line);

  const int fd_;
  const std::string pod_;
  std::atomic<int64_t> term_{0};
  std::atomic<uint64_t> highest_{0};  // this term's highest logged
  bloomsync::BlockingMutex mu_;       // orders the acked lines
};

}  // namespace server

#endif  // SERVER_ACK_LOG_H_

// AckLog: --ack_log, what a primary elected through etcd acknowledged, by term, for checkers
// of failover (tests/failover_chaos_test.cc). Lines are appended, each with one write(2) on a
// file opened with O_APPEND, so that a line written survives kill -9 of the process:
//
//   term=42 start=1200 pod=pod-1     this pod leads term 42, holding sequence 1200 at takeover
//   term=42 acked=1275 pod=pod-1     it acknowledged a write covering sequence 1275
//   shard version=7 slot=12 group=bloom/a pod=pod-1
//                                    in a sharded deployment: it acknowledged a write to a
//                                    filter of slot 12 as group bloom/a's, under map version 7
//
// An acked line is written before the write it covers is answered, and only for a sequence
// higher than any before in the term, so the log holds every term's highest acknowledged
// sequence at the cost of a write(2) per new highest. A shard line is written once per slot
// and map version (from ShardRouter::SettleWrite, before the write is answered), so that a
// checker can see that no slot was acknowledged by two groups under one version.
//
// Thread-safety: Acknowledged() is thread-safe; BeginTerm() is called between terms, when no
// write is being acknowledged.
#ifndef SERVER_ACK_LOG_H_
#define SERVER_ACK_LOG_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
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
  void Settled(uint32_t slot, uint64_t version, const std::string& group);

 private:
  AckLog(int fd, std::string pod) : fd_(fd), pod_(std::move(pod)) {}
  void Append(const std::string& line);

  const int fd_;
  const std::string pod_;
  std::atomic<int64_t> term_{0};
  std::atomic<uint64_t> highest_{0};  // this term's highest logged
  bloomsync::BlockingMutex mu_;       // orders the acked lines
  absl::flat_hash_set<std::pair<uint64_t, uint32_t>> settled_ ABSL_GUARDED_BY(mu_);  // logged
};

}  // namespace server

#endif  // SERVER_ACK_LOG_H_

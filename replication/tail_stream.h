// TailStream and TailPump: the primary's side of each follower's Tail stream, on gRPC's
// callback API, and the one thread that reads the log for all of them.
//
// Why not a synchronous handler: a thread blocked in a synchronous Read or Write takes its turn
// at polling every connection of the process (gRPC's epoll engine has one poller set), so the
// two threads a synchronous Tail held kept picking up the clients' Add requests and handing
// them to the callback threads: a context switch each. Here nothing blocks in gRPC:
// - TailStream (a ServerBidiReactor) takes the follower's acknowledgements as they arrive
//   (OnReadDone, on gRPC's threads) and sends what the pump gives it, one write at a time;
// - TailPump's thread reads the log for every stream that can take a response, paced: at most
//   every kMinDataInterval (kMinDataIntervalWithAcks when writes wait for acknowledgements),
//   or a heartbeat when there is nothing new. It sleeps on the database's write notification
//   while a stream is caught up, and otherwise until a pace ends or a write completes.
//
// Lifetime: the pump owns every stream (shared_ptr) from its first request until gRPC called
// its OnDone, so a stream the pump is using is never freed under it.
//
// Thread-safety: TailPump is thread-safe; a TailStream's state is guarded by its mutex, and its
// log reader and response are the pump thread's.
#ifndef REPLICATION_TAIL_STREAM_H_
#define REPLICATION_TAIL_STREAM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "common/blocking_mutex.h"
#include "grpcpp/grpcpp.h"
#include "storage/replica/replicated_store.h"
#include "storage/replica/replication_log.h"

namespace replication {

class TailPump;

// What a stream reports to its service (ReplicationService's follower list and logs).
struct TailHooks {
  // `proof`: the SHA-256 (hex) of the member secret the stream showed, or empty; `start`: the
  // sequence it asked to start from.
  std::function<int(const std::string& name, const std::string& peer, const std::string& proof,
                    uint64_t start)>
      registered;
  std::function<void(int id, uint64_t sent, uint64_t durable)> update;
  std::function<void(int id)> unregistered;
  std::function<void()> done;  // releases the stream's slot (kMaxTails)
};

class TailStream final : public grpc::ServerBidiReactor<bloom::replication::v1::TailRequest,
                                                        bloom::replication::v1::TailResponse> {
 public:
  // A stream that leaves what it was sent unacknowledged for `idle_timeout` (zero: never) is
  // ended ABORTED, even while a write to it is stuck.
  TailStream(grpc::CallbackServerContext* context, storage::ReplicatedStore* store, TailPump* pump,
             TailHooks hooks, absl::Duration idle_timeout);

  // gRPC's reactions.
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // The pump's step for this stream at `now`: sends the log (or a heartbeat, or the reason the
  // stream ends) if it can take a response. Lowers `wake` to when it next wants a step, and
  // `caught_up_at` to the sequence it waits to be written (when it has nothing to send).
  void Step(absl::Time now, bool stopping, absl::Time& wake, uint64_t& caught_up_at);
  bool done() const;

 private:
  // The first request: where to start. False (and finished) if it is not valid.
  bool Start(const bloom::replication::v1::TailRequest& first);
  // Finishes now, or after the write in flight (mu_ held).
  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  grpc::CallbackServerContext* const context_;
  storage::ReplicatedStore* const store_;
  TailPump* const pump_;
  const TailHooks hooks_;
  const absl::Duration idle_timeout_;
  storage::ReplicaAcks* const acks_;
  bloom::replication::v1::TailRequest request_;  // the read in flight fills it

  mutable bloomsync::BlockingMutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) =
      false;  // the first request arrived and the pump has this stream
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // a write is in flight
  bool finished_ ABSL_GUARDED_BY(mu_) =
      false;  // Finish was called (or is due after the write in flight)
  bool done_ ABSL_GUARDED_BY(mu_) =
      false;  // OnDone has finished with this stream: the pump may free it
  grpc::Status finish_after_write_ ABSL_GUARDED_BY(mu_);
  bool finish_pending_ ABSL_GUARDED_BY(mu_) = false;
  std::string name_;
  int id_ = -1;
  int ack_id_ = -1;
  // The last sequence sent on this stream (0: none yet): an acknowledgement counts up to it,
  // never beyond, whatever the follower claims, its start_sequence included.
  std::atomic<uint64_t> sent_{0};
  // The highest acknowledgement so far (capped at sent_), and when the stream last made
  // progress: an acknowledgement that raised it, or data sent while everything was
  // acknowledged. Idle: sent_ > acked_ for idle_timeout_ since then (mu_).
  uint64_t acked_ = 0;
  absl::Time last_progress_;

  // When the next response may go (mu_; the pump sets it, OnWriteDone reads it).
  absl::Time paced_until_ = absl::InfinitePast();

  // The pump thread's only.
  std::unique_ptr<storage::LogReader> log_;
  uint64_t next_ = 0;
  absl::Time last_sent_ = absl::InfinitePast();
  bloom::replication::v1::TailResponse response_;  // the write in flight reads it
};

class TailPump {
 public:
  explicit TailPump(storage::ReplicatedStore* store);
  TailPump(const TailPump&) = delete;
  TailPump& operator=(const TailPump&) = delete;
  ~TailPump();  // joins the thread; every stream must be done (the server shut down first)

  void Add(std::shared_ptr<TailStream> stream);
  // A stream can take a response again, or ended: the pump looks at once.
  void Wake();
  // Every stream ends (UNAVAILABLE: the followers reconnect elsewhere or later).
  void Stop();

 private:
  void Loop();

  storage::ReplicatedStore* const store_;
  bloomsync::BlockingMutex mu_;
  std::vector<std::shared_ptr<TailStream>> streams_ ABSL_GUARDED_BY(mu_);
  // Set by Wake(); ends the pump's wait, on wait_cv_ or on the database's write notification
  // (only while some stream waits for a write: otherwise every write would wake the pump).
  bloomsync::BlockingMutex wait_mu_;
  bloomsync::CondVar wait_cv_;
  std::atomic<bool> woken_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

}  // namespace replication

#endif  // REPLICATION_TAIL_STREAM_H_

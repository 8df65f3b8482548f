// CallLane: a few threads of their own for calls whose cost grows with what they read (List
// pages through the metadata family) or that operators loop (Stats), so that clients looping
// them use at most these threads' cores, never the gRPC threads that answer every other call:
// on the lane they queue behind each other instead of delaying everyone.
//
//   CallLane lane(/*threads=*/1, /*max_queued=*/1024);
//   if (!lane.Post([reactor, ...] { reactor->Finish(...); })) { /* refuse: too many waiting */ }
//
// Thread-safety: thread-safe. The destructor runs the work still queued, then joins.
#ifndef SERVICE_CALL_LANE_H_
#define SERVICE_CALL_LANE_H_

#include <cstddef>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "common/blocking_mutex.h"

namespace service {

class CallLane {
 public:
  CallLane(size_t threads, size_t max_queued);
  ~CallLane();
  CallLane(const CallLane&) = delete;
  CallLane& operator=(const CallLane&) = delete;

  // Runs `work` on a lane thread, in the order posted; false (and `work` is dropped unrun)
  // when `max_queued` already wait.
  bool Post(absl::AnyInvocable<void() &&> work);

 private:
  void Loop();

  const size_t max_queued_;
  bloomsync::BlockingMutex mu_;
  bloomsync::CondVar ready_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace service

#endif  // SERVICE_CALL_LANE_H_

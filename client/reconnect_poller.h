// ReconnectPoller: drives a channel's reconnection while its calls fail fast, so that a
// synchronous client is back as soon as a restarted server serves again.
//
// Why it is needed: gRPC C-core (1.51) keeps a channel in TRANSIENT_FAILURE until a new
// connection is READY, and a fail-fast call made meanwhile fails at once, without polling.
// The reconnection's own socket events (the connect, the server's SETTINGS frame) are read only
// by a thread that polls, and a synchronous client has none between its calls but gRPC's
// backup poller, which runs every 5 seconds by default (grpc/grpc#28866). Without this class, a
// pod back in a second stays unreachable to such a client for 5 to 15 seconds, and with the
// backup poller off, for ever.
//
// After a call fails UNAVAILABLE, Wake() has a thread wait on the channel's state changes,
// which polls its sockets, until the channel is READY again. It gives up when no call has
// failed for a while (kQuietLimit in the .cc), so a client left idle beside a dead server does
// not poll for ever; the next failed call wakes it again. The thread is started by the first
// Wake(): a client whose server never goes away has none.
//
// Thread-safety: thread-safe. The destructor stops the thread within one poll slice (100 ms).
#ifndef CLIENT_RECONNECT_POLLER_H_
#define CLIENT_RECONNECT_POLLER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace bloomclient {

class ReconnectPoller {
 public:
  explicit ReconnectPoller(std::shared_ptr<grpc::Channel> channel);
  ~ReconnectPoller();
  ReconnectPoller(const ReconnectPoller&) = delete;
  ReconnectPoller& operator=(const ReconnectPoller&) = delete;

  // A call on the channel failed UNAVAILABLE: poll its reconnection (again, or for longer).
  void Wake();

 private:
  void Run();
  // Polls until the channel is READY or PollingOver().
  void PollUntilReady();
  // Stopping, or poll_until_ has passed.
  bool PollingOver();

  const std::shared_ptr<grpc::Channel> channel_;
  std::mutex mu_;
  std::condition_variable woken_;
  bool stopping_ = false;                         // guarded by mu_
  absl::Time poll_until_ = absl::InfinitePast();  // guarded by mu_
  uint64_t wakes_ = 0;                            // guarded by mu_
  std::thread thread_;                            // started by the first Wake(), under mu_
};

}  // namespace bloomclient

#endif  // CLIENT_RECONNECT_POLLER_H_

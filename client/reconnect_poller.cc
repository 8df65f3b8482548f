// ReconnectPoller: see reconnect_poller.h.
#include "client/reconnect_poller.h"

#include <cstdint>
#include <utility>

#include "absl/time/clock.h"
#include "grpcpp/support/time.h"

namespace bloomclient {
namespace {

// How long the poller goes on after the last failed call. Longer than the channel's longest
// reconnect backoff (5 s, bloom_client.cc), so a reconnection attempt begun while calls were
// failing is seen through.
constexpr absl::Duration kQuietLimit = absl::Seconds(30);
// One wait on the channel's state: what bounds the destructor.
constexpr absl::Duration kPollSlice = absl::Milliseconds(100);

}  // namespace

ReconnectPoller::ReconnectPoller(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)) {}

ReconnectPoller::~ReconnectPoller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  woken_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ReconnectPoller::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    poll_until_ = absl::Now() + kQuietLimit;
    ++wakes_;
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  woken_.notify_all();
}

void ReconnectPoller::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    woken_.wait(lock, [this] { return stopping_ || absl::Now() < poll_until_; });
    if (stopping_) return;
    const uint64_t wakes_seen = wakes_;
    lock.unlock();
    PollUntilReady();
    lock.lock();
    // READY: wait for the next failed call (unless one came meanwhile). Or quiet for
    // kQuietLimit: poll_until_ has passed.
    if (wakes_ == wakes_seen &&
        channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) {
      poll_until_ = absl::InfinitePast();
    }
  }
}

void ReconnectPoller::PollUntilReady() {
  while (!PollingOver()) {
    const grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY || state == GRPC_CHANNEL_SHUTDOWN) return;
    // Waiting on the state polls the channel's sockets: this is what moves it on.
    channel_->WaitForStateChange(state, absl::ToChronoTime(absl::Now() + kPollSlice));
  }
}

bool ReconnectPoller::PollingOver() {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_ || absl::Now() >= poll_until_;
}

}  // namespace bloomclient

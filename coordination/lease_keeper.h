// LeaseKeeper: keeps one etcd lease alive from its own thread, and says until when this
// process certainly still holds it. That is the fence a primary checks before every
// acknowledgement: once Held() is false, etcd may have expired the lease and let another pod
// take the leader key, so nothing may be acknowledged as if this pod were still the primary.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<LeaseKeeper> keeper, LeaseKeeper::Start(etcd, {}));
//   etcd->CreateIfAbsent("c1/leader", "pod-0", keeper->id());
//   if (!keeper->Held()) { /* stop acknowledging: step down */ }
//
// The bound, on the monotonic clock (never wall time, which can jump): a renewal sent at t and
// answered with TTL T keeps the lease at etcd until at least t + T, since etcd starts T when
// the renewal reaches it, after t. Clocks tick at slightly different rates, so this process
// counts the lease as held until t + T * (1 - clock_rate_margin) - safety_margin. A process
// stopped (SIGSTOP, a long stall) past that bound finds Held() false when it resumes, before
// it can acknowledge anything. The bound only ever moves on a successful renewal.
//
// A lease whose bound passed, or that etcd reports gone, is lost for good: Lost() stays true
// and the keeper stops renewing. Its holder steps down and campaigns again with a new lease,
// because its old keys may have been deleted and taken in the meantime.
//
// Time is read from LeaseOptions::clock: the monotonic clock, or a ManualClock a test moves
// past the bound instead of stopping the process.
//
// Thread-safety: thread-safe. Held() is a clock read and an atomic load: cheap enough for
// every acknowledgement.
#ifndef COORDINATION_LEASE_KEEPER_H_
#define COORDINATION_LEASE_KEEPER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "common/clock.h"
#include "coordination/etcd_client.h"

namespace coordination {

struct LeaseOptions {
  absl::Duration ttl = absl::Seconds(5);  // whole seconds, at least 1 (etcd's unit)
  // Renewals go every ttl / renewals_per_ttl, and every retry_interval after one failed.
  int renewals_per_ttl = 3;
  absl::Duration retry_interval = absl::Milliseconds(200);
  // How much faster etcd's clock may run than ours, and a fixed allowance on top: the lease
  // counts as held until renewal + ttl * (1 - clock_rate_margin) - safety_margin.
  double clock_rate_margin = 0.02;
  absl::Duration safety_margin = absl::Milliseconds(500);
  // Called once, on the keeper's thread, when the lease is lost.
  std::function<void()> on_lost;
  // What the bound is measured on, and renewals wait by: never the wall clock, which can jump
  // (a test passes a ManualClock). Must outlive the keeper.
  const bloomtime::Clock* clock = bloomtime::Clock::Monotonic();
};

class LeaseKeeper {
 public:
  // Grants a lease (the grant counts as its first renewal) and starts renewing it. `etcd` must
  // outlive the keeper.
  static absl::StatusOr<std::unique_ptr<LeaseKeeper>> Start(EtcdClient* etcd, LeaseOptions options);
  // Stops renewing (the lease then expires at etcd after its TTL; Revoke() ends it at once).
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  int64_t id() const { return id_; }
  // True until the bound above passes.
  bool Held() const { return options_.clock->Now() < held_until(); }
  // On options.clock.
  absl::Time held_until() const { return absl::FromUnixNanos(held_until_nanos_.load()); }
  // The lease expired, was revoked, or its bound passed: it will not be held again.
  bool Lost() const { return lost_.load(); }

  // Ends the lease at etcd (deleting its keys) and stops renewing: for a clean hand-over.
  absl::Status Revoke();

 private:
  LeaseKeeper(EtcdClient* etcd, LeaseOptions options, int64_t id, absl::Time held_until);
  void Loop();
  // Marks the lease lost (once) and calls on_lost.
  void Lose();

  EtcdClient* const etcd_;
  const LeaseOptions options_;
  const int64_t id_;
  std::atomic<int64_t> held_until_nanos_;  // held_until(), in Unix nanoseconds
  std::atomic<bool> lost_{false};
  bloomsync::BlockingMutex mu_;
  bloomsync::CondVar wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace coordination

#endif  // COORDINATION_LEASE_KEEPER_H_

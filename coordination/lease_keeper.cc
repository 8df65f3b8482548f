// LeaseKeeper (lease_keeper.h): renewals on a thread, and the bound they keep.
#include "coordination/lease_keeper.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace coordination {
namespace {

// How long a renewal sent at `sent` and answered with `ttl` keeps the lease held here.
absl::Time Bound(absl::Time sent, absl::Duration ttl, const LeaseOptions& options) {
  return sent + ttl * (1.0 - options.clock_rate_margin) - options.safety_margin;
}

// held_until_nanos_ of a lease no longer held: before any time the clock reads
// (absl::InfinitePast() in Unix nanoseconds).
constexpr int64_t kNotHeld = std::numeric_limits<int64_t>::min();

}  // namespace

absl::StatusOr<std::unique_ptr<LeaseKeeper>> LeaseKeeper::Start(EtcdClient* etcd,
                                                                LeaseOptions options) {
  if (options.renewals_per_ttl < 2) {
    return absl::InvalidArgumentError("a lease is renewed at least twice per TTL");
  }
  if (options.clock_rate_margin < 0 || options.clock_rate_margin >= 0.5 ||
      options.safety_margin < absl::ZeroDuration() ||
      options.ttl * (1.0 - options.clock_rate_margin) <= options.safety_margin) {
    return absl::InvalidArgumentError("the lease's margins leave no time to hold it");
  }
  if (options.clock == nullptr) return absl::InvalidArgumentError("a lease needs a clock");
  const absl::Time sent = options.clock->Now();
  absl::StatusOr<EtcdLease> lease = etcd->GrantLease(options.ttl);
  if (!lease.ok()) return lease.status();
  const absl::Time held_until = Bound(sent, lease->ttl, options);
  return std::unique_ptr<LeaseKeeper>(
      new LeaseKeeper(etcd, std::move(options), lease->id, held_until));
}

LeaseKeeper::LeaseKeeper(EtcdClient* etcd, LeaseOptions options, int64_t id, absl::Time held_until)
    : etcd_(etcd),
      options_(std::move(options)),
      id_(id),
      held_until_nanos_(absl::ToUnixNanos(held_until)),
      thread_([this] { Loop(); }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  thread_.join();
}

absl::Status LeaseKeeper::Revoke() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  // No longer held from here on, whatever etcd answers: the caller is handing over.
  held_until_nanos_.store(kNotHeld);
  lost_.store(true);
  return etcd_->RevokeLease(id_);
}

void LeaseKeeper::Lose() {
  held_until_nanos_.store(kNotHeld);
  if (lost_.exchange(true)) return;
  bloomlog::LogWarning(absl::StrCat("etcd lease ", id_, " is lost"));
  if (options_.on_lost) options_.on_lost();
}

void LeaseKeeper::Loop() {
  const bloomtime::Clock& clock = *options_.clock;
  const absl::Duration period = options_.ttl / options_.renewals_per_ttl;
  absl::Time next = clock.Now() + period;
  while (true) {
    {
      bloomsync::BlockingLock lock(&mu_);
      // A renewal is never due after the bound: one must try while the lease is still held.
      next = std::min(next, held_until());
      if (clock.WaitUntil(wake_, lock, next,
                          [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; })) {
        return;
      }
    }
    if (clock.Now() >= held_until()) {  // no renewal succeeded in time
      Lose();
      return;
    }
    const absl::Time sent = clock.Now();
    absl::StatusOr<absl::Duration> ttl = etcd_->KeepAliveOnce(id_);
    if (ttl.ok()) {
      const int64_t bound = absl::ToUnixNanos(Bound(sent, *ttl, options_));
      // The bound only grows; a renewal answered after the bound passed is too late (the
      // holder may already have stepped down), and the check above catches that next round.
      int64_t seen = held_until_nanos_.load();
      while (bound > seen && clock.Now() < held_until() &&
             !held_until_nanos_.compare_exchange_weak(seen, bound)) {
      }
      next = sent + period;
    } else if (absl::IsNotFound(ttl.status())) {  // etcd says it expired
      Lose();
      return;
    } else {
      bloomlog::LogWarning(
          absl::StrCat("renewing etcd lease ", id_, ": ", ttl.status().ToString()));
      next = clock.Now() + options_.retry_interval;
    }
  }
}

}  // namespace coordination

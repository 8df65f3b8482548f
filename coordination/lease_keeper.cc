// LeaseKeeper (lease_keeper.h): renewals on a thread, and the bound they keep.
#include "coordination/lease_keeper.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace coordination {
namespace {

LeaseKeeper::Clock::duration ToClock(absl::Duration d) {
  return std::chrono::duration_cast<LeaseKeeper::Clock::duration>(absl::ToChronoNanoseconds(d));
}

// How long a renewal sent at `sent` and answered with `ttl` keeps the lease held here.
LeaseKeeper::Clock::time_point Bound(LeaseKeeper::Clock::time_point sent, absl::Duration ttl,
                                     const LeaseOptions& options) {
  return sent + ToClock(ttl * (1.0 - options.clock_rate_margin) - options.safety_margin);
}

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
  const Clock::time_point sent = Clock::now();
  absl::StatusOr<EtcdLease> lease = etcd->GrantLease(options.ttl);
  if (!lease.ok()) return lease.status();
  const Clock::time_point held_until = Bound(sent, lease->ttl, options);
  return std::unique_ptr<LeaseKeeper>(
      new LeaseKeeper(etcd, std::move(options), lease->id, held_until));
}

LeaseKeeper::LeaseKeeper(EtcdClient* etcd, LeaseOptions options, int64_t id,
                         Clock::time_point held_until)
    : etcd_(etcd),
      options_(std::move(options)),
      id_(id),
      held_until_nanos_(held_until.time_since_epoch().count()),
      thread_([this] { Loop(); }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  thread_.join();
}

LeaseKeeper::Clock::time_point LeaseKeeper::held_until() const {
  return Clock::time_point(Clock::duration(held_until_nanos_.load()));
}

absl::Status LeaseKeeper::Revoke() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  // No longer held from here on, whatever etcd answers: the caller is handing over.
  held_until_nanos_.store(Clock::time_point::min().time_since_epoch().count());
  lost_.store(true);
  return etcd_->RevokeLease(id_);
}

void LeaseKeeper::Lose() {
  held_until_nanos_.store(Clock::time_point::min().time_since_epoch().count());
  if (lost_.exchange(true)) return;
  bloomlog::LogWarning(absl::StrCat("etcd lease ", id_, " is lost"));
  if (options_.on_lost) options_.on_lost();
}

void LeaseKeeper::Loop() {
  const Clock::duration period = ToClock(options_.ttl / options_.renewals_per_ttl);
  const Clock::duration retry = ToClock(options_.retry_interval);
  Clock::time_point next = Clock::now() + period;
  while (true) {
    {
      bloomsync::BlockingLock lock(&mu_);
      // A renewal is never due after the bound: one must try while the lease is still held.
      next = std::min(next, held_until());
      if (wake_.WaitUntil(lock, next,
                          [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; }))
        return;
    }
    if (Clock::now() >= held_until()) {  // no renewal succeeded in time
      Lose();
      return;
    }
    const Clock::time_point sent = Clock::now();
    absl::StatusOr<absl::Duration> ttl = etcd_->KeepAliveOnce(id_);
    if (ttl.ok()) {
      const Clock::time_point bound = Bound(sent, *ttl, options_);
      // The bound only grows; a renewal answered after the bound passed is too late (the
      // holder may already have stepped down), and the check above catches that next round.
      int64_t seen = held_until_nanos_.load();
      while (bound.time_since_epoch().count() > seen && Clock::now() < held_until() &&
             !held_until_nanos_.compare_exchange_weak(seen, bound.time_since_epoch().count())) {
      }
      next = sent + period;
    } else if (absl::IsNotFound(ttl.status())) {  // etcd says it expired
      Lose();
      return;
    } else {
      bloomlog::LogWarning(
          absl::StrCat("renewing etcd lease ", id_, ": ", ttl.status().ToString()));
      next = Clock::now() + retry;
    }
  }
}

}  // namespace coordination

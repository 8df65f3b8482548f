// Failover (failover.h): the member, its roles, and what this pod holds.
#include "server/failover.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "server/etcd_access.h"

namespace server {
namespace {

// Each etcd call's own bound: well under a lease's TTL.
constexpr absl::Duration kEtcdCallTimeout = absl::Seconds(2);
// A switchover waits this long after closing the fence before it reads the sequence to hand
// over at, for writes that passed the fence just before it closed; later ones are caught by
// reading it again once the target holds it.
constexpr absl::Duration kInFlightWrites = absl::Milliseconds(20);
constexpr absl::Duration kSwitchoverPoll = absl::Milliseconds(5);

}  // namespace

absl::StatusOr<std::unique_ptr<Failover>> Failover::Start(const ReplicationConfig& config,
                                                          int required_acks, uint64_t held,
                                                          std::function<void()> on_change) {
  auto failover = std::unique_ptr<Failover>(new Failover());
  {
    bloomsync::BlockingLock lock(&failover->mu_);  // not yet shared: taken for the analysis
    failover->held_ = held;
  }
  failover->switchover_cooldown_ = config.switchover_cooldown;
  absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> etcd =
      ConnectToEtcd(config, kEtcdCallTimeout);
  if (!etcd.ok()) return etcd.status();
  failover->etcd_ = *std::move(etcd);
  coordination::ClusterMemberOptions options;
  options.cluster = config.cluster;
  options.address = config.advertise_address;
  options.name = config.name.empty() ? config.advertise_address : config.name;
  options.required_acks = required_acks;
  options.lease.ttl = config.leader_ttl;
  Failover* raw = failover.get();
  options.held_sequence = [raw] { return raw->held(); };
  options.on_role = [raw, on_change = std::move(on_change)](const coordination::Role& role) {
    {
      bloomsync::BlockingLock lock(&raw->mu_);
      if (role.kind == coordination::Role::Kind::kPrimary &&
          raw->role_.kind != coordination::Role::Kind::kPrimary) {
        raw->primary_since_ = absl::Now();
      }
      raw->role_ = role;
      ++raw->version_;
    }
    raw->changed_.NotifyAll();
    if (on_change) on_change();
  };
  absl::StatusOr<std::unique_ptr<coordination::ClusterMember>> member =
      coordination::ClusterMember::Start(failover->etcd_.get(), std::move(options));
  if (!member.ok()) return member.status();
  failover->member_ = *std::move(member);
  return failover;
}

Failover::~Failover() { member_.reset(); }

coordination::Role Failover::WaitForRole(const std::function<bool()>& stop, uint64_t* version) {
  bloomsync::BlockingLock lock(&mu_);
  while (role_.kind == coordination::Role::Kind::kNone) {
    lock.Unlock();
    if (stop()) return coordination::Role{};
    lock.Lock();
    changed_.WaitFor(lock, std::chrono::milliseconds(100));
  }
  *version = version_;
  return role_;
}

coordination::Role Failover::role(uint64_t* version) const {
  bloomsync::BlockingLock lock(&mu_);
  *version = version_;
  return role_;
}

bool Failover::RoleChangedSince(uint64_t version) const {
  bloomsync::BlockingLock lock(&mu_);
  return version_ != version;
}

void Failover::SetStore(storage::FilterStore* store) {
  bloomsync::BlockingLock lock(&mu_);
  if (store == nullptr && store_ != nullptr) held_ = store_->LatestSequence();
  store_ = store;
}

uint64_t Failover::held() const {
  bloomsync::BlockingLock lock(&mu_);
  return store_ != nullptr ? store_->LatestSequence() : held_;
}

void Failover::SetHeld(uint64_t sequence) {
  bloomsync::BlockingLock lock(&mu_);
  held_ = sequence;
}

std::function<bool()> Failover::Fence() const {
  coordination::ClusterMember* member = member_.get();
  return [member] { return member->MayAcknowledge(); };
}

absl::Status Failover::Resign() { return member_->Resign(); }

absl::Status Failover::CheckSwitchoverCooldown() const {
  bloomsync::BlockingLock lock(&mu_);
  const absl::Time now = absl::Now();
  const absl::Time since = std::max(primary_since_, last_switchover_);
  if (now - since < switchover_cooldown_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a switchover is taken at most once per ", absl::FormatDuration(switchover_cooldown_),
        " (--switchover_cooldown), counted from the last one and from the primary's taking "
        "over: retry in ",
        absl::FormatDuration(absl::Ceil(switchover_cooldown_ - (now - since), absl::Seconds(1)))));
  }
  return absl::OkStatus();
}

absl::StatusOr<Failover::Handover> Failover::Switchover(
    const std::string& to, absl::Time deadline,
    const std::function<std::vector<FollowerProgress>()>& followers,
    const std::function<uint64_t()>& latest) {
  const coordination::Role role = member_->role();
  if (role.kind != coordination::Role::Kind::kPrimary) {
    return absl::FailedPreconditionError(
        absl::StrCat("this pod is not the primary: call the primary (", role.leader.name, " at ",
                     role.leader.address, ")"));
  }
  if (to == member_->name()) return Handover{to, latest(), role.term};
  // The highest sequence a follower named `name` acknowledged on any of its streams (-1: none
  // connected).
  auto durable = [&followers](const std::string& name) {
    int64_t most = -1;
    for (const FollowerProgress& follower : followers()) {
      if (follower.name == name) {
        most = std::max(most, static_cast<int64_t>(follower.durable_sequence));
      }
    }
    return most;
  };
  std::string target = to;
  const std::vector<FollowerProgress> now = followers();
  if (target.empty()) {
    uint64_t most = 0;
    for (const FollowerProgress& follower : now) {
      if (target.empty() || follower.durable_sequence > most) {
        target = follower.name;
        most = follower.durable_sequence;
      }
    }
    if (target.empty()) {
      return absl::FailedPreconditionError("no follower is connected to hand over to");
    }
  } else if (durable(target) < 0) {
    std::vector<std::string> names;
    names.reserve(now.size());
    for (const FollowerProgress& follower : now) names.push_back(follower.name);
    return absl::FailedPreconditionError(
        absl::StrCat(target, " is not following this primary (its followers: ",
                     names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  RETURN_IF_ERROR(member_->BeginHandOver());
  {
    bloomsync::BlockingLock lock(&mu_);
    last_switchover_ = absl::Now();  // writes pause from here: the cooldown counts from it
  }
  absl::SleepFor(kInFlightWrites);
  uint64_t sequence = latest();
  while (true) {
    while (durable(target) < static_cast<int64_t>(sequence)) {
      if (absl::Now() >= deadline) {
        member_->CancelHandOver();
        return absl::DeadlineExceededError(absl::StrCat(
            target, " did not acknowledge sequence ", sequence, " in time (it holds ",
            std::max<int64_t>(durable(target), 0), "): not handed over; writes are taken again"));
      }
      absl::SleepFor(kSwitchoverPoll);
    }
    const uint64_t again = latest();
    if (again == sequence) break;
    sequence = again;
  }
  if (absl::Status handed = member_->HandOver(target, sequence); !handed.ok()) {
    member_->CancelHandOver();
    return handed;
  }
  return Handover{target, sequence, role.term};
}

}  // namespace server

// Failover (failover.h): the member, its roles, and what this pod holds.
#include "service/failover.h"

#include <utility>

#include "absl/time/time.h"

namespace service {
namespace {

// Each etcd call's own bound: well under a lease's TTL.
constexpr absl::Duration kEtcdCallTimeout = absl::Seconds(2);

}  // namespace

absl::StatusOr<std::unique_ptr<Failover>> Failover::Start(const ReplicationConfig& config,
                                                          int required_acks, uint64_t held) {
  auto failover = std::unique_ptr<Failover>(new Failover());
  failover->held_ = held;
  absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> etcd =
      coordination::EtcdClient::Connect(config.etcd_endpoints, kEtcdCallTimeout);
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
  options.on_role = [raw](const coordination::Role& role) {
    {
      std::lock_guard<std::mutex> lock(raw->mu_);
      raw->role_ = role;
      ++raw->version_;
    }
    raw->changed_.notify_all();
  };
  absl::StatusOr<std::unique_ptr<coordination::ClusterMember>> member =
      coordination::ClusterMember::Start(failover->etcd_.get(), std::move(options));
  if (!member.ok()) return member.status();
  failover->member_ = *std::move(member);
  return failover;
}

Failover::~Failover() { member_.reset(); }

coordination::Role Failover::WaitForRole(const std::function<bool()>& stop, uint64_t* version) {
  std::unique_lock<std::mutex> lock(mu_);
  while (role_.kind == coordination::Role::Kind::kNone) {
    lock.unlock();
    if (stop()) return coordination::Role{};
    lock.lock();
    changed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  *version = version_;
  return role_;
}

bool Failover::RoleChangedSince(uint64_t version) const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_ != version;
}

void Failover::SetStore(storage::FilterStore* store) {
  std::lock_guard<std::mutex> lock(mu_);
  if (store == nullptr && store_ != nullptr) held_ = store_->LatestSequence();
  store_ = store;
}

uint64_t Failover::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_ != nullptr ? store_->LatestSequence() : held_;
}

std::function<bool()> Failover::Fence() const {
  coordination::ClusterMember* member = member_.get();
  return [member] { return member->MayAcknowledge(); };
}

absl::Status Failover::Resign() { return member_->Resign(); }

}  // namespace service

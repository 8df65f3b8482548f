#include "storage/replica/replica_acks.h"

#include <algorithm>
#include <future>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace storage {
namespace {

// How often the timer thread looks for waiters past their deadline: a failed write is told
// within this much after its timeout.
constexpr auto kTimerTick = std::chrono::milliseconds(20);

}  // namespace

ReplicaAcks::ReplicaAcks(int required, absl::Duration timeout)
    : required_(std::max(1, required)), timeout_(timeout) {
  timer_ = std::thread([this] { TimerLoop(); });
}

ReplicaAcks::~ReplicaAcks() {
  std::vector<Done> failed;
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_ = true;
    for (auto& [sequence, waiter] : waiters_) failed.push_back(std::move(waiter.done));
    waiters_.clear();
  }
  cv_.NotifyAll();
  timer_.join();
  for (Done& done : failed) {
    std::move(done)(
        absl::UnavailableError("the server is shutting down before followers "
                               "acknowledged the write"));
  }
}

int ReplicaAcks::Connect(const std::string& name, std::string proof, uint64_t from) {
  bloomsync::BlockingLock lock(&mu_);
  const int id = next_id_++;
  followers_[id] = Follower{name, 0, absl::Now(), id, std::move(proof), false, from};
  return id;
}

void ReplicaAcks::SetVerified(int id, bool verified) {
  std::vector<Done> ready;
  {
    bloomsync::BlockingLock lock(&mu_);
    auto it = followers_.find(id);
    if (it == followers_.end() || it->second.verified == verified) return;
    it->second.verified = verified;
    TakeCoveredLocked(ready);
  }
  for (Done& done : ready) std::move(done)(absl::OkStatus());
}

void ReplicaAcks::Ack(int id, uint64_t durable_sequence) {
  std::vector<Done> ready;
  {
    bloomsync::BlockingLock lock(&mu_);
    auto it = followers_.find(id);
    if (it == followers_.end()) return;
    it->second.durable_sequence = std::max(it->second.durable_sequence, durable_sequence);
    it->second.last_ack = absl::Now();
    TakeCoveredLocked(ready);
  }
  for (Done& done : ready) std::move(done)(absl::OkStatus());
}

void ReplicaAcks::Disconnect(int id) {
  bloomsync::BlockingLock lock(&mu_);
  followers_.erase(id);
}

uint64_t ReplicaAcks::QuorumSequenceLocked() {
  // Each counted follower once, at the furthest any of its streams acknowledged. Called for
  // every write and every acknowledgement, with a handful of followers: no allocation. Names
  // identify followers only in a sync set (they are the cluster's member names there); without
  // one each stream counts, as followers started with --replicate_from on one host may share
  // their default name.
  absl::InlinedVector<std::pair<const std::string*, uint64_t>, 4> durable;
  for (const auto& entry : followers_) {
    const Follower& follower = entry.second;  // a plain reference: the lambda below uses it
    if (sync_set_mode_ && (!follower.verified || sync_set_.count(follower.name) == 0)) continue;
    auto same = !sync_set_mode_
                    ? durable.end()
                    : std::find_if(durable.begin(), durable.end(),
                                   [&](const auto& seen) { return *seen.first == follower.name; });
    if (same == durable.end()) {
      durable.emplace_back(&follower.name, follower.durable_sequence);
    } else {
      same->second = std::max(same->second, follower.durable_sequence);
    }
  }
  if (static_cast<int>(durable.size()) < required_) return 0;
  std::nth_element(durable.begin(), durable.begin() + (required_ - 1), durable.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const uint64_t quorum = durable[required_ - 1].second;
  acknowledged_ = std::max(acknowledged_, quorum);
  return quorum;
}

void ReplicaAcks::SetSyncSet(const std::vector<std::string>& names) {
  std::vector<Done> ready;
  {
    bloomsync::BlockingLock lock(&mu_);
    sync_set_mode_ = true;
    sync_set_ = std::set<std::string>(names.begin(), names.end());
    TakeCoveredLocked(ready);
  }
  for (Done& done : ready) std::move(done)(absl::OkStatus());
}

uint64_t ReplicaAcks::acknowledged_sequence() const {
  bloomsync::BlockingLock lock(&mu_);
  return acknowledged_;
}

bool ReplicaAcks::CoveredLocked(uint64_t sequence) const {
  // Each counted follower once (by name in a sync set), if a stream of it was sent `sequence`
  // and acknowledged it.
  absl::InlinedVector<const std::string*, 4> counted;
  for (const auto& entry : followers_) {
    const Follower& follower = entry.second;
    if (sync_set_mode_ && (!follower.verified || sync_set_.count(follower.name) == 0)) continue;
    if (follower.from > sequence || follower.durable_sequence < sequence) continue;
    if (sync_set_mode_ && std::any_of(counted.begin(), counted.end(), [&](const std::string* name) {
          return *name == follower.name;
        })) {
      continue;
    }
    counted.push_back(&follower.name);
    if (static_cast<int>(counted.size()) >= required_) return true;
  }
  return false;
}

void ReplicaAcks::TakeCoveredLocked(std::vector<Done>& ready) {
  QuorumSequenceLocked();  // raises acknowledged_
  auto end = waiters_.begin();
  for (bool covered = false; end != waiters_.end(); ++end) {
    // Equal sequences in a row are judged once.
    if (end == waiters_.begin() || end->first != std::prev(end)->first) {
      covered = CoveredLocked(end->first);
    }
    if (!covered) break;
    acknowledged_ = std::max(acknowledged_, end->first);
    ready.push_back(std::move(end->second.done));
  }
  waiters_.erase(waiters_.begin(), end);
}

void ReplicaAcks::WhenAcked(uint64_t sequence, Done done) {
  bool stopped = false;
  {
    bloomsync::BlockingLock lock(&mu_);
    stopped = stop_;
    if (!stop_) {
      QuorumSequenceLocked();  // raises acknowledged_
      const bool covered = CoveredLocked(sequence);
      if (!covered || !waiters_.empty()) {
        // Behind earlier waiters even when covered: callbacks keep the order they were asked in.
        if (covered) sequence = std::max(sequence, waiters_.rbegin()->first);
        waiters_.emplace(sequence, Waiter{absl::Now() + timeout_, std::move(done)});
        return;
      }
      acknowledged_ = std::max(acknowledged_, sequence);
    }
  }
  std::move(done)(stopped ? absl::UnavailableError("the server is shutting down")
                          : absl::OkStatus());
}

absl::Status ReplicaAcks::WaitAcked(uint64_t sequence) {
  std::promise<absl::Status> acked;
  std::future<absl::Status> result = acked.get_future();
  WhenAcked(sequence, [&acked](const absl::Status& status) { acked.set_value(status); });
  return result.get();
}

std::vector<ReplicaAcks::Follower> ReplicaAcks::Followers() const {
  bloomsync::BlockingLock lock(&mu_);
  std::vector<Follower> out;
  for (const auto& [id, follower] : followers_) out.push_back(follower);
  return out;
}

size_t ReplicaAcks::waiting() const {
  bloomsync::BlockingLock lock(&mu_);
  return waiters_.size();
}

uint64_t ReplicaAcks::timeouts() const {
  bloomsync::BlockingLock lock(&mu_);
  return timeouts_;
}

void ReplicaAcks::TimerLoop() {
  bloomsync::BlockingLock lock(&mu_);
  while (!stop_) {
    cv_.WaitFor(lock, kTimerTick);
    if (stop_) break;
    const absl::Time now = absl::Now();
    // Deadlines grow with the order waiters were asked in, which is the map's order except
    // for waiters placed behind others: fail every waiter up to the last one that expired.
    auto last_expired = waiters_.end();
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->second.deadline <= now) last_expired = it;
    }
    if (last_expired == waiters_.end()) continue;
    std::vector<Done> failed;
    auto end = std::next(last_expired);
    for (auto it = waiters_.begin(); it != end; ++it) failed.push_back(std::move(it->second.done));
    waiters_.erase(waiters_.begin(), end);
    timeouts_ += failed.size();
    const std::string why =
        absl::StrCat("the write was applied on the primary but fewer than ", required_,
                     " followers acknowledged it within ", absl::FormatDuration(timeout_), " (",
                     followers_.size(), " connected; --min_replica_acks=", required_,
                     "): it is not acknowledged; retrying it is harmless");
    lock.Unlock();
    for (Done& done : failed) std::move(done)(absl::UnavailableError(why));
    lock.Lock();
  }
}

}  // namespace storage

// SyncSetKeeper (sync_set_keeper.h): the rule for joining and leaving the sync set, applied.
#include "coordination/sync_set_keeper.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"

namespace coordination {
namespace {

// An unverified stream's proof is checked again this often: its member may have written its
// record after the stream opened, and each check reads etcd.
constexpr absl::Duration kVerifyInterval = absl::Seconds(1);

}  // namespace

SyncSetChange NextSyncSet(const std::vector<std::string>& current,
                          const std::vector<storage::ReplicaAcks::Follower>& connected,
                          uint64_t acknowledged, int required, absl::Time now,
                          absl::Duration stale_after) {
  // Each connected follower once: the furthest its streams acknowledged, its latest answer.
  std::map<std::string, storage::ReplicaAcks::Follower> live;
  for (const storage::ReplicaAcks::Follower& follower : connected) {
    auto [it, inserted] = live.emplace(follower.name, follower);
    if (!inserted) {
      it->second.durable_sequence =
          std::max(it->second.durable_sequence, follower.durable_sequence);
      it->second.last_ack = std::max(it->second.last_ack, follower.last_ack);
    }
  }
  const std::set<std::string> before(current.begin(), current.end());
  std::set<std::string> next = before;
  std::vector<std::string> joined;
  std::vector<std::string> gone;
  for (const auto& [name, follower] : live) {
    if (now - follower.last_ack >= stale_after) continue;  // silent: does not join
    if (next.insert(name).second) joined.push_back(name);
  }
  for (const std::string& name : before) {
    auto it = live.find(name);
    if (it == live.end() || now - it->second.last_ack >= stale_after) gone.push_back(name);
  }
  SyncSetChange change;
  if (!gone.empty()) {
    // Those staying that hold every write acknowledged so far (a follower not connected now
    // may hold them too, but nothing here says so).
    int holding = 0;
    for (const std::string& name : next) {
      if (std::find(gone.begin(), gone.end(), name) != gone.end()) continue;
      auto it = live.find(name);
      if (it != live.end() && it->second.durable_sequence >= acknowledged) ++holding;
    }
    if (holding >= required) {
      for (const std::string& name : gone) next.erase(name);
      absl::StrAppend(&change.reason, "left: ", absl::StrJoin(gone, ","), " (", holding,
                      " staying hold sequence ", acknowledged, ")");
    } else {
      absl::StrAppend(&change.reason, absl::StrJoin(gone, ","), " went away but stay",
                      gone.size() == 1 ? "s" : "", ": only ", holding, " of those staying hold ",
                      "every acknowledged write (sequence ", acknowledged, "), ", required,
                      " needed");
    }
  }
  if (!joined.empty()) {
    absl::StrAppend(&change.reason, change.reason.empty() ? "" : "; ",
                    "joined: ", absl::StrJoin(joined, ","));
  }
  change.next.assign(next.begin(), next.end());
  change.changed = next != before;
  return change;
}

SyncSetKeeper::SyncSetKeeper(ClusterMember* member, storage::ReplicaAcks* acks,
                             SyncSetKeeperOptions options)
    : member_(member), acks_(acks), options_(options) {
  acks_->SetSyncSet({});  // nobody counts before a set naming them is recorded
  thread_ = std::thread([this] { Loop(); });
}

SyncSetKeeper::~SyncSetKeeper() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  thread_.join();
}

std::vector<std::string> SyncSetKeeper::recorded() const {
  bloomsync::BlockingLock lock(&mu_);
  return recorded_;
}

void SyncSetKeeper::Loop() {
  bloomsync::BlockingLock lock(&mu_);
  while (!stop_) {
    lock.Unlock();
    Step();
    lock.Lock();
    wake_.WaitFor(lock, absl::ToChronoNanoseconds(options_.interval),
                  [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; });
  }
}

std::vector<storage::ReplicaAcks::Follower> SyncSetKeeper::VerifiedFollowers() {
  const absl::Time now = absl::Now();
  std::vector<storage::ReplicaAcks::Follower> verified;
  std::map<int, absl::Time> checked;
  for (const storage::ReplicaAcks::Follower& follower : acks_->Followers()) {
    if (follower.verified) {
      verified.push_back(follower);
      continue;
    }
    auto last = checked_.find(follower.id);
    if (last != checked_.end() && now - last->second < kVerifyInterval) {
      checked.insert(*last);
      continue;
    }
    checked[follower.id] = now;
    absl::StatusOr<MemberRecord> record = member_->ReadMember(follower.name);
    if (record.ok() && !record->proof.empty() && record->proof == follower.proof) {
      acks_->SetVerified(follower.id, true);
      verified.push_back(follower);
      continue;
    }
    if (last == checked_.end()) {  // once per stream
      bloomlog::LogWarning(
          absl::StrCat("a follower stream names itself '", absl::CHexEscape(follower.name),
                       "' but does not prove that it is that member (",
                       record.ok()                         ? "it did not show the member's secret"
                       : absl::IsNotFound(record.status()) ? "no member has that name"
                                                           : record.status().ToString(),
                       "): its acknowledgements do not count, and it does not join the sync set"));
    }
  }
  checked_ = std::move(checked);  // streams gone are forgotten
  return verified;
}

void SyncSetKeeper::Step() {
  if (!member_->MayAcknowledge()) return;  // not (or no longer surely) the primary
  const std::vector<std::string> current = recorded();
  const SyncSetChange change =
      NextSyncSet(current, VerifiedFollowers(), acks_->acknowledged_sequence(), acks_->required(),
                  absl::Now(), options_.stale_after);
  if (!change.changed) return;
  // Leavers stop counting before the smaller set is recorded; joiners count only after.
  std::vector<std::string> staying;
  std::set_intersection(current.begin(), current.end(), change.next.begin(), change.next.end(),
                        std::back_inserter(staying));
  acks_->SetSyncSet(staying);
  const absl::Status recorded = member_->RecordSyncSet(change.next);
  if (!recorded.ok()) {
    // etcd still names `current`, a superset of those counting: safe; tried again next round.
    bloomlog::LogWarning(absl::StrCat("sync set {", absl::StrJoin(change.next, ","),
                                      "} not recorded: ", recorded.ToString()));
    return;
  }
  acks_->SetSyncSet(change.next);
  {
    bloomsync::BlockingLock lock(&mu_);
    recorded_ = change.next;
  }
  bloomlog::LogInfo(
      absl::StrCat("sync set is now {", absl::StrJoin(change.next, ","), "}: ", change.reason));
}

}  // namespace coordination

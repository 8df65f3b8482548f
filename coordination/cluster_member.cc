// ClusterMember (cluster_member.h): the member's thread, its lease, elections and roles.
#include "coordination/cluster_member.h"

#include <openssl/rand.h>

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace coordination {
namespace {

// How long a member waits before trying etcd again after a failed call.
constexpr absl::Duration kRetry = absl::Milliseconds(200);
// How often a member that may not take over looks for a leader, and for how long before it
// holds the round again.
constexpr absl::Duration kLeaderPoll = absl::Milliseconds(100);
constexpr int kSettlesToWaitForALeader = 4;
// A refusal to take over is logged at most this often (it repeats every round).
constexpr absl::Duration kRefusalLogInterval = absl::Seconds(10);

const char* KindName(Role::Kind kind) {
  switch (kind) {
    case Role::Kind::kPrimary:
      return "primary";
    case Role::Kind::kFollower:
      return "follower";
    case Role::Kind::kNone:
      break;
  }
  return "none";
}

absl::Status CheckWord(absl::string_view what, absl::string_view value, absl::string_view banned) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat("cluster member: no ", what));
  for (char c : banned) {
    if (absl::StrContains(value, absl::string_view(&c, 1))) {
      return absl::InvalidArgumentError(absl::StrCat("cluster member: ", what, " \"", value,
                                                     "\" contains '", std::string(1, c), "'"));
    }
  }
  return absl::OkStatus();
}

// 32 random bytes, hex: a member's secret (ClusterMember::secret).
std::string RandomSecret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // OpenSSL seeds itself from the kernel, so this does not happen in practice; the kernel's
    // generator through the standard library then.
    std::random_device device("/dev/urandom");
    for (unsigned char& byte : bytes) byte = static_cast<unsigned char>(device());
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterMember>> ClusterMember::Start(EtcdClient* etcd,
                                                                    ClusterMemberOptions options) {
  for (const absl::Status& status :
       {CheckWord("cluster", options.cluster, " "), CheckWord("name", options.name, " =,/"),
        CheckWord("address", options.address, " =")}) {
    if (!status.ok()) return status;
  }
  if (options.required_acks < 0) {
    return absl::InvalidArgumentError("cluster member: required_acks < 0");
  }
  if (!options.held_sequence || !options.on_role) {
    return absl::InvalidArgumentError("cluster member: held_sequence and on_role are needed");
  }
  if (options.settle <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("cluster member: settle must be positive");
  }
  return std::unique_ptr<ClusterMember>(new ClusterMember(etcd, std::move(options)));
}

ClusterMember::ClusterMember(EtcdClient* etcd, ClusterMemberOptions options)
    : etcd_(etcd),
      options_(std::move(options)),
      secret_(RandomSecret()),
      thread_([this] { Loop(); }) {}

MemberRecord ClusterMember::Record(uint64_t held) const {
  return MemberRecord{options_.name, options_.address, held, last_term_, ProofOf(secret_)};
}

absl::StatusOr<MemberRecord> ClusterMember::ReadMember(const std::string& name) const {
  absl::StatusOr<KeyValue> kv = etcd_->Get(MemberKey(options_.cluster, name));
  if (!kv.ok()) return kv.status();
  return DecodeMember(kv->value);
}

ClusterMember::~ClusterMember() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_ = true;
    if (watch_ != nullptr) watch_->Cancel();
  }
  wake_.NotifyAll();
  thread_.join();
  primary_.store(false);
}

Role ClusterMember::role() const {
  bloomsync::BlockingLock lock(&mu_);
  return role_;
}

bool ClusterMember::MayAcknowledge() const {
  if (!primary_.load() || handing_over_.load()) return false;
  std::shared_ptr<LeaseKeeper> lease = keeper();
  return lease != nullptr && lease->Held();
}

absl::Status ClusterMember::RecordSyncSet(std::vector<std::string> followers) {
  bloomsync::BlockingLock writing(&sync_write_mu_);
  SyncSet set{.leader = options_.name,
              .term = 0,
              .required = options_.required_acks,
              .names = std::move(followers)};
  std::sort(set.names.begin(), set.names.end());
  {
    bloomsync::BlockingLock lock(&mu_);
    if (role_.kind != Role::Kind::kPrimary) {
      return absl::FailedPreconditionError("only the primary records the sync set");
    }
    set.term = role_.term;
    set.handover_to = handover_to_;
    set.handover_sequence = handover_sequence_;
  }
  RETURN_IF_ERROR(WriteSyncSet(set));
  bloomsync::BlockingLock lock(&mu_);
  if (role_.term == set.term) recorded_names_ = set.names;
  return absl::OkStatus();
}

absl::Status ClusterMember::WriteSyncSet(const SyncSet& set) {
  absl::StatusOr<bool> written = etcd_->PutIfKeyCreatedAt(LeaderKey(options_.cluster), set.term,
                                                          SyncKey(options_.cluster), Encode(set));
  if (!written.ok()) return written.status();
  if (!*written) {
    return absl::FailedPreconditionError(absl::StrCat("the leader key of term ", set.term,
                                                      " is gone: this pod is no longer primary"));
  }
  return absl::OkStatus();
}

absl::Status ClusterMember::BeginHandOver() {
  bloomsync::BlockingLock lock(&mu_);
  if (role_.kind != Role::Kind::kPrimary || stop_) {
    return absl::FailedPreconditionError("this pod is not the primary: only it can hand over");
  }
  handing_over_.store(true);
  return absl::OkStatus();
}

void ClusterMember::CancelHandOver() { handing_over_.store(false); }

absl::Status ClusterMember::HandOver(const std::string& to, uint64_t sequence) {
  std::shared_ptr<LeaseKeeper> lease;
  {
    bloomsync::BlockingLock writing(&sync_write_mu_);
    SyncSet set{
        .leader = options_.name, .term = 0, .required = options_.required_acks, .names = {}};
    {
      bloomsync::BlockingLock lock(&mu_);
      if (!handing_over_.load() || role_.kind != Role::Kind::kPrimary) {
        return absl::FailedPreconditionError(
            "not handing over: this pod is no longer primary, or the handover was not begun");
      }
      set.term = role_.term;
      set.names = recorded_names_;
      handover_to_ = set.handover_to = to;
      handover_sequence_ = set.handover_sequence = sequence;
      lease = keeper_;
    }
    RETURN_IF_ERROR(WriteSyncSet(set));
  }
  bloomlog::LogInfo(absl::StrCat("cluster ", options_.cluster, ": ", options_.name,
                                 " hands over to ", to, " at sequence ", sequence));
  primary_.store(false);
  // The member key and the leader key go with the lease; the member thread, watching the
  // leader key, campaigns again with a new lease.
  return lease->Revoke();
}

absl::Status ClusterMember::StepDown(int64_t term) {
  primary_.store(false);
  bloomlog::LogWarning(absl::StrCat("cluster ", options_.cluster, ": ", options_.name,
                                    " steps down from term ", term));
  using Condition = EtcdClient::Condition;
  absl::StatusOr<int64_t> done =
      etcd_->Commit({Condition{LeaderKey(options_.cluster), Condition::Kind::kCreatedAt, term, ""}},
                    {EtcdClient::Write{LeaderKey(options_.cluster), "", 0, /*erase=*/true}});
  return done.status();
}

absl::Status ClusterMember::Resign() {
  std::shared_ptr<LeaseKeeper> lease;
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_ = true;
    if (watch_ != nullptr) watch_->Cancel();
    lease = keeper_;
  }
  wake_.NotifyAll();
  primary_.store(false);
  if (lease == nullptr) return absl::OkStatus();
  bloomlog::LogInfo(absl::StrCat("cluster ", options_.cluster, ": ", options_.name, " resigns"));
  return lease->Revoke();
}

std::shared_ptr<LeaseKeeper> ClusterMember::keeper() const {
  bloomsync::BlockingLock lock(&mu_);
  return keeper_;
}

bool ClusterMember::stopping() const {
  bloomsync::BlockingLock lock(&mu_);
  return stop_;
}

bool ClusterMember::Pause(absl::Duration duration) {
  bloomsync::BlockingLock lock(&mu_);
  return !wake_.WaitFor(lock, absl::ToChronoNanoseconds(duration),
                        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; });
}

void ClusterMember::SetRole(const Role& role) {
  {
    bloomsync::BlockingLock lock(&mu_);
    if (role_.kind == role.kind && role_.term == role.term &&
        role_.leader.name == role.leader.name) {
      return;
    }
    if (stop_) return;
    role_ = role;
    recorded_names_.clear();
    handover_to_.clear();
    handover_sequence_ = 0;
    handing_over_.store(false);
    primary_.store(role.kind == Role::Kind::kPrimary);
  }
  if (role.term > last_term_) last_term_ = role.term;
  bloomlog::LogInfo(absl::StrCat(
      "cluster ", options_.cluster, ": ", options_.name, " is now ", KindName(role.kind),
      role.kind == Role::Kind::kNone
          ? ""
          : absl::StrCat(" (term ", role.term, ", primary ", role.leader.name, " at ",
                         role.leader.address, ")")));
  options_.on_role(role);
}

void ClusterMember::Loop() {
  while (!stopping()) Step();
}

bool ClusterMember::EnsureLease() {
  std::shared_ptr<LeaseKeeper> lease = keeper();
  if (lease != nullptr && !lease->Lost()) return true;
  if (lease != nullptr) {
    // Whatever this member was, it no longer knows that it still is: the lease that held its
    // keys may have expired at etcd.
    SetRole(Role{});
  }
  LeaseOptions lease_options = options_.lease;
  lease_options.on_lost = [this] {
    bloomsync::BlockingLock lock(&mu_);
    if (watch_ != nullptr) watch_->Cancel();
    wake_.NotifyAll();
  };
  absl::StatusOr<std::unique_ptr<LeaseKeeper>> started = LeaseKeeper::Start(etcd_, lease_options);
  if (!started.ok()) {
    bloomlog::LogWarning(absl::StrCat("cluster ", options_.cluster,
                                      ": no etcd lease yet: ", started.status().ToString()));
    return false;
  }
  lease = std::shared_ptr<LeaseKeeper>(*std::move(started));
  const MemberRecord record = Record(options_.held_sequence());
  absl::StatusOr<int64_t> registered =
      etcd_->Put(MemberKey(options_.cluster, options_.name), Encode(record), lease->id());
  if (!registered.ok()) {
    bloomlog::LogWarning(absl::StrCat("cluster ", options_.cluster, ": registering ", options_.name,
                                      ": ", registered.status().ToString()));
    lease->Revoke().IgnoreError();  // a new lease, and registration, next round
    return false;
  }
  bloomsync::BlockingLock lock(&mu_);
  keeper_ = std::move(lease);
  return true;
}

void ClusterMember::Step() {
  if (!EnsureLease()) {
    Pause(kRetry);
    return;
  }
  int64_t revision = 0;
  absl::StatusOr<KeyValue> leader = etcd_->Get(LeaderKey(options_.cluster), &revision);
  if (absl::IsNotFound(leader.status())) {
    SetRole(Role{});  // a primary whose key is gone is none already (MayAcknowledge checked)
    Elect();
    return;
  }
  if (!leader.ok()) {  // etcd unreachable: the role stands; the lease's bound fences a primary
    Pause(kRetry);
    return;
  }
  FollowLeader(*leader, revision);
}

void ClusterMember::Elect() {
  const std::string election_key = ElectionKey(options_.cluster);
  // Opened only while there is no leader: a marker left from before a leader would make
  // records from that leader's term count as fresh.
  using Condition = EtcdClient::Condition;
  absl::StatusOr<int64_t> opened = etcd_->Commit(
      {Condition{LeaderKey(options_.cluster), Condition::Kind::kAbsent, 0, ""},
       Condition{election_key, Condition::Kind::kAbsent, 0, ""}},
      {EtcdClient::Write{election_key, absl::StrCat("opened_by=", options_.name), 0, false}});
  absl::StatusOr<KeyValue> election =
      opened.ok() ? etcd_->Get(election_key) : absl::StatusOr<KeyValue>(opened.status());
  if (!election.ok()) {  // NOT_FOUND: a leader was chosen meanwhile
    if (!absl::IsNotFound(election.status())) Pause(kRetry);
    return;
  }
  const int64_t round = election->create_revision;
  std::shared_ptr<LeaseKeeper> lease = keeper();
  const uint64_t held = options_.held_sequence();
  const MemberRecord mine = Record(held);
  if (!etcd_->Put(MemberKey(options_.cluster, options_.name), Encode(mine), lease->id()).ok()) {
    Pause(kRetry);
    return;
  }
  if (!Pause(options_.settle)) return;

  absl::StatusOr<std::vector<KeyValue>> records = etcd_->GetPrefix(MembersPrefix(options_.cluster));
  if (!records.ok()) return;
  std::vector<MemberRecord> fresh;
  for (const KeyValue& kv : *records) {
    if (kv.mod_revision <= round) continue;  // from before the last primary went
    absl::StatusOr<MemberRecord> record = DecodeMember(kv.value);
    if (record.ok()) fresh.push_back(*std::move(record));
  }
  absl::StatusOr<KeyValue> sync_kv = etcd_->Get(SyncKey(options_.cluster));
  if (!sync_kv.ok() && !absl::IsNotFound(sync_kv.status())) return;
  absl::StatusOr<SyncSet> sync =
      sync_kv.ok() ? DecodeSyncSet(sync_kv->value) : absl::StatusOr<SyncSet>(sync_kv.status());
  if (sync_kv.ok() && !sync.ok()) {
    bloomlog::LogError(absl::StrCat("cluster ", options_.cluster, ": unreadable sync set: ",
                                    sync.status().ToString(), "; nobody may take over"));
    Pause(options_.settle);
    return;
  }
  const TakeoverDecision decision = MayTakeOver(options_.name, fresh, sync.ok() ? &*sync : nullptr);

  if (decision.allowed && lease->Held()) {
    const LeaderRecord record{options_.name, options_.address, held};
    absl::StatusOr<int64_t> term = etcd_->CreateAndDelete(
        LeaderKey(options_.cluster), Encode(record), lease->id(), election_key, round);
    if (term.ok() && *term > 0) {
      bloomlog::LogInfo(absl::StrCat("cluster ", options_.cluster, ": ", options_.name,
                                     " takes over at sequence ", held, ": ", decision.reason));
      // A new term starts with an empty set: until its followers hold what it holds, only this
      // member holds every write.
      const SyncSet set{
          .leader = options_.name, .term = *term, .required = options_.required_acks, .names = {}};
      absl::StatusOr<bool> written = etcd_->PutIfKeyCreatedAt(
          LeaderKey(options_.cluster), *term, SyncKey(options_.cluster), Encode(set));
      if (!written.ok() || !*written) {
        // Not primary without it: a stale set would let another member take over.
        bloomlog::LogWarning(absl::StrCat("cluster ", options_.cluster,
                                          ": could not write the new term's sync set; resigning "
                                          "the leader key"));
        etcd_->DeleteIfValue(LeaderKey(options_.cluster), Encode(record)).IgnoreError();
        return;
      }
      SetRole(Role{Role::Kind::kPrimary, *term, record});
      return;
    }
  } else if (absl::Now() - last_refusal_log_ >= kRefusalLogInterval) {
    last_refusal_log_ = absl::Now();
    bloomlog::LogInfo(absl::StrCat("cluster ", options_.cluster, ": ", options_.name,
                                   " does not take over: ", decision.reason));
  }
  // Another member should; wait a while for its leader key, then hold the round again.
  for (int i = 0; i < kSettlesToWaitForALeader * (options_.settle / kLeaderPoll); ++i) {
    if (!Pause(kLeaderPoll)) return;
    absl::StatusOr<KeyValue> leader = etcd_->Get(LeaderKey(options_.cluster));
    if (leader.ok()) return;
  }
}

void ClusterMember::FollowLeader(const KeyValue& leader_key, int64_t revision) {
  absl::StatusOr<LeaderRecord> leader = DecodeLeader(leader_key.value);
  if (!leader.ok() || leader_key.lease == 0) {
    // No member wrote this: each writes the key under its lease. Obeyed (or waited out), it
    // would stop every write for as long as it stays; it is no leader, then, and an election
    // replaces it (deleting only this value, so that a proper key written meanwhile stays).
    bloomlog::LogWarning(absl::StrCat("cluster ", options_.cluster,
                                      ": the leader key is not one a member wrote (",
                                      leader.ok() ? "it has no lease" : leader.status().ToString(),
                                      "): no primary; deleting it and holding an election"));
    SetRole(Role{});
    if (absl::Status deleted =
            etcd_->DeleteIfValue(LeaderKey(options_.cluster), leader_key.value).status();
        !deleted.ok()) {
      Pause(kRetry);
    }
    return;
  }
  if (leader->name == options_.name) {
    std::shared_ptr<LeaseKeeper> lease = keeper();
    if (lease != nullptr && leader_key.lease == lease->id()) {
      SetRole(Role{Role::Kind::kPrimary, leader_key.create_revision, *leader});
    } else {
      // This member's name under a lease it no longer holds (it restarted, or its lease was
      // lost here but not yet at etcd): not primary; the key goes when that lease expires.
      SetRole(Role{});
    }
  } else {
    SetRole(Role{Role::Kind::kFollower, leader_key.create_revision, *leader});
  }
  // Until the leader key changes, the lease is lost, or the member stops.
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
      etcd_->Watch(LeaderKey(options_.cluster), /*prefix=*/false, revision + 1);
  if (!watch.ok()) {
    Pause(kRetry);
    return;
  }
  std::shared_ptr<EtcdWatch> shared(std::move(*watch));
  {
    bloomsync::BlockingLock lock(&mu_);
    if (stop_) return;
    watch_ = shared;
  }
  std::shared_ptr<LeaseKeeper> lease = keeper();
  if (lease == nullptr || !lease->Lost()) {
    // Any event (a delete, or a new value) means the role must be looked at again.
    absl::StatusOr<std::vector<WatchEvent>> events = shared->Next();
    if (!events.ok() && !absl::IsCancelled(events.status())) Pause(kRetry);
  }
  bloomsync::BlockingLock lock(&mu_);
  watch_.reset();
}

}  // namespace coordination

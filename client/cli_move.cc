// bloom-cli cluster move (client/cli_move.h).
#include "client/cli_move.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/types/optional.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "client/cli_output.h"
#include "client/move_catch_up.h"
#include "common/blocking_mutex.h"
#include "common/slot.h"

namespace bloomcli {
namespace {

namespace rv1 = bloom::replication::v1;

// How long a step waits for pods (to take a map version, to apply the copies) before failing,
// and between attempts of a call that failed for want of a primary.
constexpr absl::Duration kWaitForPods = absl::Seconds(30);
constexpr absl::Duration kRetryPause = absl::Milliseconds(200);
constexpr int kAttempts = 50;  // 10 s of kRetryPause: longer than a failover
// Catch-up rounds before the pause: until one moves fewer item hashes than this (the last
// round, while writes pause, then moves about as many), or this many rounds.
constexpr uint64_t kSmallRound = 20'000;
// ... and copies fewer bytes of changed windowed filters (or others that cannot be caught up)
// whole than this.
constexpr uint64_t kSmallRoundBytes = 16 << 20;
constexpr int kMaxCatchUpRounds = 10;
// Filters copied at once: a copy is a few calls that each wait on a pod, so with one at a time
// a move of many small filters (one per user) waits on round trips, not on the pods' work.
// As many as a pod lets one client export or import at once by default
// (--max_transfers_per_client); a pod that lets fewer answers RESOURCE_EXHAUSTED, and the
// copy is tried again after a pause.
constexpr size_t kCopiesInFlight = 4;
// A round copies filters in chunks of this many; between chunks, once this long has passed
// since, it catches up the copies made so far, renewing the owner's journal holds (a minute).
constexpr size_t kCopyChunk = 1000;
constexpr absl::Duration kRenewHoldsAfter = absl::Seconds(20);

std::string Millis(absl::Duration duration) {
  return absl::StrCat(absl::ToInt64Milliseconds(duration), " ms");
}

// A filter of the moving slots, as List showed it. Every filter's copy follows the owner's
// journal (client/move_catch_up.h): a BLOOM filter's copy is caught up with the items added
// since, a CUCKOO filter's with the table values its adds and removes wrote since, a windowed
// filter's copied again only if it changed since (its journal does not replay elsewhere). So
// the pause moves what changed in the last round, not whole filters. (A pod too old to follow
// one answers FAILED_PRECONDITION: that filter is then copied once writes pause.)
struct Seen {};

// Whether a call that failed so may succeed once a primary is elected (a failover).
bool Transient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

class Mover {
 public:
  Mover(const bloomclient::BloomClient& seed, bloomclient::ClientOptions options)
      : seed_(seed), options_(std::move(options)) {}

  int Run(uint32_t first, uint32_t last, const std::string& to, bool abort);

 private:
  absl::StatusOr<bloom::v1::ShardMap> Map();
  // Takes a step of the move; returns the map's version after it.
  absl::StatusOr<uint64_t> Step(rv1::MoveStep::Step step);
  bloomclient::BloomClient& Pod(const std::string& address);
  // The primary of `group` now (waiting out an election).
  absl::StatusOr<std::string> PrimaryOf(const std::string& group);
  // The primary of `group` as last asked this round: the copies of a round ask the map once
  // (a call to a primary that stepped down fails, and ForgetPrimaries makes the next attempt
  // ask again).
  absl::StatusOr<std::string> CachedPrimaryOf(const std::string& group);
  void ForgetPrimaries();
  // The filters of the moving slots that the pod at `address` holds itself.
  absl::StatusOr<std::map<std::string, Seen>> ListHeld(const std::string& address);
  // What copying one filter did.
  struct Copied {
    bool gone = false;                     // deleted at the owner meanwhile: not copied
    absl::optional<JournalCursor> cursor;  // where its copy follows the owner's journal from
    uint64_t bytes = 0;
  };
  // Copies `name` from the owner's primary to the target's, replacing the copy there; retried
  // across failovers. The filter's journal is held first, and its copy followed from there
  // (no cursor: the owner cannot follow it). Safe to call from several threads at once.
  absl::StatusOr<Copied> Copy(const std::string& name);
  absl::StatusOr<Copied> CopyOnce(const std::string& name);
  // Copies `names`, kCopiesInFlight at a time, and records what each copy did (cursors_,
  // unfollowed_, bytes_), failed copies' results too: returns how many were copied, or the
  // first failure.
  absl::StatusOr<size_t> CopyAll(const std::vector<std::string>& names);
  absl::Status DeleteAt(const std::string& group, const std::string& name);
  // Whether `group` owns every slot of the move in `map`.
  bool OwnedBy(const bloom::v1::ShardMap& map, const std::string& group) const;
  // Deletes the filters of the moving slots that groups other than the target hold (copies
  // a move left behind), once every member of every group holds `map`; returns how many.
  absl::StatusOr<size_t> DeleteLeftovers(const bloom::v1::ShardMap& map);
  // Waits until every member of `group` holds map version `version` or later.
  absl::Status WaitForVersion(const std::string& group, uint64_t version);
  // Waits until every follower of `group` has applied what its primary holds now.
  absl::Status WaitForFollowers(const std::string& group);
  // Copies every filter whose copy is missing, and catches the others up from the owner's
  // journal (once `paused`, filters the owner could not follow are copied whole too, and
  // copies of filters gone at the owner deleted); returns how many filters it copied whole. Retried
  // across failovers.
  absl::StatusOr<size_t> CopyRound(bool paused);
  absl::StatusOr<size_t> CopyRoundOnce(bool paused);
  // Catches every followed copy up from the owner's primary `from` to the target's `to`
  // (renewing their journal holds), adding to the round's figures; appends the filters to copy
  // whole again to `copy_whole`.
  absl::Status CatchUpCopies(const std::string& from, const std::string& to,
                             std::vector<std::string>& copy_whole);
  void Prepare(grpc::ClientContext& context) const;

  const bloomclient::BloomClient& seed_;
  const bloomclient::ClientOptions options_;
  // Shared by the copies in flight (CopyAll); the rest of a Mover is its calling thread's.
  bloomsync::BlockingMutex mu_;
  std::map<std::string, std::unique_ptr<bloomclient::BloomClient>> pods_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> primaries_ ABSL_GUARDED_BY(mu_);  // CachedPrimaryOf's
  // The filters the target may hold a copy of, which a copy deletes first: those it held when
  // this run began, and those this run imported. Until listed, every one.
  bool target_listed_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> maybe_at_target_ ABSL_GUARDED_BY(mu_);
  uint32_t first_ = 0;
  uint32_t last_ = 0;
  uint32_t slot_count_ = 0;
  std::string from_;
  std::string to_;
  std::map<std::string, Seen> copied_;            // the filters copied
  std::map<std::string, JournalCursor> cursors_;  // where each followed copy stands
  uint64_t bytes_ = 0;
  std::set<std::string> unfollowed_;  // filters the owner cannot follow (an older pod)
  uint64_t round_hashes_ = 0;         // item hashes the last round's catch-up moved
  uint64_t round_records_ = 0;        // ... and CUCKOO filters' journal records
  uint64_t records_ = 0;              // ... all rounds'
  uint64_t round_bytes_ = 0;          // bytes the last round copied whole
  uint64_t hashes_ = 0;               // item hashes caught up, all rounds'
  // Where the last round's time went: listing the filters held (at the owner, and once
  // paused at the target), catching the copies up, copying filters whole.
  absl::Duration round_listing_;
  absl::Duration round_catching_up_;
  absl::Duration round_copying_;
};

void Mover::Prepare(grpc::ClientContext& context) const {
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoNanoseconds(options_.timeout));
  if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
  // A mover's call (service/shard_router.h): the target serves it for the moving slots.
  context.AddMetadata("bloom-shard-move", "1");
}

absl::StatusOr<bloom::v1::ShardMap> Mover::Map() {
  grpc::ClientContext context;
  Prepare(context);
  bloom::v1::GetShardMapResponse response;
  absl::Status called = bloomclient::FromGrpcStatus(
      bloom::v1::BloomFilterService::NewStub(seed_.channel())
          ->GetShardMap(&context, bloom::v1::GetShardMapRequest(), &response));
  if (!called.ok()) return called;
  return response.map();
}

absl::StatusOr<uint64_t> Mover::Step(rv1::MoveStep::Step step) {
  rv1::ChangeShardMapRequest request;
  request.mutable_move()->set_step(step);
  request.mutable_move()->set_first(first_);
  request.mutable_move()->set_last(last_);
  request.mutable_move()->set_to(to_);
  grpc::ClientContext context;
  Prepare(context);
  rv1::ChangeShardMapResponse response;
  absl::Status changed =
      bloomclient::FromGrpcStatus(rv1::ReplicationService::NewStub(seed_.channel())
                                      ->ChangeShardMap(&context, request, &response));
  if (!changed.ok()) return changed;
  return response.version();
}

bloomclient::BloomClient& Mover::Pod(const std::string& address) {
  bloomsync::BlockingLock lock(&mu_);
  std::unique_ptr<bloomclient::BloomClient>& pod = pods_[address];
  if (pod == nullptr) {
    bloomclient::ClientOptions options = options_;
    options.shard_routing = false;  // the mover names the pod it means
    options.metadata.emplace_back("bloom-shard-move", "1");
    absl::StatusOr<std::unique_ptr<bloomclient::BloomClient>> opened =
        bloomclient::BloomClient::Open(address, options);
    pod = opened.ok() ? *std::move(opened) : bloomclient::BloomClient::Connect(address, options);
  }
  return *pod;
}

absl::StatusOr<std::string> Mover::PrimaryOf(const std::string& group) {
  absl::Status last = absl::UnavailableError(absl::StrCat("group ", group, " has no primary"));
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<bloom::v1::ShardMap> map = Map();
    if (map.ok()) {
      for (const bloom::v1::ShardGroup& each : map->groups()) {
        if (each.name() == group && !each.primary().empty()) return each.primary();
      }
    } else {
      last = map.status();
    }
    absl::SleepFor(kRetryPause);
  }
  return last;
}

absl::StatusOr<std::string> Mover::CachedPrimaryOf(const std::string& group) {
  {
    bloomsync::BlockingLock lock(&mu_);
    auto known = primaries_.find(group);
    if (known != primaries_.end()) return known->second;
  }
  absl::StatusOr<std::string> primary = PrimaryOf(group);
  if (!primary.ok()) return primary;
  bloomsync::BlockingLock lock(&mu_);
  primaries_[group] = *primary;
  return primary;
}

void Mover::ForgetPrimaries() {
  bloomsync::BlockingLock lock(&mu_);
  primaries_.clear();
}

absl::StatusOr<std::map<std::string, Seen>> Mover::ListHeld(const std::string& address) {
  std::map<std::string, Seen> held;
  std::string token;
  do {
    grpc::ClientContext context;
    Prepare(context);  // a mover's List: what the pod holds, copies included
    bloom::v1::ListRequest request;
    request.set_page_size(1000);
    request.set_page_token(token);
    // Names alone, of the moving slots alone: the paused round lists them, and the owner may
    // hold a filter per user in every slot. (A pod from before these fields lists everything
    // with statistics: the slot check below keeps what moves.)
    request.mutable_slots()->set_first(first_);
    request.mutable_slots()->set_last(last_);
    request.set_names_only(true);
    bloom::v1::ListResponse page;
    absl::Status listed =
        bloomclient::FromGrpcStatus(bloom::v1::BloomFilterService::NewStub(Pod(address).channel())
                                        ->List(&context, request, &page));
    if (!listed.ok()) return listed;
    for (const bloom::v1::FilterStats& stats : page.filters()) {
      const uint32_t slot = slots::SlotOf(stats.name(), slot_count_);
      if (slot < first_ || slot > last_) continue;
      held.emplace(stats.name(), Seen{});
    }
    token = page.next_page_token();
  } while (!token.empty());
  return held;
}

absl::StatusOr<Mover::Copied> Mover::CopyOnce(const std::string& name) {
  absl::StatusOr<std::string> from = CachedPrimaryOf(from_);
  if (!from.ok()) return from.status();
  Copied copied;
  // Held before the export: the copy holds every change up to the cursor.
  absl::StatusOr<JournalCursor> at = StartJournal(
      Pod(*from).channel(), name, [this](grpc::ClientContext& context) { Prepare(context); });
  if (at.ok()) {
    copied.cursor = *at;
  } else if (absl::IsFailedPrecondition(at.status())) {
    // A follower answers so too: the primary asked for may have stepped down since.
    ForgetPrimaries();
    absl::StatusOr<std::string> now = PrimaryOf(from_);
    if (!now.ok()) return now.status();
    if (*now != *from) return absl::UnavailableError("the owner's primary changed: retry");
    // An older pod: the filter is copied whole again once writes pause.
  } else {
    return at.status();
  }
  std::ostringstream dump;
  if (absl::Status exported = Pod(*from).Export(name, dump); !exported.ok()) return exported;
  copied.bytes = dump.str().size();
  absl::StatusOr<std::string> to = CachedPrimaryOf(to_);
  if (!to.ok()) return to.status();
  // The copy replaces any older one: its counters stay the owner's (a merge would add them up).
  auto delete_copy = [&]() -> absl::Status {
    absl::Status deleted = DeleteAt(to_, name);
    return deleted.ok() || absl::IsNotFound(deleted) ? absl::OkStatus() : deleted;
  };
  bool may_be_there = true;
  {
    bloomsync::BlockingLock lock(&mu_);
    may_be_there = !target_listed_ || maybe_at_target_.count(name) != 0;
    maybe_at_target_.insert(name);  // an import that fails may still have made it
  }
  if (may_be_there) {
    if (absl::Status deleted = delete_copy(); !deleted.ok()) return deleted;
  }
  std::istringstream in(dump.str());
  absl::StatusOr<bloom::v1::FilterStats> imported = Pod(*to).Import(name, in);
  if (absl::IsAlreadyExists(imported.status()) && !may_be_there) {
    // A copy made after the target was listed (another mover of the same move): replaced.
    if (absl::Status deleted = delete_copy(); !deleted.ok()) return deleted;
    std::istringstream again(dump.str());
    imported = Pod(*to).Import(name, again);
  }
  if (!imported.ok()) return imported.status();
  return copied;
}

absl::StatusOr<size_t> Mover::CopyAll(const std::vector<std::string>& names) {
  // A copy replaces the target's: what its cursor followed is gone with it.
  for (const std::string& name : names) cursors_.erase(name);
  std::vector<absl::StatusOr<Copied>> results(names.size(), absl::CancelledError("not copied"));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto copy_next = [&] {
    for (size_t i = next++; i < names.size() && !failed.load(); i = next++) {
      results[i] = Copy(names[i]);
      if (!results[i].ok()) failed.store(true);
    }
  };
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < std::min(kCopiesInFlight, names.size()); ++i) {
    helpers.emplace_back(copy_next);
  }
  copy_next();
  for (std::thread& helper : helpers) helper.join();
  size_t copied = 0;
  absl::Status first_failure;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!results[i].ok()) {
      if (!absl::IsCancelled(results[i].status())) first_failure.Update(results[i].status());
      continue;
    }
    if (results[i]->gone) continue;
    bytes_ += results[i]->bytes;
    if (results[i]->cursor.has_value()) {
      cursors_[names[i]] = *results[i]->cursor;
    } else {
      unfollowed_.insert(names[i]);
    }
    copied_[names[i]] = Seen{};
    ++copied;
  }
  if (!first_failure.ok()) return first_failure;
  return copied;
}

int Mover::Run(uint32_t first, uint32_t last, const std::string& to, bool abort) {
  first_ = first;
  last_ = last;
  to_ = to;
  absl::StatusOr<bloom::v1::ShardMap> map = Map();
  if (!map.ok()) return Error(map.status());
  slot_count_ = map->slot_count();
  if (slot_count_ == 0) {
    return Error(absl::FailedPreconditionError("the deployment is not sharded (no shard map)"));
  }
  if (last_ >= slot_count_) {
    return Error(absl::InvalidArgumentError(
        absl::StrCat("slots ", first_, "-", last_, " run past the last slot, ", slot_count_ - 1)));
  }
  const bool ours = map->has_move() && map->move().first() == first_ &&
                    map->move().last() == last_ && map->move().to() == to_;
  if (map->has_move() && !ours) {
    return Error(absl::FailedPreconditionError(
        absl::StrCat("slots ", map->move().first(), "-", map->move().last(), " are moving to ",
                     map->move().to(), ": finish that move (run it again) or --abort it first")));
  }
  if (!ours && abort) {
    return Error(absl::FailedPreconditionError("no move of those slots to that group to abort"));
  }
  if (!ours && OwnedBy(*map, to_)) {
    // Moved already (this is a run after one whose deletes of the old copies failed).
    absl::StatusOr<size_t> deleted = DeleteLeftovers(*map);
    if (!deleted.ok()) return Error(deleted.status());
    std::cout << "slots " << first_ << "-" << last_ << " are " << to_ << "'s; deleted " << *deleted
              << " copies left at other groups" << std::endl;
    return 0;
  }
  if (!ours) {
    absl::StatusOr<uint64_t> begun = Step(rv1::MoveStep::STEP_BEGIN);
    if (!begun.ok()) return Error(begun.status());
    map = Map();
    if (!map.ok()) return Error(map.status());
    if (!map->has_move()) {  // the seed has not seen it yet
      absl::SleepFor(kRetryPause);
      map = Map();
      if (!map.ok() || !map->has_move()) {
        return Error(
            absl::UnavailableError("the move began, but the pod asked does not show it "
                                   "yet: run the same command again to resume"));
      }
    }
    std::cout << "moving slots " << first_ << "-" << last_ << " from " << map->move().from()
              << " to " << to_ << " (shard map version " << *begun << ")" << std::endl;
  }
  from_ = map->move().from();
  if (abort) {
    absl::StatusOr<uint64_t> aborted = Step(rv1::MoveStep::STEP_ABORT);
    if (!aborted.ok()) return Error(aborted.status());
    absl::StatusOr<std::string> target = PrimaryOf(to_);
    if (!target.ok()) return Error(target.status());
    absl::StatusOr<std::map<std::string, Seen>> copies = ListHeld(*target);
    if (!copies.ok()) return Error(copies.status());
    for (const auto& [name, seen] : *copies) {
      absl::Status deleted = DeleteAt(to_, name);
      if (!deleted.ok() && !absl::IsNotFound(deleted)) return Error(deleted);
    }
    std::cout << "aborted the move of slots " << first_ << "-" << last_ << " to " << to_
              << "; they stay " << from_ << "'s (deleted " << copies->size()
              << " copies at the target)" << std::endl;
    return 0;
  }
  uint64_t paused_version = map->version();
  if (!map->move().paused()) {
    // Round 1 copies every filter; the next ones catch the copies up from the owner's journal,
    // until a round moves little: the last one, while writes pause, moves about as much.
    uint64_t previous_hashes = 0;
    uint64_t previous_bytes = 0;
    for (int round = 1; round <= kMaxCatchUpRounds; ++round) {
      absl::StatusOr<size_t> copied = CopyRound(/*paused=*/false);
      if (!copied.ok()) return Error(copied.status());
      std::cout << "round " << round << ": copied " << *copied << " filters whole (" << round_bytes_
                << " bytes), caught " << cursors_.size() << " up by " << round_hashes_
                << " items and " << round_records_ << " journal records" << std::endl;
      // A journal record (one add or remove of the owner's) counts as an item.
      const uint64_t changes = round_hashes_ + round_records_;
      if (changes < kSmallRound && round_bytes_ < kSmallRoundBytes) break;
      // No smaller than the round before (the same filters written throughout): more rounds
      // would not shorten the pause.
      if (round > 1 && changes >= previous_hashes && round_bytes_ >= previous_bytes) break;
      previous_hashes = changes;
      previous_bytes = round_bytes_;
    }
    absl::StatusOr<uint64_t> paused = Step(rv1::MoveStep::STEP_PAUSE);
    if (!paused.ok()) return Error(paused.status());
    paused_version = *paused;
  }
  const absl::Time pause_start = absl::Now();
  std::cout << "writes to slots " << first_ << "-" << last_ << " paused (shard map version "
            << paused_version << ")" << std::endl;
  if (absl::Status seen = WaitForVersion(from_, paused_version); !seen.ok()) return Error(seen);
  const absl::Duration owner_waited = absl::Now() - pause_start;
  absl::StatusOr<size_t> last_changes = CopyRound(/*paused=*/true);
  if (!last_changes.ok()) return Error(last_changes.status());
  const absl::Time followers_start = absl::Now();
  if (absl::Status applied = WaitForFollowers(to_); !applied.ok()) return Error(applied);
  const absl::Duration followers_waited = absl::Now() - followers_start;
  absl::StatusOr<uint64_t> finished = Step(rv1::MoveStep::STEP_FINISH);
  if (!finished.ok()) return Error(finished.status());
  const absl::Duration pause = absl::Now() - pause_start;
  // The old owner's copies, which nobody reads any more. The move is done even if this fails:
  // running the command again deletes them.
  if (absl::StatusOr<bloom::v1::ShardMap> now = Map(); now.ok()) {
    if (absl::StatusOr<size_t> deleted = DeleteLeftovers(*now); !deleted.ok()) {
      std::cerr << "bloom-cli: the slots moved, but deleting the old copies at " << from_
                << " failed (" << deleted.status() << "): run the same command again to delete "
                << "them" << std::endl;
    }
  }
  std::cout << "moved slots " << first_ << "-" << last_ << " (" << copied_.size() << " filters, "
            << bytes_ << " bytes copied, " << hashes_ << " items and " << records_
            << " journal records caught up) from " << from_ << " to " << to_
            << " (shard map version " << *finished << "); writes paused "
            << absl::ToInt64Milliseconds(pause) << " ms (" << *last_changes
            << " filters copied whole and " << round_hashes_ << " items and " << round_records_
            << " journal records caught up meanwhile)" << std::endl;
  std::cout << "the pause: " << Millis(owner_waited) << " waiting for the owner's pods, "
            << Millis(round_listing_) << " listing filters, " << Millis(round_catching_up_)
            << " catching " << cursors_.size() << " copies up, " << Millis(round_copying_)
            << " copying whole, " << Millis(followers_waited)
            << " waiting for the target's followers" << std::endl;
  return 0;
}

bool Mover::OwnedBy(const bloom::v1::ShardMap& map, const std::string& group) const {
  for (const bloom::v1::SlotRange& range : map.ranges()) {
    if (range.group() != group && range.first() <= last_ && range.last() >= first_) return false;
  }
  return true;
}

absl::StatusOr<size_t> Mover::DeleteLeftovers(const bloom::v1::ShardMap& map) {
  // Only once every pod serves the slots from their new owner: a pod still holding the map
  // before the flip reads its own group's copy, which its primary's delete would take from
  // under it (a read answering NOT_FOUND mid-move).
  for (const bloom::v1::ShardGroup& group : map.groups()) {
    if (absl::Status seen = WaitForVersion(group.name(), map.version()); !seen.ok()) return seen;
  }
  size_t deleted = 0;
  for (const bloom::v1::ShardGroup& group : map.groups()) {
    if (group.name() == to_) continue;
    absl::StatusOr<std::string> primary = PrimaryOf(group.name());
    if (!primary.ok()) return primary.status();
    absl::StatusOr<std::map<std::string, Seen>> left = ListHeld(*primary);
    if (!left.ok()) return left.status();
    for (const auto& [name, seen] : *left) {
      absl::Status gone = DeleteAt(group.name(), name);
      if (!gone.ok() && !absl::IsNotFound(gone)) return gone;
      ++deleted;
    }
  }
  return deleted;
}

absl::StatusOr<Mover::Copied> Mover::Copy(const std::string& name) {
  absl::StatusOr<Copied> copied;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    copied = CopyOnce(name);
    if (copied.ok()) return copied;
    // Filters deleted meanwhile are not copied (the last round deletes their copies).
    if (absl::IsNotFound(copied.status())) return Copied{.gone = true};
    if (!Transient(copied.status()) && !absl::IsResourceExhausted(copied.status())) break;
    ForgetPrimaries();
    absl::SleepFor(kRetryPause);  // a primary changing: ask the map again
  }
  return absl::Status(copied.status().code(),
                      absl::StrCat("copying ", name, ": ", copied.status().message()));
}

absl::Status Mover::DeleteAt(const std::string& group, const std::string& name) {
  absl::Status deleted;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<std::string> primary = CachedPrimaryOf(group);
    if (!primary.ok()) return primary.status();
    deleted = Pod(*primary).Delete(name);
    if (deleted.ok() || absl::IsNotFound(deleted)) return deleted;
    if (!Transient(deleted)) return deleted;
    ForgetPrimaries();
    absl::SleepFor(kRetryPause);
  }
  return deleted;
}

absl::Status Mover::WaitForVersion(const std::string& group, uint64_t version) {
  const absl::Time give_up = absl::Now() + kWaitForPods;
  while (true) {
    absl::StatusOr<bloom::v1::ShardMap> map = Map();
    std::vector<std::string> members;
    if (map.ok()) {
      for (const bloom::v1::ShardGroup& each : map->groups()) {
        if (each.name() == group) members.assign(each.members().begin(), each.members().end());
      }
    }
    // Every member up now: a member that went away must read the map again before it can
    // serve (a pod takes no call for a filter before its first read of the map).
    bool all = map.ok() && !members.empty();
    std::string behind;
    for (const std::string& member : members) {
      grpc::ClientContext context;
      Prepare(context);
      bloom::v1::GetShardMapResponse response;
      const grpc::Status status =
          bloom::v1::BloomFilterService::NewStub(Pod(member).channel())
              ->GetShardMap(&context, bloom::v1::GetShardMapRequest(), &response);
      if (!status.ok() || response.map().version() < version) {
        all = false;
        behind = member;
      }
    }
    if (all) return absl::OkStatus();
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat("member ", behind, " of group ", group, " has not taken shard map version ",
                       version, " yet; run the move again to resume, or --abort it"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status Mover::WaitForFollowers(const std::string& group) {
  const absl::Time give_up = absl::Now() + kWaitForPods;
  while (true) {
    absl::StatusOr<bloom::v1::ShardMap> map = Map();
    std::vector<std::string> members;
    std::string primary;
    if (map.ok()) {
      for (const bloom::v1::ShardGroup& each : map->groups()) {
        if (each.name() != group) continue;
        members.assign(each.members().begin(), each.members().end());
        primary = each.primary();
      }
    }
    auto status_of = [&](const std::string& address) -> absl::StatusOr<rv1::StatusResponse> {
      grpc::ClientContext context;
      Prepare(context);
      rv1::StatusResponse response;
      absl::Status called =
          bloomclient::FromGrpcStatus(rv1::ReplicationService::NewStub(Pod(address).channel())
                                          ->Status(&context, rv1::StatusRequest(), &response));
      if (!called.ok()) return called;
      return response;
    };
    bool all = false;
    if (!primary.empty()) {
      absl::StatusOr<rv1::StatusResponse> held = status_of(primary);
      all = held.ok();
      for (const std::string& member : members) {
        if (!all || member == primary) continue;
        absl::StatusOr<rv1::StatusResponse> applied = status_of(member);
        all = applied.ok() && applied->sequence() >= held->sequence();
      }
    }
    if (all) return absl::OkStatus();
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat("the followers of group ", group,
                       " have not applied the copies yet; run the move "
                       "again to resume, or --abort it"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<size_t> Mover::CopyRound(bool paused) {
  absl::StatusOr<size_t> copied;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    copied = CopyRoundOnce(paused);
    if (copied.ok() || !Transient(copied.status())) return copied;
    absl::SleepFor(kRetryPause);  // a primary changing: the map names the next one
  }
  return copied;
}

absl::StatusOr<size_t> Mover::CopyRoundOnce(bool paused) {
  ForgetPrimaries();  // asked again each round
  absl::StatusOr<std::string> from = CachedPrimaryOf(from_);
  if (!from.ok()) return from.status();
  absl::StatusOr<std::string> to = CachedPrimaryOf(to_);
  if (!to.ok()) return to.status();
  round_hashes_ = 0;
  round_records_ = 0;
  round_catching_up_ = absl::ZeroDuration();
  absl::Time phase = absl::Now();
  absl::StatusOr<std::map<std::string, Seen>> held = ListHeld(*from);
  if (!held.ok()) return held.status();
  bool target_listed = false;
  {
    bloomsync::BlockingLock lock(&mu_);
    target_listed = target_listed_;
  }
  if (!target_listed) {
    // The copies an earlier run left at the target: with those this run imports, the only
    // ones a copy must delete first, and the only ones the paused round may have to delete.
    absl::StatusOr<std::map<std::string, Seen>> copies = ListHeld(*to);
    if (!copies.ok()) return copies.status();
    bloomsync::BlockingLock lock(&mu_);
    for (const auto& [name, seen] : *copies) maybe_at_target_.insert(name);
    target_listed_ = true;
  }
  round_listing_ = absl::Now() - phase;
  phase = absl::Now();
  const uint64_t bytes_before = bytes_;
  std::vector<std::string> to_copy;
  for (const auto& [name, seen] : *held) {
    // A followed copy is caught up below. A filter the owner cannot follow is copied once
    // before writes pause and once while they do.
    if (unfollowed_.count(name) != 0 ? !paused : cursors_.count(name) != 0) continue;
    to_copy.push_back(name);
  }
  size_t copied = 0;
  std::vector<std::string> again;  // what the catch-ups could not follow: copied whole
  absl::Time holds_renewed = absl::Now();
  for (size_t begin = 0; begin < to_copy.size(); begin += kCopyChunk) {
    const size_t end = std::min(to_copy.size(), begin + kCopyChunk);
    absl::StatusOr<size_t> chunk =
        CopyAll(std::vector<std::string>(to_copy.begin() + begin, to_copy.begin() + end));
    if (!chunk.ok()) return chunk.status();
    copied += *chunk;
    if (end < to_copy.size() && absl::Now() - holds_renewed > kRenewHoldsAfter) {
      // A long round: catching the copies made so far up renews their journal holds, which
      // would lapse before the round's catch-up (and the copies be made again).
      if (absl::Status caught = CatchUpCopies(*from, *to, again); !caught.ok()) return caught;
      holds_renewed = absl::Now();
    }
  }
  round_copying_ = absl::Now() - phase - round_catching_up_;
  if (absl::Status caught = CatchUpCopies(*from, *to, again); !caught.ok()) return caught;
  phase = absl::Now();
  std::vector<std::string> held_again;
  for (const std::string& name : std::set<std::string>(again.begin(), again.end())) {
    if (held->count(name) != 0) held_again.push_back(name);  // else gone: deleted once paused
  }
  absl::StatusOr<size_t> copied_again = CopyAll(held_again);
  if (!copied_again.ok()) return copied_again.status();
  round_bytes_ = bytes_ - bytes_before;
  round_copying_ += absl::Now() - phase;
  if (paused) {
    // Copies of filters deleted (or never there) at the owner go too: of the copies the
    // target may hold (listed when this run began, or imported since), those the owner does
    // not hold now.
    std::set<std::string> maybe_there;
    {
      bloomsync::BlockingLock lock(&mu_);
      maybe_there = maybe_at_target_;
    }
    for (const std::string& name : maybe_there) {
      if (held->count(name) != 0) continue;
      absl::Status deleted = DeleteAt(to_, name);
      if (!deleted.ok() && !absl::IsNotFound(deleted)) return deleted;
    }
    copied_ = *std::move(held);  // what the owner held when writes stopped
  }
  return copied + *copied_again;
}

absl::Status Mover::CatchUpCopies(const std::string& from, const std::string& to,
                                  std::vector<std::string>& copy_whole) {
  const absl::Time start = absl::Now();
  absl::StatusOr<CatchUpRound> round =
      CatchUp(Pod(from).channel(), Pod(to).channel(), cursors_,
              [this](grpc::ClientContext& context) { Prepare(context); });
  if (!round.ok()) return round.status();
  round_catching_up_ += absl::Now() - start;
  round_hashes_ += round->hashes;
  hashes_ += round->hashes;
  round_records_ += round->records;
  records_ += round->records;
  copy_whole.insert(copy_whole.end(), round->copy_whole.begin(), round->copy_whole.end());
  return absl::OkStatus();
}

}  // namespace

int MoveSlots(const bloomclient::BloomClient& client, const bloomclient::ClientOptions& options,
              const MoveArgs& args) {
  std::vector<absl::string_view> ends = absl::StrSplit(args.slots, absl::MaxSplits('-', 1));
  uint32_t first = 0;
  uint32_t last = 0;
  if (args.slots.empty() || !absl::SimpleAtoi(ends[0], &first) ||
      !absl::SimpleAtoi(ends.size() == 2 ? ends[1] : ends[0], &last) || first > last) {
    std::fprintf(stderr, "bloom-cli: cluster move needs --slots=FIRST-LAST (or SLOT)\n");
    return 2;
  }
  if (args.to.empty()) {
    std::fprintf(stderr, "bloom-cli: cluster move needs --to=GROUP\n");
    return 2;
  }
  Mover mover(client, options);
  return mover.Run(first, last, args.to, args.abort);
}

}  // namespace bloomcli

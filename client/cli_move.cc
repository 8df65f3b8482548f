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
#include "client/move_pods.h"
#include "common/blocking_mutex.h"

namespace bloomcli {
namespace {

namespace rv1 = bloom::replication::v1;

constexpr absl::Duration kRetryPause = MovePods::kRetryPause;
constexpr int kAttempts = MovePods::kAttempts;
// Catch-up rounds before the pause: until one moves fewer item hashes than this (the last
// round, while writes pause, then moves about as many), or this many rounds.
constexpr uint64_t kSmallRound = 20'000;
// ... and copies fewer bytes of changed windowed filters (or others that cannot be caught up)
// whole than this.
constexpr uint64_t kSmallRoundBytes = 16 << 20;
constexpr int kMaxCatchUpRounds = 10;
// Filters copied at once by default: a copy is a few calls that each wait on a pod, so with
// one at a time a move of many small filters (one per user) waits on round trips, not on the
// pods' work. As many as a pod lets one client export or import at once by default
// (--max_transfers_per_client; --copies matches pods set otherwise); a pod that lets fewer
// answers RESOURCE_EXHAUSTED, and the copy is tried again after a pause. Fewer copies at once
// do not spare other calls' latency (docs/performance.md): they only lengthen the move.
constexpr size_t kDefaultCopiesInFlight = 4;
constexpr size_t kMaxCopiesInFlight = 64;
// A round copies filters in chunks of this many; between chunks, once this long has passed
// since, it catches up the copies made so far, renewing the owner's journal holds (a minute).
constexpr size_t kCopyChunk = 1000;
constexpr absl::Duration kRenewHoldsAfter = absl::Seconds(20);

std::string Millis(absl::Duration duration) {
  return absl::StrCat(absl::ToInt64Milliseconds(duration), " ms");
}

class Mover {
 public:
  Mover(const bloomclient::BloomClient& seed, bloomclient::ClientOptions options,
        size_t copies_in_flight)
      : pods_(seed, std::move(options)), copies_in_flight_(copies_in_flight) {}

  // `max_filters`: a new move of slots holding more filters is refused.
  int Run(uint32_t first, uint32_t last, const std::string& to, bool abort, uint64_t max_filters);

 private:
  // Takes a step of the move; returns the map's version after it.
  absl::StatusOr<uint64_t> Step(rv1::MoveStep::Step step);
  // The filters of the moving slots that the pod at `address` holds itself.
  absl::StatusOr<std::set<std::string>> ListHeld(const std::string& address) {
    return pods_.ListHeld(address, first_, last_, slot_count_);
  }
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
  // Copies `names`, copies_in_flight_ at a time, and records what each copy did (cursors_,
  // unfollowed_, bytes_), failed copies' results too: returns how many were copied, or the
  // first failure.
  absl::StatusOr<size_t> CopyAll(const std::vector<std::string>& names);
  // FAILED_PRECONDITION when the owner of the slots' first slot holds more than `max_filters`
  // filters in them: the write pause grows with the filters a move carries.
  absl::Status CheckFilterCount(const bloom::v1::ShardMap& map, uint64_t max_filters);
  // Whether `group` owns every slot of the move in `map`.
  bool OwnedBy(const bloom::v1::ShardMap& map, const std::string& group) const;
  // Deletes the filters of the moving slots that groups other than the target hold (copies
  // a move left behind), once every member of every group holds `map`; returns how many.
  absl::StatusOr<size_t> DeleteLeftovers(const bloom::v1::ShardMap& map);
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
  // Brings held_ up to date at the owner's primary `from`: with the filters made since the
  // last round (ListMade), or by listing them all, after starting the owner's log of the
  // filters made (a first round, an owner that cannot say them all, or an older pod).
  absl::Status UpdateHeld(const std::string& from);
  // Calls ListMade at `from`.
  absl::StatusOr<rv1::ListMadeResponse> ListMade(const std::string& from,
                                                 const rv1::ListMadeRequest& request);
  // Calls for `pods_` to prepare (a lambda for move_catch_up.h).
  PrepareCall Preparer() {
    return [this](grpc::ClientContext& context) { pods_.Prepare(context); };
  }

  MovePods pods_;
  // Shared by the copies in flight (CopyAll); the rest of a Mover is its calling thread's.
  bloomsync::BlockingMutex mu_;
  // The filters the target may hold a copy of, which a copy deletes first: those it held when
  // this run began, and those this run imported. Until listed, every one.
  bool target_listed_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> maybe_at_target_ ABSL_GUARDED_BY(mu_);
  uint32_t first_ = 0;
  uint32_t last_ = 0;
  uint32_t slot_count_ = 0;
  std::string from_;
  std::string to_;
  std::set<std::string> copied_;  // the filters copied
  // The filters of the moving slots the owner holds, as the last round saw them (a full
  // listing, then the filters made since, less those found gone), and where the owner's log
  // of the filters made stands (none: list them all).
  std::set<std::string> held_;
  absl::optional<rv1::MadePosition> made_at_;
  const size_t copies_in_flight_;
  // Where each followed copy stands in its filter's journal at the owner (move_catch_up.h):
  // a round catches it up with what changed since, so the pause moves the last round's
  // changes, not whole filters.
  std::map<std::string, JournalCursor> cursors_;
  uint64_t bytes_ = 0;
  std::set<std::string> unfollowed_;  // filters the owner cannot follow (an older pod)
  uint64_t round_hashes_ = 0;         // item hashes the last round's catch-up moved
  uint64_t round_records_ = 0;        // ... and CUCKOO filters' journal records
  uint64_t records_ = 0;              // ... all rounds'
  uint64_t round_bytes_ = 0;          // bytes the last round copied whole
  uint64_t hashes_ = 0;               // item hashes caught up, all rounds'
  // Where the last round's time went: listing the filters held (at the owner, and at the
  // target in a run's first round), catching the copies up, copying filters whole.
  absl::Duration round_listing_;
  absl::Duration round_catching_up_;
  absl::Duration round_copying_;
};

absl::StatusOr<uint64_t> Mover::Step(rv1::MoveStep::Step step) {
  rv1::ChangeShardMapRequest request;
  request.mutable_move()->set_step(step);
  request.mutable_move()->set_first(first_);
  request.mutable_move()->set_last(last_);
  request.mutable_move()->set_to(to_);
  grpc::ClientContext context;
  pods_.Prepare(context);
  rv1::ChangeShardMapResponse response;
  absl::Status changed =
      bloomclient::FromGrpcStatus(rv1::ReplicationService::NewStub(pods_.seed_channel())
                                      ->ChangeShardMap(&context, request, &response));
  if (!changed.ok()) return changed;
  return response.version();
}

absl::StatusOr<Mover::Copied> Mover::CopyOnce(const std::string& name) {
  absl::StatusOr<std::string> from = pods_.CachedPrimaryOf(from_);
  if (!from.ok()) return from.status();
  Copied copied;
  // Held before the export: the copy holds every change up to the cursor.
  absl::StatusOr<JournalCursor> at = StartJournal(pods_.Pod(*from).channel(), name, Preparer());
  if (at.ok()) {
    copied.cursor = *at;
  } else if (absl::IsFailedPrecondition(at.status())) {
    // A follower answers so too: the primary asked for may have stepped down since.
    pods_.ForgetPrimaries();
    absl::StatusOr<std::string> now = pods_.PrimaryOf(from_);
    if (!now.ok()) return now.status();
    if (*now != *from) return absl::UnavailableError("the owner's primary changed: retry");
    // An older pod: the filter is copied whole again once writes pause.
  } else {
    return at.status();
  }
  std::ostringstream dump;
  if (absl::Status exported = pods_.Pod(*from).Export(name, dump); !exported.ok()) return exported;
  copied.bytes = dump.str().size();
  absl::StatusOr<std::string> to = pods_.CachedPrimaryOf(to_);
  if (!to.ok()) return to.status();
  // The copy replaces any older one: its counters stay the owner's (a merge would add them up).
  auto delete_copy = [&]() -> absl::Status {
    absl::Status deleted = pods_.DeleteAt(to_, name);
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
  absl::StatusOr<bloom::v1::FilterStats> imported = pods_.Pod(*to).Import(name, in);
  if (absl::IsAlreadyExists(imported.status()) && !may_be_there) {
    // A copy made after the target was listed (another mover of the same move): replaced.
    if (absl::Status deleted = delete_copy(); !deleted.ok()) return deleted;
    std::istringstream again(dump.str());
    imported = pods_.Pod(*to).Import(name, again);
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
  for (size_t i = 1; i < std::min(copies_in_flight_, names.size()); ++i) {
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
    if (results[i]->gone) {
      held_.erase(names[i]);
      continue;
    }
    bytes_ += results[i]->bytes;
    if (results[i]->cursor.has_value()) {
      cursors_[names[i]] = *results[i]->cursor;
    } else {
      unfollowed_.insert(names[i]);
    }
    copied_.insert(names[i]);
    ++copied;
  }
  if (!first_failure.ok()) return first_failure;
  return copied;
}

int Mover::Run(uint32_t first, uint32_t last, const std::string& to, bool abort,
               uint64_t max_filters) {
  first_ = first;
  last_ = last;
  to_ = to;
  absl::StatusOr<bloom::v1::ShardMap> map = pods_.Map();
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
    if (absl::Status bounded = CheckFilterCount(*map, max_filters); !bounded.ok()) {
      return Error(bounded);
    }
    absl::StatusOr<uint64_t> begun = Step(rv1::MoveStep::STEP_BEGIN);
    if (!begun.ok()) return Error(begun.status());
    map = pods_.Map();
    if (!map.ok()) return Error(map.status());
    if (!map->has_move()) {  // the seed has not seen it yet
      absl::SleepFor(kRetryPause);
      map = pods_.Map();
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
    absl::StatusOr<std::string> target = pods_.PrimaryOf(to_);
    if (!target.ok()) return Error(target.status());
    absl::StatusOr<std::set<std::string>> copies = ListHeld(*target);
    if (!copies.ok()) return Error(copies.status());
    for (const std::string& name : *copies) {
      absl::Status deleted = pods_.DeleteAt(to_, name);
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
  if (absl::Status seen = pods_.WaitForVersion(from_, paused_version); !seen.ok()) {
    return Error(seen);
  }
  const absl::Duration owner_waited = absl::Now() - pause_start;
  absl::StatusOr<size_t> last_changes = CopyRound(/*paused=*/true);
  if (!last_changes.ok()) return Error(last_changes.status());
  const absl::Time followers_start = absl::Now();
  if (absl::Status applied = pods_.WaitForFollowers(to_); !applied.ok()) return Error(applied);
  const absl::Duration followers_waited = absl::Now() - followers_start;
  absl::StatusOr<uint64_t> finished = Step(rv1::MoveStep::STEP_FINISH);
  if (!finished.ok()) return Error(finished.status());
  const absl::Duration pause = absl::Now() - pause_start;
  // The old owner's copies, which nobody reads any more. The move is done even if this fails:
  // running the command again deletes them.
  if (absl::StatusOr<bloom::v1::ShardMap> now = pods_.Map(); now.ok()) {
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

absl::Status Mover::CheckFilterCount(const bloom::v1::ShardMap& map, uint64_t max_filters) {
  std::string owner;
  for (const bloom::v1::SlotRange& range : map.ranges()) {
    if (range.first() <= first_ && range.last() >= first_) owner = range.group();
  }
  if (owner.empty() || owner == to_) return absl::OkStatus();  // the map step says what is wrong
  absl::StatusOr<std::string> primary = pods_.PrimaryOf(owner);
  if (!primary.ok()) return primary.status();
  absl::StatusOr<std::set<std::string>> held = ListHeld(*primary);
  if (!held.ok()) return held.status();
  if (held->size() <= max_filters) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "slots ", first_, "-", last_, " hold ", held->size(), " filters, more than --max-filters=",
      max_filters, ": writes to them would pause about ", held->size() * 2 / 1000,
      " ms at the end (about 2 us a filter). Move fewer slots at a time (cluster rebalance "
      "plans such moves), or pass a larger --max-filters to accept the pause"));
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
    if (absl::Status seen = pods_.WaitForVersion(group.name(), map.version()); !seen.ok()) {
      return seen;
    }
  }
  size_t deleted = 0;
  for (const bloom::v1::ShardGroup& group : map.groups()) {
    if (group.name() == to_) continue;
    absl::StatusOr<std::string> primary = pods_.PrimaryOf(group.name());
    if (!primary.ok()) return primary.status();
    absl::StatusOr<std::set<std::string>> left = ListHeld(*primary);
    if (!left.ok()) return left.status();
    for (const std::string& name : *left) {
      absl::Status gone = pods_.DeleteAt(group.name(), name);
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
    pods_.ForgetPrimaries();
    absl::SleepFor(kRetryPause);  // a primary changing: ask the map again
  }
  return absl::Status(copied.status().code(),
                      absl::StrCat("copying ", name, ": ", copied.status().message()));
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
  pods_.ForgetPrimaries();  // asked again each round
  absl::StatusOr<std::string> from = pods_.CachedPrimaryOf(from_);
  if (!from.ok()) return from.status();
  absl::StatusOr<std::string> to = pods_.CachedPrimaryOf(to_);
  if (!to.ok()) return to.status();
  round_hashes_ = 0;
  round_records_ = 0;
  round_catching_up_ = absl::ZeroDuration();
  absl::Time phase = absl::Now();
  if (absl::Status updated = UpdateHeld(*from); !updated.ok()) return updated;
  bool target_listed = false;
  {
    bloomsync::BlockingLock lock(&mu_);
    target_listed = target_listed_;
  }
  if (!target_listed) {
    // The copies an earlier run left at the target: with those this run imports, the only
    // ones a copy must delete first, and the only ones the paused round may have to delete.
    absl::StatusOr<std::set<std::string>> copies = ListHeld(*to);
    if (!copies.ok()) return copies.status();
    bloomsync::BlockingLock lock(&mu_);
    for (const std::string& name : *copies) maybe_at_target_.insert(name);
    target_listed_ = true;
  }
  round_listing_ = absl::Now() - phase;
  phase = absl::Now();
  const uint64_t bytes_before = bytes_;
  std::vector<std::string> to_copy;
  for (const std::string& name : held_) {
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
    if (held_.count(name) != 0) held_again.push_back(name);  // else gone: deleted once paused
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
      if (held_.count(name) != 0) continue;
      absl::Status deleted = pods_.DeleteAt(to_, name);
      if (!deleted.ok() && !absl::IsNotFound(deleted)) return deleted;
    }
    copied_ = held_;  // what the owner held when writes stopped
  }
  return copied + *copied_again;
}

absl::Status Mover::CatchUpCopies(const std::string& from, const std::string& to,
                                  std::vector<std::string>& copy_whole) {
  const absl::Time start = absl::Now();
  absl::StatusOr<CatchUpRound> round =
      CatchUp(pods_.Pod(from).channel(), pods_.Pod(to).channel(), cursors_, Preparer());
  if (!round.ok()) return round.status();
  round_catching_up_ += absl::Now() - start;
  round_hashes_ += round->hashes;
  hashes_ += round->hashes;
  round_records_ += round->records;
  records_ += round->records;
  copy_whole.insert(copy_whole.end(), round->copy_whole.begin(), round->copy_whole.end());
  for (const std::string& name : round->gone) held_.erase(name);
  return absl::OkStatus();
}

absl::StatusOr<rv1::ListMadeResponse> Mover::ListMade(const std::string& from,
                                                      const rv1::ListMadeRequest& request) {
  grpc::ClientContext context;
  pods_.Prepare(context);
  rv1::ListMadeResponse response;
  absl::Status called =
      bloomclient::FromGrpcStatus(rv1::ReplicationService::NewStub(pods_.Pod(from).channel())
                                      ->ListMade(&context, request, &response));
  if (absl::IsFailedPrecondition(called)) {
    // A follower's answer: the primary the map named stepped down since (the round is tried
    // again with the one it names next).
    return absl::UnavailableError(absl::StrCat("the owner's primary changed: ", called.message()));
  }
  if (!called.ok()) return called;
  return response;
}

absl::Status Mover::UpdateHeld(const std::string& from) {
  rv1::ListMadeRequest request;
  request.set_first(first_);
  request.set_last(last_);
  request.set_slot_count(slot_count_);
  if (made_at_.has_value()) {
    *request.mutable_since() = *made_at_;
    absl::StatusOr<rv1::ListMadeResponse> made = ListMade(from, request);
    if (!made.ok() && !absl::IsUnimplemented(made.status())) return made.status();
    if (made.ok() && made->complete()) {
      held_.insert(made->names().begin(), made->names().end());
      made_at_ = made->next();
      return absl::OkStatus();
    }
  }
  // Every filter, the log started first: a filter made during the listing is in one or both.
  made_at_.reset();
  request.clear_since();
  request.set_start(true);
  absl::StatusOr<rv1::ListMadeResponse> started = ListMade(from, request);
  if (started.ok()) {
    made_at_ = started->next();
  } else if (!absl::IsUnimplemented(started.status())) {
    return started.status();  // (an older pod answers UNIMPLEMENTED: every round lists)
  }
  absl::StatusOr<std::set<std::string>> listed = ListHeld(from);
  if (!listed.ok()) {
    made_at_.reset();
    return listed.status();
  }
  held_ = *std::move(listed);
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
  uint64_t max_filters = kDefaultMaxFiltersPerMove;
  if (!args.max_filters.empty() &&
      (!absl::SimpleAtoi(args.max_filters, &max_filters) || max_filters < 1)) {
    std::fprintf(stderr, "bloom-cli: cluster move takes --max-filters=N (at least 1)\n");
    return 2;
  }
  size_t copies = kDefaultCopiesInFlight;
  if (!args.copies.empty() &&
      (!absl::SimpleAtoi(args.copies, &copies) || copies < 1 || copies > kMaxCopiesInFlight)) {
    std::fprintf(stderr, "bloom-cli: cluster move takes --copies=N (1 to %zu, default %zu)\n",
                 kMaxCopiesInFlight, kDefaultCopiesInFlight);
    return 2;
  }
  Mover mover(client, options, copies);
  return mover.Run(first, last, args.to, args.abort, max_filters);
}

}  // namespace bloomcli

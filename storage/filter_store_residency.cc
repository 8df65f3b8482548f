// Residency: filter bits in memory are a cache under the memory limit; RocksDB holds every
// filter. (FilterStore's residency methods; the API is filter_store.h.)
//
// Eviction. A charge that takes the memory in use over the limit (memory_budget.h) wakes the
// evictor thread, which evicts the least recently used filters until the memory in use is under
// the low watermark (the limit minus 1/16). Evicting a filter, with its name's lock held:
// StoredFilter::Evict marks it evicted under its apply lock, so no add applies to it any more,
// and checkpoints it (its pages and counters written, its journal trimmed); then it leaves the
// resident map and its bits are freed when the last operation holding it finishes. An add that
// meets an evicted object answers StoredFilter::EvictedError, and the store looks the filter up
// again. The evictor only try-locks (a name's lock, a filter's apply lock) and skips what is
// busy: a busy filter is in use, not a candidate, and so the evictor never waits for a thread
// that waits for it.
//
// Loading. A name missing from memory, once some filter may be cold, is looked up in RocksDB
// under the name's lock (one loader per name; Reserve, Delete, Import and eviction of that name
// wait): its metadata record, its pages (one range scan) and any journal after its checkpoint
// (only for filters left cold at start-up with journal records: the start-up scan notes them)
// rebuild it as start-up would.
//
// Without a limit, or before the first filter leaves memory, a missing name is simply missing:
// no RocksDB read on that path.

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/heap.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "storage/db/rocksdb_status.h"
#include "storage/db/database.h"
#include "storage/filter_store.h"
#include "storage/format/encoding.h"
#include "storage/format/page_encoding.h"

namespace storage {
namespace {

// Eviction stops once memory in use is this fraction of the limit below it, so one eviction
// round makes room for many loads.
constexpr uint64_t kLowWatermarkDivisor = 16;
// Rounds one scan of every resident filter serves (QueueEvictionCandidates).
constexpr uint64_t kRoundsPerScan = 4;
// WaitForRoom holds a loading thread back while memory in use is this fraction over the limit,
// for at most kMaxWaitForRoom (then it goes on: the evictor may only find busy filters).
constexpr uint64_t kHighWatermarkDivisor = 8;
constexpr auto kMaxWaitForRoom = std::chrono::milliseconds(500);

// Loads the checkpointed pages of `generation` into `filter`.
absl::Status LoadPages(const Database& db, uint64_t generation, StoredFilter& filter) {
  GenerationScan it(db, db.blocks(), generation);
  std::string scratch;
  for (; it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(const BlockKeyParts key, ParseBlockKey(ViewOf(it->key())));
    RETURN_IF_ERROR(filter.LoadStoredPage(key.sub_filter, key.page, ViewOf(it->value()), scratch));
  }
  return FromRocksDb(it->status(), "loading filter pages");
}

// Replays the journal records of `record`'s filter after its checkpoint into `filter`;
// `max_seq` and `replayed_bytes` grow by what was replayed.
absl::Status ReplayJournal(const Database& db, const FilterRecord& record, StoredFilter& filter,
                           uint64_t& max_seq, uint64_t& replayed_bytes) {
  GenerationScan it(db, db.journal(), record.generation);
  for (; it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(const JournalKeyParts key, ParseJournalKey(ViewOf(it->key())));
    if (key.seq <= record.checkpoint_seq) continue;  // already in the pages
    RETURN_IF_ERROR(filter.ReplayJournalRecord(ViewOf(it->value())));
    max_seq = std::max(max_seq, key.seq);
    replayed_bytes += it->value().size();
  }
  return FromRocksDb(it->status(), "loading the journal");
}

}  // namespace

std::shared_ptr<StoredFilter> FilterStore::FindFresh(absl::string_view name, bool& resident) const {
  std::shared_ptr<StoredFilter> filter = Find(name);
  resident = filter != nullptr;
  // An idle-expired filter goes the slow way, which deletes it under the name's lock.
  if (filter == nullptr || filter->evicted() ||
      (filter->has_idle_ttl() && IdleExpired(*filter, options_.clock->Now()))) {
    return nullptr;
  }
  filter->Touch();
  return filter;
}

absl::StatusOr<std::shared_ptr<StoredFilter>> FilterStore::Acquire(
    absl::string_view name,
    absl::FunctionRef<void()> before_waiting) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  bool resident = false;
  if (std::shared_ptr<StoredFilter> filter = FindFresh(name, resident)) return filter;
  if (!resident && !MayHaveCold()) return nullptr;
  bloomsync::Mutex& name_lock = NameLock(name);
  if (!name_lock.TryLock()) {
    before_waiting();
    name_lock.Lock();
  }
  absl::StatusOr<std::shared_ptr<StoredFilter>> acquired = AcquireLocked(name);
  name_lock.Unlock();
  if (acquired.ok() && *acquired != nullptr && budget_.over_limit()) {
    before_waiting();
    WaitForRoom();
  }
  return acquired;
}

absl::StatusOr<std::shared_ptr<StoredFilter>> FilterStore::AcquireOrCreate(
    absl::string_view name, const bloom::FilterParams& spec, bool& created,
    absl::FunctionRef<void()> before_waiting) {
  created = false;
  bool resident = false;
  std::shared_ptr<StoredFilter> filter = FindFresh(name, resident);
  // A filter deleted under this add is made again, as a missing one is.
  if (filter != nullptr && !absl::IsNotFound(filter->Usable())) return filter;
  filter.reset();
  return FindOrCreate(name, spec, created, /*defer_write=*/true, before_waiting);
}

absl::StatusOr<std::shared_ptr<StoredFilter>> FilterStore::AcquireLocked(absl::string_view name) {
  // With the name's lock held no eviction of this name is in progress: what Find returns is
  // resident (an evicted object has left the map before the evictor released the lock).
  if (std::shared_ptr<StoredFilter> filter = Find(name)) {
    if (filter->has_idle_ttl() && IdleExpired(*filter, options_.clock->Now())) {
      RETURN_IF_ERROR(ExpireLocked(filter));
      return nullptr;
    }
    filter->Touch();
    return filter;
  }
  if (!MayHaveCold()) return nullptr;
  return LoadCold(name);
}

absl::StatusOr<std::shared_ptr<StoredFilter>> FilterStore::FindUsable(
    absl::string_view name, absl::FunctionRef<void()> before_waiting) {
  RETURN_IF_ERROR(ValidateFilterName(name));
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, Acquire(name, before_waiting));
  if (filter == nullptr) return absl::NotFoundError(absl::StrCat("filter '", name, "' not found"));
  RETURN_IF_ERROR(filter->Usable());
  return filter;
}

absl::StatusOr<std::shared_ptr<StoredFilter>> FilterStore::LoadCold(absl::string_view name)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const absl::Time start = absl::Now();
  // On a replica, no replicated batch lands between this load's reads and its Insert
  // (replica_mu_): each is either read here or replayed into the resident filter afterwards.
  if (options_.replica) replica_mu_.ReaderLock();
  struct ReplicaUnlock {
    bloomsync::Mutex* mu;
    ~ReplicaUnlock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (mu != nullptr) mu->ReaderUnlock();
    }
  } unlock{options_.replica ? &replica_mu_ : nullptr};
  ASSIGN_OR_RETURN(absl::optional<StoredRecord> found, ReadFilterRecord(*db_, name));
  if (!found.has_value()) return nullptr;
  absl::StatusOr<FilterRecord>& record = found->record;
  if (!record.ok()) {
    // As at start-up: the name answers DATA_LOSS and can be deleted.
    auto broken =
        std::make_shared<StoredFilter>(static_cast<std::string>(name), absl::OkStatus(), &context_);
    broken->MarkUnreadable(record.status());
    Insert(broken);
    residency_.cold_filters.fetch_sub(1, std::memory_order_relaxed);
    return broken;
  }
  ASSIGN_OR_RETURN(const bool expired, ExpireColdIfIdle(name, *record));
  if (expired) return nullptr;
  uint64_t bytes = RecordCharge(*record);
  RETURN_IF_ERROR(CheckResidentCharge(bytes, name));
  RETURN_IF_ERROR(budget_.ChargeCached(bytes, 0, absl::StrCat("loading filter '", name, "'")));
  absl::StatusOr<StoredFilter::Built> filter =
      StoredFilter::Build(*record, options_.clock, /*drop_expired=*/true);
  if (!filter.ok()) {
    budget_.Release(bytes);
    return filter.status();
  }
  // Expired slices were left out: charge what was built.
  const uint64_t built = filter->charge();
  if (built < bytes) {
    budget_.Release(bytes - built);
    bytes = built;
  }
  std::shared_ptr<StoredFilter> stored =
      StoredFilter::Make(name, *record, *std::move(filter), &context_, bytes);
  absl::Status loaded = LoadPages(*db_, record->generation, *stored);
  uint64_t max_seq = record->checkpoint_seq;
  uint64_t replayed_bytes = 0;
  bool journaled = false;
  {
    bloomsync::MutexLock lock(&residency_.cold_journaled_mu);
    // A replica keeps no such set: the primary's adds reach it as journal records.
    journaled = options_.replica || residency_.cold_journaled.contains(record->generation);
  }
  if (loaded.ok() && journaled) {
    loaded = ReplayJournal(*db_, *record, *stored, max_seq, replayed_bytes);
  }
  if (!loaded.ok()) {
    // A read error is not the filter's fault: answer it and leave the filter cold. Bad data is.
    if (absl::IsUnavailable(loaded) || absl::IsAborted(loaded)) return loaded;
    stored->MarkUnreadable(loaded);
    bloomlog::LogError(stored->Usable().message());
  }
  stored->FinishRecovery(max_seq + 1, replayed_bytes);
  if (journaled) {  // its next checkpoint trims what was replayed
    bloomsync::MutexLock lock(&residency_.cold_journaled_mu);
    residency_.cold_journaled.erase(record->generation);
  }
  Insert(stored);
  residency_.cold_filters.fetch_sub(1, std::memory_order_relaxed);
  residency_.loads.fetch_add(1, std::memory_order_relaxed);
  residency_.load_micros.fetch_add(absl::ToInt64Microseconds(absl::Now() - start),
                                   std::memory_order_relaxed);
  return stored;
}

absl::Status FilterStore::DeleteCold(absl::string_view name) {
  ASSIGN_OR_RETURN(absl::optional<StoredRecord> found, ReadFilterRecord(*db_, name));
  if (!found.has_value()) {
    return absl::NotFoundError(absl::StrCat("filter '", name, "' not found"));
  }
  const absl::StatusOr<FilterRecord>& record = found->record;
  // A stand-in that knows the generation deletes pages and journal too (StoredFilter::Delete).
  StoredFilter cold(static_cast<std::string>(name), absl::OkStatus(), &context_,
                    record.ok() ? absl::optional<uint64_t>(record->generation) : absl::nullopt);
  RETURN_IF_ERROR(cold.Delete(options_.sync));
  residency_.cold_filters.fetch_sub(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

void FilterStore::QueueEvictionCandidates(uint64_t used, uint64_t target) {
  // Two passes under each shard's reader lock, without a shared_ptr copy of every filter
  // (Snapshot) nor a status per filter: the recency of every resident filter, then the names
  // of the oldest. Only the oldest few are needed: as many as a round frees on average, for
  // kRoundsPerScan rounds, picked in linear time (nth_element); only those are sorted: with
  // millions of resident filters, sorting them all, or scanning them every round, would be a
  // large share of the server's CPU while filters are created through a small budget.
  auto evictable = [](const StoredFilter& filter) { return filter.usable() && !filter.evicted(); };
  // Ages from one now, oldest largest: the ticks wrap (StoredFilter::Touch).
  const uint32_t now = StoredFilter::NowTicks();
  std::vector<uint32_t> ages;
  ages.reserve(num_filters());
  registry_.Visit([&](const std::shared_ptr<StoredFilter>& filter) {
    if (evictable(*filter)) {
      ages.push_back(StoredFilter::TicksSince(filter->last_used_ticks(), now));
    }
  });
  residency_.eviction_queue.clear();
  if (ages.empty()) return;
  const uint64_t average = std::max<uint64_t>(1, used / ages.size());
  const uint64_t per_round = (used > target ? (used - target) / average : 0) + 64;
  const size_t keep = std::min<size_t>(ages.size(), kRoundsPerScan * per_round);
  std::nth_element(ages.begin(), ages.begin() + (keep - 1), ages.end(), std::greater<>());
  const uint32_t cutoff = ages[keep - 1];
  ages = {};
  // Filters used since the first pass are younger than the cutoff now, and left out: they are
  // not among the oldest any more.
  std::vector<ResidencyState::EvictionCandidate> queue;
  registry_.Visit([&](const std::shared_ptr<StoredFilter>& filter) {
    const uint32_t last_used = filter->last_used_ticks();
    const uint32_t age = StoredFilter::TicksSince(last_used, now);
    if (age >= cutoff && evictable(*filter)) {
      queue.push_back({last_used, age, static_cast<std::string>(filter->name())});
    }
  });
  // Oldest last: popped first.
  std::sort(queue.begin(), queue.end(),
            [](const ResidencyState::EvictionCandidate& a,
               const ResidencyState::EvictionCandidate& b) { return a.age < b.age; });
  residency_.eviction_queue = std::move(queue);
}

void FilterStore::EvictToBudget() {
  const uint64_t limit = budget_.limit();
  if (limit == 0) return;
  const uint64_t target = limit - limit / kLowWatermarkDivisor;
  // The round's lock before the check of the memory in use: a caller returns only after a round
  // in progress on another thread has finished. Checked first, a round that had evicted one of
  // its victims (taking the memory under the limit, not yet under the low watermark) made a
  // test's EvictToBudget return at once and see half a round.
  bloomsync::BlockingLock round(&residency_.round_mu);
  if (budget_.used() <= limit) return;
  // Victims come oldest first from the queue of the last scan, which serves several rounds.
  // That is still exactly least recently used first: every filter left out of the queue was
  // used after every queued one, and a queued filter used since (its recency changed) is
  // skipped. A round scans again once the queue runs out.
  bool scanned = false;
  uint64_t evicted_now = 0;
  while (budget_.used() > target) {
    if (residency_.eviction_queue.empty()) {
      if (scanned) break;  // every filter this round found was busy
      QueueEvictionCandidates(budget_.used(), target);
      scanned = true;
      continue;
    }
    const ResidencyState::EvictionCandidate candidate = std::move(residency_.eviction_queue.back());
    residency_.eviction_queue.pop_back();
    // The lifecycle lock per filter, not per round: a round can take long, and Close() or a
    // RocksDB reopen (which take it exclusively) must not wait for all of it.
    bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
    if (closed_.load() || db_->NeedsReopen()) break;
    bloomsync::Mutex& name_lock = NameLock(candidate.name);
    if (!name_lock.TryLock()) continue;  // a Reserve, Delete or load of a name in its stripe
    // Looked up under the name's lock, so nothing replaces it before it leaves the map.
    std::shared_ptr<StoredFilter> filter = Find(candidate.name);
    // Gone, loaded again (another object) or used since the scan.
    if (filter == nullptr || filter->last_used_ticks() != candidate.last_used) {
      name_lock.Unlock();
      continue;
    }
    // Before the filter leaves the map, so that a miss looks in RocksDB from now on.
    residency_.may_have_cold.store(true, std::memory_order_release);
    // A replica's RocksDB already holds everything the filter has (the primary wrote it):
    // dropping it from memory is the whole eviction.
    absl::Status evicted = options_.replica ? absl::OkStatus() : filter->Evict(options_.sync);
    if (evicted.ok()) {
      Remove(filter->name());
      residency_.cold_filters.fetch_add(1, std::memory_order_relaxed);
      residency_.evictions.fetch_add(1, std::memory_order_relaxed);
    } else if (!absl::IsFailedPrecondition(evicted)) {
      bloomlog::LogError(absl::StrCat("evicting filter '", filter->name(),
                                      "' failed (it stays in memory): ", evicted.message()));
    }
    name_lock.Unlock();
    filter.reset();  // its bits are freed here, or when the last operation on it ends
    if (!evicted.ok() && !absl::IsFailedPrecondition(evicted)) break;  // RocksDB refuses writes
    if (evicted.ok() && ++evicted_now % 64 == 0) {
      bloomsync::BlockingLock lock(&residency_.evict_mu);
      residency_.evicted_cv.NotifyAll();
    }
  }
  bloomsync::BlockingLock lock(&residency_.evict_mu);
  residency_.evicted_cv.NotifyAll();
}

void FilterStore::EvictLoop() {
  absl::Time last_trim = absl::InfinitePast();
  bloomsync::BlockingLock lock(&residency_.evict_mu);
  while (!residency_.evict_stop) {
    residency_.evict_cv.WaitFor(lock, std::chrono::seconds(1),
                                [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(residency_.evict_mu) {
                                  return residency_.evict_requested || residency_.evict_stop;
                                });
    if (residency_.evict_stop) break;
    residency_.evict_requested = false;
    lock.Unlock();
    const uint64_t evictions_before = residency_.evictions.load(std::memory_order_relaxed);
    EvictToBudget();
    // Freed filters leave free pages all over the heap, which the allocator keeps (and RSS
    // counts) for a while or, with glibc, until something of the same size comes: under a
    // churning cache that is hundreds of MB of RSS beyond the budget. Give free pages back, at
    // most once a second.
    const absl::Time now = absl::Now();
    if (residency_.evictions.load(std::memory_order_relaxed) != evictions_before &&
        now - last_trim >= absl::Seconds(1)) {
      bloomheap::ReleaseFreeMemory();
      last_trim = now;
    }
    lock.Lock();
  }
}

void FilterStore::WaitForRoom() {
  const uint64_t limit = budget_.limit();
  if (limit == 0 || !evictor_.joinable()) return;
  const uint64_t high = limit + limit / kHighWatermarkDivisor;
  bloomsync::BlockingLock lock(&residency_.evict_mu);
  residency_.evicted_cv.WaitFor(lock, kMaxWaitForRoom,
                                [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(residency_.evict_mu) {
                                  return budget_.used() <= high || residency_.evict_stop;
                                });
}

}  // namespace storage

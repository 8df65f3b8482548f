// JournalHolds: filters whose journal a slot move is reading (FilterStore::StartJournal and
// ReadJournal, filter_store_journal.cc). A checkpoint normally deletes the journal records its
// pages cover; while a filter is held it keeps those after the hold's sequence, so that a
// mover catching a copy up reads every add since its last read from the journal instead of
// copying the whole filter again. A hold lapses by itself (each read renews it), so a mover
// that dies leaves nothing behind for long. Records a hold kept that a checkpoint already
// covers are never replayed (recovery skips them); they stay on disk until a later checkpoint
// trims with a range delete (from the generation's first record) or the filter is deleted, as
// a moved filter is at its old owner once the move is done.
//
//   holds.Hold(generation, seq, now, absl::Minutes(1));
//   if (holds.Covers(generation, seq, now)) ... records after seq are still there
//   to_seq = holds.TrimLimit(generation, to_seq, now);   // in a checkpoint
//
// Thread-safety: thread-safe.
#ifndef STORAGE_FILTER_JOURNAL_HOLDS_H_
#define STORAGE_FILTER_JOURNAL_HOLDS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace storage {

class JournalHolds {
 public:
  // Keeps `generation`'s records after `after_seq` for `hold` from `now`: a new hold, or one
  // moved to a later sequence (never to an earlier one: what was trimmed is gone) and renewed.
  void Hold(uint64_t generation, uint64_t after_seq, absl::Time now, absl::Duration hold) {
    const absl::Time until = now + hold;
    bloomsync::MutexLock lock(&mu_);
    auto [it, added] = holds_.try_emplace(generation, Entry{after_seq, until});
    if (!added) {
      it->second.after_seq = std::max(it->second.after_seq, after_seq);
      it->second.until = until;
    }
    if (holds_.size() > sweep_above_) {
      Sweep(now);
      // The next sweep once the table has doubled: a move holds every filter of its slots,
      // all live, and sweeping on each hold past a fixed size would make a round of N holds
      // cost N^2.
      sweep_above_ = std::max(kSweepAbove, 2 * holds_.size());
    }
    count_.store(holds_.size(), std::memory_order_release);
  }

  // Whether a hold has kept `generation`'s records after `after_seq` without a lapse: one is
  // live now at that sequence or an earlier one.
  bool Covers(uint64_t generation, uint64_t after_seq, absl::Time now) const {
    bloomsync::ReaderMutexLock lock(&mu_);
    auto it = holds_.find(generation);
    return it != holds_.end() && it->second.until > now && it->second.after_seq <= after_seq;
  }

  // How far a checkpoint covering `to_seq` may trim `generation`'s journal.
  uint64_t TrimLimit(uint64_t generation, uint64_t to_seq, absl::Time now) const {
    if (count_.load(std::memory_order_acquire) == 0) return to_seq;  // the usual case
    bloomsync::ReaderMutexLock lock(&mu_);
    auto it = holds_.find(generation);
    if (it == holds_.end() || it->second.until <= now) return to_seq;
    return std::min(to_seq, it->second.after_seq);
  }

  // Whether a hold on `generation` is live at `now`; if so, `after_seq` receives its sequence
  // (the records after it are what the mover has not read yet).
  bool HeldAfter(uint64_t generation, absl::Time now, uint64_t* after_seq) const {
    bloomsync::ReaderMutexLock lock(&mu_);
    auto it = holds_.find(generation);
    if (it == holds_.end() || it->second.until <= now) return false;
    *after_seq = it->second.after_seq;
    return true;
  }

  // No hold at all (live or lapsed): the usual case, read without the lock.
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  // Holds in the table, live or lapsed (not swept yet).
  size_t size() const { return count_.load(std::memory_order_acquire); }

  void Release(uint64_t generation) {
    bloomsync::MutexLock lock(&mu_);
    holds_.erase(generation);
    count_.store(holds_.size(), std::memory_order_release);
  }

 private:
  struct Entry {
    uint64_t after_seq;
    absl::Time until;
  };
  // Lapsed holds are dropped when the table grows past this, or past twice its size after the
  // last sweep (a move holds its filters only).
  static constexpr size_t kSweepAbove = 1024;

  void Sweep(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::erase_if(holds_, [&](const auto& hold) { return hold.second.until <= now; });
  }

  mutable bloomsync::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> holds_ ABSL_GUARDED_BY(mu_);  // by generation
  size_t sweep_above_ ABSL_GUARDED_BY(mu_) = kSweepAbove;
  std::atomic<size_t> count_{0};
};

}  // namespace storage

#endif  // STORAGE_FILTER_JOURNAL_HOLDS_H_

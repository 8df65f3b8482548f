// A scalable Bloom filter (Almeida et al., "Scalable Bloom Filters", 2007; as RedisBloom): a chain
// of blocked sub-filters that grows as items arrive while the compound FPR stays under the
// requested rate.
//
// Sub-filter i has capacity `capacity * expansion^i` and error rate `error_rate * (1-r) * r^i`
// with r = 1/2, so sum_i error_i < error_rate however far the chain grows. A non-scaling filter
// has one sub-filter at the full `error_rate` and refuses adds beyond its capacity.
//
// Add() runs in steps so that the storage layer can persist an add before it is visible:
//   1. MightContainMany(): items that are present already (or twice in the batch) are not new.
//   2. Reserve() room for the new items in the newest sub-filter; when it is full, open the next
//      one under the growth lock, calling `on_new_sub_filter` (storage persists its metadata)
//      before publishing it.
//   3. Call `before_apply` with where the new items go (storage writes its journal), then set
//      the bits. If a hook fails, the reservations are undone and no bit is set.
//
// A windowed filter (spec.window > 0, see window.h) is the same chain cut into time slices:
// each sub-filter belongs to one slice, an add goes to the newest sub-filter of the current
// slice (opening the slice's first one when time moved on), queries skip expired slices, and
// Retire() drops expired sub-filters from the front of the chain. Sub-filter indexes keep
// counting up across retirements, so index i always names the same sub-filter (and its pages).
//
// Thread-safety: Add() and MightContainMany() run concurrently without locks: sub-filters are
// appended (published with release stores), slot reservation is a CAS loop on each
// sub-filter's counter, and the bits are atomic (blocked_filter.h). Opening a sub-filter is
// serialised by growth_mu_. AppendSubFilter() is for loading, before the filter is shared.
// Only a windowed filter ever removes sub-filters: Retire() takes its window's retire_mu
// exclusively, and the read-side calls of a windowed filter (MightContainMany, items_added,
// size_bytes, ComputeStats, num_sub_filters) hold it shared. Retire() must not run while an add is
// between PrepareAdd and CommitAdd/AbortAdd, nor during Add, Replay or a walk of first()/next()
// (the storage layer holds its apply lock exclusively around it). Two concurrent adds of the same
// new item may both count it as new; the bits are the same.
#ifndef BLOOM_SCALABLE_FILTER_H_
#define BLOOM_SCALABLE_FILTER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "bloom/blocked_filter.h"
#include "bloom/filter_params.h"
#include "bloom/filter_stats.h"
#include "bloom/hash.h"
#include "bloom/slice_arena.h"
#include "bloom/sub_filter.h"
#include "bloom/window.h"
#include "common/mutex.h"

namespace bloom {

class ScalableFilter {
 public:
  // `spec` must be normalized. Creates sub-filter 0 (of the current slice, if windowed).
  // `clock` (windows only) must outlive the filter.
  static absl::StatusOr<std::unique_ptr<ScalableFilter>> Create(
      const FilterParams& spec, uint64_t seed,
      const bloomtime::Clock* clock = bloomtime::Clock::Real());
  // For loading stored filters: no sub-filter yet; AppendSubFilter() the stored ones, whose
  // indexes count up from `first_index` (above 0 only for a windowed filter that retired some;
  // ignored without a window, whose chain starts at 0).
  static std::unique_ptr<ScalableFilter> CreateEmpty(
      const FilterParams& spec, uint64_t seed,
      const bloomtime::Clock* clock = bloomtime::Clock::Real(), int first_index = 0);

  // An empty chain with no spec, for an object that holds no filter (an unreadable one):
  // nothing may be asked of it.
  ScalableFilter();
  // Takes `other`'s chain and leaves it empty, as ScalableFilter() makes one. Only before
  // either is shared: a chain is built before the object that holds it (storage's filter).
  ScalableFilter(ScalableFilter&& other) noexcept;
  ScalableFilter(const ScalableFilter&) = delete;
  ScalableFilter& operator=(const ScalableFilter&) = delete;
  ~ScalableFilter();

  // The spec it was made with, idle_ttl zero (see FilterParams). A copy: a filter without a
  // window keeps it as a few fields.
  FilterParams spec() const;
  bool windowed() const { return head_kind() == kWindowHead; }
  uint64_t seed() const { return seed_; }
  uint64_t Hash(absl::string_view item) const { return HashItem(item, seed_); }

  // The clock a window ages by; Clock::Real() for a filter without a window (which keeps none).
  const bloomtime::Clock* clock() const {
    return windowed() ? window()->clock : bloomtime::Clock::Real();
  }
  // Sub-filters in memory (for a windowed filter: expired ones not yet retired included).
  int num_sub_filters() const;
  // Index of the oldest sub-filter in memory (the next one's when there is none).
  int first_index() const;
  // The index the next sub-filter gets.
  int next_index() const;
  SubFilter* first() const {
    switch (head_kind()) {
      case kFirstHead:
        return reinterpret_cast<SubFilter*>(head_);  // NOLINT(performance-no-int-to-ptr): tagged
      case kWindowHead:
        return window()->first.get();
      default:  // an empty chain (ScalableFilter()) has no Spare either
        return spare() == nullptr ? nullptr : spare()->first.get();
    }
  }
  // The newest sub-filter, or nullptr. Without a window, the end of the chain from first():
  // a walk of its sub-filters (one for most filters), whose next() links are published with
  // release stores; a window, whose chain can be long, keeps it.
  SubFilter* newest() const {
    if (windowed()) return window()->newest.load(std::memory_order_acquire);
    SubFilter* last = first();
    if (last != nullptr) {
      for (SubFilter* sub = last->next(); sub != nullptr; sub = sub->next()) last = sub;
    }
    return last;
  }
  // Sub-filter `index`, or nullptr (never existed, or retired); O(sub-filters).
  SubFilter* sub_filter(int index) const;

  // Builds the sub-filter that would come next (not yet appended); for a windowed filter, in
  // the slice of the clock's current time.
  absl::StatusOr<std::unique_ptr<SubFilter>> MakeNextSubFilter() const;
  // Zeroed bits for a sub-filter of `layout` at `position` in its slice (0 without a window):
  // a slot of the slice arena for a large window's slice, else bits of their own.
  absl::StatusOr<std::unique_ptr<BlockedBloomFilter>> MakeBits(const BlockedLayout& layout,
                                                               int position) const;
  // Appends `sub` (whose index must be next_index()). For loading: not thread-safe.
  void AppendSubFilter(std::unique_ptr<SubFilter> sub);

  // For each i with present[i] == false, sets it if any sub-filter might contain hashes[i]
  // (for a windowed filter: any unexpired one, by the clock).
  void MightContainMany(absl::Span<const uint64_t> hashes, bool* present) const;

  // Windowed filters: the index of the newest sub-filter in the expired prefix of the chain at
  // `now`, or -1 when the oldest one has not expired.
  int ExpiredThrough(absl::Time now) const;
  // Unlinks the sub-filters with index <= `through` (an expired prefix) and hands them over.
  // See the class comment for what must not run meanwhile.
  std::vector<std::unique_ptr<SubFilter>> Retire(int through);

  // Where the new items of one add go: the first runs[0].count new hashes to sub-filter
  // runs[0].sub_filter, the next runs[1].count to runs[1].sub_filter, and so on.
  struct Run {
    int sub_filter;
    uint64_t count;
  };
  using NewSubFilterHook = absl::FunctionRef<absl::Status(const SubFilter&)>;
  using BeforeApplyHook =
      absl::FunctionRef<absl::Status(absl::Span<const Run>, absl::Span<const uint64_t>)>;

  // Adds the items with these hashes; added[i] (hashes.size() elements) tells whether item i
  // was new. Errors: ResourceExhausted when a non-scaling filter lacks room for all the new
  // items or the chain cannot grow; any error of a hook. On error nothing was added.
  absl::Status Add(absl::Span<const uint64_t> hashes, bool* added,
                   NewSubFilterHook on_new_sub_filter, BeforeApplyHook before_apply);
  // Add() in parts, for a caller that persists several adds together (storage's group
  // commit): PrepareAdd runs steps 1 and 2 (on error, nothing is reserved and `added` is all
  // false); then exactly one of CommitAdd (sets the bits) or AbortAdd (gives the room back).
  // With no new items (new_hashes empty) neither is needed.
  struct PreparedAdd {
    std::vector<Run> runs;
    std::vector<uint64_t> new_hashes;
  };
  absl::StatusOr<PreparedAdd> PrepareAdd(absl::Span<const uint64_t> hashes, bool* added,
                                         NewSubFilterHook on_new_sub_filter);
  void CommitAdd(const PreparedAdd& prepared);
  void AbortAdd(const PreparedAdd& prepared);
  // Add() without persistence, for in-memory use.
  absl::Status Add(absl::Span<const uint64_t> hashes, bool* added);

  // Sets the bits of a journalled add again (recovery); InvalidArgument if a run names a
  // sub-filter that does not exist or the counts do not match. Runs naming sub-filters a
  // windowed filter retired are skipped.
  absl::Status Replay(absl::Span<const Run> runs, absl::Span<const uint64_t> new_hashes);

  // A slot move's catch-up of a copy (storage's ApplyJournalRecords): the owner's journalled
  // adds `runs` and `new_hashes` (naming the owner's sub-filters, whose indices a copy exported
  // from it shares). Sets, and counts as added, those their sub-filter does not hold yet
  // (`persist` gets them as one run per sub-filter, as an add's record): a copy exported after the
  // owner's position holds some of them already, and counting those again would fill its
  // sub-filters sooner than the owner's. Runs naming retired sub-filters are skipped. Checks every
  // run first: FAILED_PRECONDITION (nothing changed) for a sub-filter this chain never had (the
  // owner opened it after the copy: copy it whole), INVALID_ARGUMENT when the counts do not add up.
  // `persist` gets what will be set before anything is; its error changes nothing. Answers how many
  // hashes it set. Must not race Add, Replay or Retire.
  absl::StatusOr<size_t> ReplayMissing(absl::Span<const Run> runs,
                                       absl::Span<const uint64_t> new_hashes,
                                       BeforeApplyHook persist);

  uint64_t items_added() const;
  // Bytes of bits held in memory (a slice arena counted whole).
  uint64_t size_bytes() const;
  // O(bits): counts set bits.
  ScalableFilterStats ComputeStats() const;

 private:
  ScalableFilter(const FilterParams& spec, uint64_t seed, const bloomtime::Clock* clock,
                 int first_index);

  enum class ReserveOutcome { kReserved, kNeedsSubFilter, kFull };
  // Reserves room for `remaining` new items, appending where they go to `runs` and decreasing
  // `remaining`. kNeedsSubFilter: the newest sub-filter is full, or (windowed) belongs to an
  // older slice than `slice_start` (the rest stays in `remaining`). kFull: a non-scaling
  // filter lacks room for all of them; nothing was reserved.
  ReserveOutcome Reserve(uint64_t& remaining, std::vector<Run>& runs, int64_t slice_start);
  void Unreserve(absl::Span<const Run> runs);
  // Opens the sub-filter after `full` (in slice `slice_start` if windowed), unless another
  // thread already did.
  absl::Status Grow(const SubFilter* full, NewSubFilterHook on_new_sub_filter, int64_t slice_start);
  absl::StatusOr<std::unique_ptr<SubFilter>> MakeSubFilterIn(int64_t slice_start) const;
  void Apply(absl::Span<const Run> runs, absl::Span<const uint64_t> new_hashes);
  // Windowed PrepareAdd step 1: sets insert[i] for the items the current slice lacks (first
  // occurrence only) and added[i] for those no unexpired slice has; returns the slice.
  int64_t ClassifyWindowed(absl::Span<const uint64_t> hashes, bool* added,
                           std::vector<uint64_t>& new_hashes) const;
  // Windowed: for each i with present[i] == false, sets it if one of `subs` might contain
  // hashes[i] (the slices' first sub-filters together, BlockedBloomFilter::MightContainAny).
  void AskSlices(absl::Span<SubFilter* const> subs, absl::Span<const uint64_t> hashes,
                 bool* present) const;
  // The unexpired sub-filters, newest first; the caller holds the window's retire_mu shared.
  absl::InlinedVector<SubFilter*, 8> LiveChain(absl::Time now) const;

  // Windowed: the layout every slice's first sub-filter has (AskSlices).
  BlockedLayout first_layout() const {
    return {window()->first_num_blocks, window()->first_hash_count};
  }
  // Windowed: whether `sub` is a slice's first sub-filter, asked with the others in one pass.
  bool IsSliceFirst(const SubFilter& sub) const {
    return sub.slice().position == 0 && sub.bits().layout() == first_layout();
  }

  // What only a windowed filter needs, kept apart so that millions of small per-user filters
  // do not carry it: its whole spec (window.h's functions take it), its clock, the index an
  // emptied chain restarts at, the newest sub-filter, the layout its slices' first sub-filters
  // share, the lock Retire takes, the slice arena and the chain.
  struct Window {
    Window(const FilterParams& window_spec, const bloomtime::Clock* window_clock, int first_index);
    const FilterParams spec;  // idle_ttl zero, as spec() answers
    const bloomtime::Clock* const clock;
    int empty_next_index;  // next_index() while the chain is empty (Retire emptied it)
    // The newest sub-filter (nullptr while the chain is empty), published with release stores.
    std::atomic<SubFilter*> newest{nullptr};
    uint64_t first_num_blocks = 0;  // first_layout()
    uint32_t first_hash_count = 0;
    // Shared by reads of the chain, exclusive to change `first` (see the class comment).
    mutable bloomsync::Mutex retire_mu;
    // Large windows: the slices' first sub-filters, interleaved (slice_arena.h); else null.
    SliceArena::Ref arena;
    // The oldest sub-filter in memory (it owns the newer ones). Last: destroyed before the
    // arena whose slots its sub-filters hold.
    std::unique_ptr<SubFilter> first;
  };
  // What a filter without a window keeps while its first sub-filter does not tell its spec
  // (FirstGivesSpec): while it is loaded, before that sub-filter is appended, and for a stored
  // chain whose first sub-filter is not the one its spec makes (only a hand-made record).
  struct Spare {
    uint64_t capacity;
    double error_rate;
    std::unique_ptr<SubFilter> first;
  };
  // What head_ points to, in its low bits (the objects are 8-byte aligned).
  enum HeadKind : uintptr_t { kFirstHead = 0, kWindowHead = 1, kSpareHead = 2 };
  static constexpr uintptr_t kHeadKindBits = 3;
  HeadKind head_kind() const { return static_cast<HeadKind>(head_ & kHeadKindBits); }
  // A tagged pointer (its kind in the low bits) is an integer until untagged.
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  Window* window() const { return reinterpret_cast<Window*>(head_ & ~kHeadKindBits); }
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  Spare* spare() const { return reinterpret_cast<Spare*>(head_ & ~kHeadKindBits); }
  // Whether `sub`, the first sub-filter of a chain without a window, gives back exactly the
  // spec's capacity and error rate (SpecErrorRate), as one that the spec made does.
  bool FirstGivesSpec(const SubFilter& sub, uint64_t capacity, double error_rate) const;
  // The spec's error rate from the first sub-filter's (ChainShape's, inverted: exact, since
  // the first sub-filter's is the spec's halved, or the spec's for a non-scaling filter).
  double SpecErrorRate(const SubFilter& first) const;

  // 24 bytes (jemalloc's 32-byte class), for millions of small filters: a chain without a
  // window reads the spec's capacity and error rate from its first sub-filter, one tagged
  // pointer is the head, the window or the spare, newest() finds the newest sub-filter, and
  // the idle_ttl is the store's. Expansion in 16 bits (kMaxExpansion).
  const uint64_t seed_;
  // Owning, tagged (HeadKind): the first sub-filter of a chain without a window, which tells
  // the spec's capacity and error rate; else the Window, or the Spare. Written while the
  // filter is made or loaded (the first append turns a Spare into the first sub-filter),
  // before it is shared; a window's chain changes in the Window, under its retire_mu.
  uintptr_t head_;
  bloomsync::Mutex growth_mu_;  // serialises opening sub-filters (not the reads of the chain)
  const uint16_t expansion_;
  const bool non_scaling_;
};

}  // namespace bloom

#endif  // BLOOM_SCALABLE_FILTER_H_

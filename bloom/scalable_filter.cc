#include "bloom/scalable_filter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace bloom {
namespace {

// The spec a filter keeps: idle_ttl is the store's (see FilterParams).
FilterParams WithoutIdleTtl(FilterParams spec) {
  spec.idle_ttl = absl::ZeroDuration();
  return spec;
}

}  // namespace

static_assert(sizeof(ScalableFilter) <= 32, "ScalableFilter outgrew its 32-byte size class");
static_assert(kMaxExpansion <= std::numeric_limits<uint16_t>::max(), "expansion_ is 16 bits");

absl::StatusOr<std::unique_ptr<ScalableFilter>> ScalableFilter::Create(
    const FilterParams& spec, uint64_t seed, const bloomtime::Clock* clock) {
  std::unique_ptr<ScalableFilter> filter = CreateEmpty(spec, seed, clock);
  absl::StatusOr<std::unique_ptr<SubFilter>> first = filter->MakeNextSubFilter();
  if (!first.ok()) return first.status();
  filter->AppendSubFilter(*std::move(first));
  return filter;
}

ScalableFilter::Window::Window(const FilterParams& window_spec,
                               const bloomtime::Clock* window_clock, int first_index)
    : spec(window_spec), clock(window_clock), empty_next_index(first_index) {
  absl::StatusOr<SubFilterShape> first = SubFilterShapeFor(spec, 0);
  if (first.ok()) {  // else no sub-filter can exist either
    first_num_blocks = first->layout.num_blocks;
    first_hash_count = first->layout.hash_count;
  }
  if (absl::optional<ArenaShape> shape = ArenaShapeFor(spec)) {
    arena = SliceArena::Create(shape->layout, shape->slots);
  }
}

ScalableFilter::ScalableFilter(const FilterParams& spec, uint64_t seed,
                               const bloomtime::Clock* clock, int first_index)
    : seed_(seed),
      head_(
          spec.windowed()
              ? reinterpret_cast<uintptr_t>(new Window(WithoutIdleTtl(spec), clock, first_index)) |
                    kWindowHead
              : reinterpret_cast<uintptr_t>(new Spare{spec.capacity, spec.error_rate, nullptr}) |
                    kSpareHead),
      expansion_(static_cast<uint16_t>(spec.expansion)),
      non_scaling_(spec.non_scaling) {}

ScalableFilter::ScalableFilter()
    : seed_(0), head_(kSpareHead), expansion_(0), non_scaling_(false) {}  // a null Spare

ScalableFilter::ScalableFilter(ScalableFilter&& other) noexcept
    : seed_(other.seed_),
      head_(std::exchange(other.head_, kSpareHead)),
      expansion_(other.expansion_),
      non_scaling_(other.non_scaling_) {}

ScalableFilter::~ScalableFilter() {
  switch (head_kind()) {
    case kFirstHead:
      delete first();  // and the newer sub-filters, which it owns
      break;
    case kWindowHead:
      delete window();
      break;
    case kSpareHead:
      delete spare();
      break;
  }
}

double ScalableFilter::SpecErrorRate(const SubFilter& first) const {
  return non_scaling_ ? first.error_rate_ : first.error_rate_ / (1 - kChainTightening);
}

bool ScalableFilter::FirstGivesSpec(const SubFilter& sub, uint64_t capacity,
                                    double error_rate) const {
  // What spec() then answers is exactly the spec: the rest of the chain follows from it.
  return sub.index() == 0 && sub.capacity_ == capacity && SpecErrorRate(sub) == error_rate;
}

FilterParams ScalableFilter::spec() const {
  if (windowed()) return window()->spec;
  FilterParams spec;
  if (head_kind() == kFirstHead) {
    spec.capacity = first()->capacity_;
    spec.error_rate = SpecErrorRate(*first());
  } else {
    spec.capacity = spare()->capacity;
    spec.error_rate = spare()->error_rate;
  }
  spec.expansion = expansion_;
  spec.non_scaling = non_scaling_;
  return spec;
}

std::unique_ptr<ScalableFilter> ScalableFilter::CreateEmpty(const FilterParams& spec, uint64_t seed,
                                                            const bloomtime::Clock* clock,
                                                            int first_index) {
  return std::unique_ptr<ScalableFilter>(new ScalableFilter(spec, seed, clock, first_index));
}

int ScalableFilter::num_sub_filters() const {
  if (!windowed()) {
    const SubFilter* last = newest();
    return last == nullptr ? 0 : last->index() + 1;
  }
  bloomsync::ReaderMutexLock lock(&window()->retire_mu);
  const SubFilter* last = newest();
  return last == nullptr ? 0 : last->index() - first()->index() + 1;
}

int ScalableFilter::first_index() const {
  if (!windowed()) return 0;
  bloomsync::ReaderMutexLock lock(&window()->retire_mu);
  return first() == nullptr ? window()->empty_next_index : first()->index();
}

int ScalableFilter::next_index() const {
  const SubFilter* last = newest();
  if (last != nullptr) return last->index() + 1;
  return windowed() ? window()->empty_next_index : 0;
}

SubFilter* ScalableFilter::sub_filter(int index) const {
  SubFilter* sub = first();
  while (sub != nullptr && sub->index() < index) sub = sub->next();
  return sub != nullptr && sub->index() == index ? sub : nullptr;
}

absl::StatusOr<std::unique_ptr<SubFilter>> ScalableFilter::MakeNextSubFilter() const {
  return MakeSubFilterIn(windowed() ? SliceStartMicros(window()->spec, window()->clock->Now()) : 0);
}

absl::StatusOr<std::unique_ptr<SubFilter>> ScalableFilter::MakeSubFilterIn(
    int64_t slice_start) const {
  const SubFilter* last = newest();
  const int index = next_index();
  if (index == std::numeric_limits<int>::max()) {
    return absl::ResourceExhaustedError("the filter has used up its sub-filter numbers");
  }
  SliceTag slice{0, index};
  if (windowed()) {
    const bool same_slice = last != nullptr && last->slice().start_micros == slice_start;
    slice = {slice_start, same_slice ? last->slice().position + 1 : 0};
  }
  absl::StatusOr<SubFilterShape> shape = SubFilterShapeFor(spec(), slice.position);
  if (!shape.ok()) return shape.status();
  if (windowed() && slice.position > 0) {
    // The slice outgrew its first sub-filter: size the next one for the rest of the slice.
    uint64_t items_in_slice = 0, previous_overflow = 0;
    for (const SubFilter* sub = first(); sub != nullptr; sub = sub->next()) {
      if (sub->slice().start_micros != slice_start) continue;
      items_in_slice += sub->items_added();
      if (sub->slice().position > 0) previous_overflow = sub->shape().capacity;
    }
    const uint64_t capacity =
        SliceOverflowCapacity(window()->spec, slice_start, window()->clock->Now(), items_in_slice,
                              previous_overflow, shape->capacity);
    if (capacity != shape->capacity) {
      absl::StatusOr<BlockedLayout> layout = ChooseLayout(capacity, shape->error_rate);
      if (!layout.ok()) return layout.status();
      shape->capacity = capacity;
      shape->layout = *layout;
    }
  }
  absl::StatusOr<std::unique_ptr<BlockedBloomFilter>> bits =
      MakeBits(shape->layout, slice.position);
  if (!bits.ok()) return bits.status();
  return SubFilter::Create(index, *shape, *std::move(bits),
                           windowed() ? absl::optional<SliceTag>(slice) : absl::nullopt);
}

absl::StatusOr<std::unique_ptr<BlockedBloomFilter>> ScalableFilter::MakeBits(
    const BlockedLayout& layout, int position) const {
  if (windowed() && window()->arena != nullptr && position == 0 &&
      layout == window()->arena->layout()) {
    // Without a free slot (see slice_arena.h), bits of its own below.
    if (std::unique_ptr<BlockedBloomFilter> bits =
            BlockedBloomFilter::CreateInArena(*window()->arena)) {
      return bits;
    }
  }
  return BlockedBloomFilter::Create(layout, SubFilter::CompanionBytes(windowed()));
}

void ScalableFilter::AppendSubFilter(std::unique_ptr<SubFilter> sub) {
  SubFilter* raw = sub.get();
  SubFilter* last = newest();
  if (last == nullptr && windowed()) {
    // Only a windowed chain becomes empty again (Retire); its readers hold retire_mu.
    bloomsync::MutexLock lock(&window()->retire_mu);
    window()->first = std::move(sub);
  } else if (last == nullptr) {
    // Loading (or Create), before the filter is shared: a first sub-filter that tells the
    // spec replaces the Spare.
    Spare* const spare_head = spare();
    if (FirstGivesSpec(*sub, spare_head->capacity, spare_head->error_rate)) {
      head_ = reinterpret_cast<uintptr_t>(sub.release()) | kFirstHead;
      delete spare_head;
    } else {
      spare_head->first = std::move(sub);
    }
  } else {
    last->next_.store(sub.release(), std::memory_order_release);  // which owns it
  }
  if (windowed()) window()->newest.store(raw, std::memory_order_release);
}

absl::InlinedVector<SubFilter*, 8> ScalableFilter::LiveChain(absl::Time now) const {
  absl::InlinedVector<SubFilter*, 8> chain;
  for (SubFilter* sub = first(); sub != nullptr; sub = sub->next()) {
    if (!windowed() || SliceExpiry(window()->spec, sub->slice().start_micros) > now) {
      chain.push_back(sub);
    }
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

void ScalableFilter::MightContainMany(absl::Span<const uint64_t> hashes, bool* present) const {
  // Newest first: the newest sub-filter is the largest and holds the most items.
  if (!windowed()) {
    // The chain is singly linked oldest-to-newest and short, so collect it once.
    SubFilter* chain[kMaxSubFilters];
    int n = 0;
    for (SubFilter* sub = first(); sub != nullptr; sub = sub->next()) chain[n++] = sub;
    for (int i = n - 1; i >= 0; --i) chain[i]->bits().MightContainMany(hashes, present);
    return;
  }
  const absl::Time now = window()->clock->Now();
  bloomsync::ReaderMutexLock lock(&window()->retire_mu);
  AskSlices(LiveChain(now), hashes, present);
}

void ScalableFilter::AskSlices(absl::Span<SubFilter* const> subs, absl::Span<const uint64_t> hashes,
                               bool* present) const {
  // Every slice's first sub-filter has the same layout: they are asked together, one probe
  // per item for all of them; the sub-filters of a rate surge one by one.
  absl::InlinedVector<const BlockedBloomFilter*, 16> firsts;
  for (SubFilter* sub : subs) {
    if (IsSliceFirst(*sub)) {
      firsts.push_back(&sub->bits());
    }
  }
  BlockedBloomFilter::MightContainAny(firsts, hashes, present);
  for (SubFilter* sub : subs) {
    if (!IsSliceFirst(*sub)) {
      sub->bits().MightContainMany(hashes, present);
    }
  }
}

int ScalableFilter::ExpiredThrough(absl::Time now) const {
  if (!windowed()) return -1;
  bloomsync::ReaderMutexLock lock(&window()->retire_mu);
  int through = -1;
  for (SubFilter* sub = first(); sub != nullptr; sub = sub->next()) {
    if (SliceExpiry(window()->spec, sub->slice().start_micros) > now) break;
    through = sub->index();
  }
  return through;
}

std::vector<std::unique_ptr<SubFilter>> ScalableFilter::Retire(int through) {
  std::vector<std::unique_ptr<SubFilter>> retired;
  Window& window_head = *window();
  bloomsync::MutexLock lock(&window_head.retire_mu);
  std::unique_ptr<SubFilter>& head = window_head.first;
  while (head != nullptr && head->index() <= through) {
    std::unique_ptr<SubFilter> next(head->next_.exchange(nullptr, std::memory_order_acq_rel));
    if (next == nullptr) {
      window_head.empty_next_index = head->index() + 1;
      window_head.newest.store(nullptr, std::memory_order_release);
    }
    retired.push_back(std::move(head));
    head = std::move(next);
  }
  return retired;
}

ScalableFilter::ReserveOutcome ScalableFilter::Reserve(uint64_t& remaining, std::vector<Run>& runs,
                                                       int64_t slice_start) {
  if (remaining == 0) return ReserveOutcome::kReserved;
  SubFilter* sub = newest();
  if (windowed() && (sub == nullptr || sub->slice().start_micros != slice_start)) {
    return ReserveOutcome::kNeedsSubFilter;  // the current slice has no sub-filter yet
  }
  if (non_scaling_) {
    if (!sub->ReserveExactly(remaining)) return ReserveOutcome::kFull;
    runs.push_back({sub->index(), remaining});
    remaining = 0;
    return ReserveOutcome::kReserved;
  }
  const uint64_t taken = sub->ReserveUpTo(remaining);
  if (taken > 0) {
    if (!runs.empty() && runs.back().sub_filter == sub->index()) {
      runs.back().count += taken;
    } else {
      runs.push_back({sub->index(), taken});
    }
    remaining -= taken;
  }
  return remaining == 0 ? ReserveOutcome::kReserved : ReserveOutcome::kNeedsSubFilter;
}

absl::StatusOr<ScalableFilter::PreparedAdd> ScalableFilter::PrepareAdd(
    absl::Span<const uint64_t> hashes, bool* added, NewSubFilterHook on_new_sub_filter) {
  const size_t n = hashes.size();
  std::fill(added, added + n, false);
  PreparedAdd prepared;
  std::vector<uint64_t>& new_hashes = prepared.new_hashes;
  new_hashes.reserve(n);
  int64_t slice_start = 0;
  if (windowed()) {
    slice_start = ClassifyWindowed(hashes, added, new_hashes);
  } else {
    // `added` doubles as the "present" scratch array, then is inverted into its final meaning.
    MightContainMany(hashes, added);
    // Repeats within the request: only the first is new. Sized up front: growing it rehashed
    // every batch several times (5% of a 1000-item Add's CPU).
    absl::flat_hash_set<uint64_t> seen;
    if (n > 1) seen.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const bool is_new = !added[i] && (n == 1 || seen.insert(hashes[i]).second);
      added[i] = is_new;
      if (is_new) new_hashes.push_back(hashes[i]);
    }
  }
  if (new_hashes.empty()) return prepared;

  uint64_t remaining = new_hashes.size();
  while (true) {
    const SubFilter* newest_seen = newest();
    const ReserveOutcome outcome = Reserve(remaining, prepared.runs, slice_start);
    if (outcome == ReserveOutcome::kReserved) break;
    if (outcome == ReserveOutcome::kFull) {
      std::fill(added, added + n, false);
      if (windowed()) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "time slice is full: a non_scaling window takes ", newest_seen->shape().capacity,
            " new items per slice (capacity / window_slices), ", newest_seen->items_added(),
            " added, this request adds ", new_hashes.size(), "; the next slice starts at ",
            absl::FormatTime(absl::FromUnixMicros(slice_start + SliceMicros(window()->spec)),
                             absl::UTCTimeZone())));
      }
      return absl::ResourceExhaustedError(
          absl::StrCat("filter is full: non_scaling with capacity ", newest_seen->shape().capacity,
                       ", ", newest_seen->items_added(), " items added, this request adds ",
                       new_hashes.size(), " new items"));
    }
    if (absl::Status grown = Grow(newest_seen, on_new_sub_filter, slice_start); !grown.ok()) {
      Unreserve(prepared.runs);
      std::fill(added, added + n, false);
      return grown;
    }
  }
  return prepared;
}

int64_t ScalableFilter::ClassifyWindowed(absl::Span<const uint64_t> hashes, bool* added,
                                         std::vector<uint64_t>& new_hashes) const {
  const size_t n = hashes.size();
  const absl::Time now = window()->clock->Now();
  int64_t slice_start = SliceStartMicros(window()->spec, now);
  // Refreshing an item means adding it to the current slice even when an older slice has it:
  // its age restarts. `in_slice` marks the items the current slice has already; `added` (as
  // scratch) those any unexpired slice has.
  std::unique_ptr<bool[]> in_slice(new bool[n]());
  {
    bloomsync::ReaderMutexLock lock(&window()->retire_mu);
    const SubFilter* last = newest();
    // Never into a slice older than the newest (the clock went back): it would expire early.
    if (last != nullptr && last->slice().start_micros > slice_start) {
      slice_start = last->slice().start_micros;
    }
    // The slices' first sub-filters share a layout: one FirstContaining pass asks the current
    // slice's (put first) and the older ones' together, and tells which answered. The
    // sub-filters of rate surges are asked one by one.
    absl::InlinedVector<const BlockedBloomFilter*, 16> firsts;
    absl::InlinedVector<SubFilter*, 8> current_surges, older_surges;
    bool current_first = false;
    for (SubFilter* sub : LiveChain(now)) {
      const bool current = sub->slice().start_micros == slice_start;
      if (IsSliceFirst(*sub)) {
        if (current) {
          firsts.insert(firsts.begin(), &sub->bits());
          current_first = true;
        } else {
          firsts.push_back(&sub->bits());
        }
      } else {
        (current ? current_surges : older_surges).push_back(sub);
      }
    }
    for (SubFilter* sub : current_surges) sub->bits().MightContainMany(hashes, in_slice.get());
    // 0: not found yet; 1 + i: firsts[i] has it; kKnown: the current slice has it already.
    constexpr uint8_t kKnown = 255;
    std::unique_ptr<uint8_t[]> found(new uint8_t[n]);
    for (size_t i = 0; i < n; ++i) found[i] = in_slice[i] ? kKnown : 0;
    BlockedBloomFilter::FirstContaining(firsts, hashes, found.get());
    for (size_t i = 0; i < n; ++i) {
      if (current_first && found[i] == 1) in_slice[i] = true;
      added[i] = found[i] != 0;  // as scratch: some unexpired slice has it
    }
    for (SubFilter* sub : older_surges) sub->bits().MightContainMany(hashes, added);
  }
  absl::flat_hash_set<uint64_t> seen;
  if (n > 1) seen.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const bool insert = !in_slice[i] && (n == 1 || seen.insert(hashes[i]).second);
    added[i] = insert && !added[i];
    if (insert) new_hashes.push_back(hashes[i]);
  }
  return slice_start;
}

void ScalableFilter::CommitAdd(const PreparedAdd& prepared) {
  Apply(prepared.runs, prepared.new_hashes);
}

void ScalableFilter::AbortAdd(const PreparedAdd& prepared) { Unreserve(prepared.runs); }

absl::Status ScalableFilter::Add(absl::Span<const uint64_t> hashes, bool* added,
                                 NewSubFilterHook on_new_sub_filter, BeforeApplyHook before_apply) {
  absl::StatusOr<PreparedAdd> prepared = PrepareAdd(hashes, added, on_new_sub_filter);
  if (!prepared.ok()) return prepared.status();
  if (prepared->new_hashes.empty()) return absl::OkStatus();
  if (absl::Status journalled = before_apply(prepared->runs, prepared->new_hashes);
      !journalled.ok()) {
    AbortAdd(*prepared);
    std::fill(added, added + hashes.size(), false);
    return journalled;
  }
  CommitAdd(*prepared);
  return absl::OkStatus();
}

absl::Status ScalableFilter::Add(absl::Span<const uint64_t> hashes, bool* added) {
  return Add(
      hashes, added, [](const SubFilter&) { return absl::OkStatus(); },
      [](absl::Span<const Run>, absl::Span<const uint64_t>) { return absl::OkStatus(); });
}

absl::Status ScalableFilter::Grow(const SubFilter* full, NewSubFilterHook on_new_sub_filter,
                                  int64_t slice_start) {
  bloomsync::MutexLock lock(&growth_mu_);
  if (newest() != full) return absl::OkStatus();  // another add opened it meanwhile
  absl::StatusOr<std::unique_ptr<SubFilter>> sub = MakeSubFilterIn(slice_start);
  if (!sub.ok()) return sub.status();
  if (absl::Status persisted = on_new_sub_filter(**sub); !persisted.ok()) return persisted;
  AppendSubFilter(*std::move(sub));
  return absl::OkStatus();
}

absl::Status ScalableFilter::Replay(absl::Span<const Run> runs,
                                    absl::Span<const uint64_t> new_hashes) {
  uint64_t total = 0;
  const int first = first_index();
  for (const Run& run : runs) {
    const bool retired = windowed() && run.sub_filter >= 0 && run.sub_filter < first;
    if (run.sub_filter < 0 || (sub_filter(run.sub_filter) == nullptr && !retired)) {
      return absl::InvalidArgumentError(absl::StrCat("journal names sub-filter ", run.sub_filter,
                                                     ", not one of ", first, "..",
                                                     next_index() - 1));
    }
    total += run.count;
  }
  if (total != new_hashes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("journal runs count ", total, " items for ", new_hashes.size(), " hashes"));
  }
  size_t offset = 0;
  for (const Run& run : runs) {
    if (SubFilter* sub = sub_filter(run.sub_filter); sub != nullptr) {
      sub->set_items_added(sub->items_added() + run.count);
      sub->bits().AddMany(new_hashes.subspan(offset, run.count));
    }
    offset += run.count;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> ScalableFilter::ReplayMissing(absl::Span<const Run> runs,
                                                     absl::Span<const uint64_t> new_hashes,
                                                     BeforeApplyHook persist) {
  uint64_t total = 0;
  for (const Run& run : runs) {
    if (run.sub_filter < 0 || run.sub_filter >= next_index()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the owner's journal names sub-filter ", run.sub_filter, ", which this copy (",
          first_index(), "..", next_index() - 1, ") never had: copy it whole"));
    }
    total += run.count;
  }
  if (total != new_hashes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("journal runs count ", total, " items for ", new_hashes.size(), " hashes"));
  }
  // What each live sub-filter lacks, one run per sub-filter (as an add's record has: a record
  // of more runs than a chain has links does not decode), a hash named twice for it once. The
  // order of the hashes does not matter: they only set bits.
  std::map<int, absl::flat_hash_set<uint64_t>> lacking;
  size_t offset = 0;
  for (const Run& run : runs) {
    const absl::Span<const uint64_t> hashes = new_hashes.subspan(offset, run.count);
    offset += run.count;
    const SubFilter* sub = sub_filter(run.sub_filter);
    if (sub == nullptr) continue;  // retired: its items have expired
    for (const uint64_t hash : hashes) {
      if (!sub->bits().MightContain(hash)) lacking[run.sub_filter].insert(hash);
    }
  }
  if (lacking.size() > static_cast<size_t>(kMaxSubFilters)) {
    return absl::FailedPreconditionError(absl::StrCat("the owner's journal names ", lacking.size(),
                                                      " live sub-filters, more than a record ",
                                                      "holds: copy it whole"));
  }
  std::vector<Run> missing_runs;
  std::vector<uint64_t> missing;
  for (const auto& [index, hashes] : lacking) {
    missing_runs.push_back({index, hashes.size()});
    missing.insert(missing.end(), hashes.begin(), hashes.end());
  }
  if (missing.empty()) return 0;
  RETURN_IF_ERROR(persist(missing_runs, missing));
  RETURN_IF_ERROR(Replay(missing_runs, missing));  // checked above: cannot fail
  return missing.size();
}

void ScalableFilter::Unreserve(absl::Span<const Run> runs) {
  for (const Run& run : runs) sub_filter(run.sub_filter)->Unreserve(run.count);
}

void ScalableFilter::Apply(absl::Span<const Run> runs, absl::Span<const uint64_t> new_hashes) {
  size_t offset = 0;
  for (const Run& run : runs) {
    sub_filter(run.sub_filter)->bits().AddMany(new_hashes.subspan(offset, run.count));
    offset += run.count;
  }
}

uint64_t ScalableFilter::items_added() const {
  uint64_t total = 0;
  if (windowed()) {  // the unexpired slices'
    const absl::Time now = window()->clock->Now();
    bloomsync::ReaderMutexLock lock(&window()->retire_mu);
    for (SubFilter* sub : LiveChain(now)) total += sub->items_added();
    return total;
  }
  for (SubFilter* sub = first(); sub != nullptr; sub = sub->next()) total += sub->items_added();
  return total;
}

uint64_t ScalableFilter::size_bytes() const {
  absl::optional<bloomsync::ReaderMutexLock> lock;
  if (windowed()) lock.emplace(&window()->retire_mu);
  // An arena's memory is held whole, its free slots too (slice_arena.h).
  uint64_t total = windowed() && window()->arena != nullptr ? window()->arena->total_bytes() : 0;
  for (SubFilter* sub = first(); sub != nullptr; sub = sub->next()) {
    if (!sub->bits().in_arena()) total += sub->shape().layout.bytes();
  }
  return total;
}

}  // namespace bloom

// The next move of a rebalance (client/rebalance_plan.h).
#include "client/rebalance_plan.h"

#include <algorithm>

namespace bloomcli {

namespace {

// The ranges of adjacent slots `group` owns, in slot order.
std::vector<PlannedRange> RangesOf(const SlotOwners& owners, uint32_t group) {
  std::vector<PlannedRange> ranges;
  for (uint32_t slot = 0; slot < owners.owner.size(); ++slot) {
    if (owners.owner[slot] != group) continue;
    if (!ranges.empty() && ranges.back().last + 1 == slot) {
      ranges.back().last = slot;
    } else {
      ranges.push_back({slot, slot});
    }
  }
  return ranges;
}

// Whether taking a slot weighing `next` on top of `taken` comes closer to `want` (overshooting
// it by less than it falls short now) and still narrows the `spread` between the two groups.
bool Closer(uint64_t taken, uint64_t next, uint64_t want, uint64_t spread) {
  return taken + next > want && taken + next - want < want - taken && taken + next < spread;
}

// What each slot weighs and holds, and the bound on a move's filters.
class SlotScale {
 public:
  SlotScale(const std::vector<uint64_t>& slot_bytes, const std::vector<uint64_t>& slot_filters,
            uint64_t max_filters)
      : slot_bytes_(slot_bytes), slot_filters_(slot_filters), max_filters_(max_filters) {}

  // A slot's weight: its bytes, and one for being a slot.
  uint64_t Weight(uint32_t slot) const {
    return slot < slot_bytes_.size() ? slot_bytes_[slot] + 1 : 1;
  }
  uint64_t Bytes(uint32_t slot) const { return slot < slot_bytes_.size() ? slot_bytes_[slot] : 0; }
  uint64_t Filters(uint32_t slot) const {
    return slot < slot_filters_.size() ? slot_filters_[slot] : 0;
  }

  // Slots from one end of `range` (its last slot down when `from_top`): as many as stay within
  // `want` and the filter bound, and one more if that comes closer to `want`. The first slot
  // is taken whatever filters it holds (a slot never splits). Its `bytes` is the slots'
  // weight; nothing was taken when that is 0.
  PlannedMove TakeFromEnd(const PlannedRange& range, bool from_top, uint64_t want,
                          uint64_t spread) const {
    PlannedMove taken;
    uint32_t count = 0;
    for (; count <= range.last - range.first; ++count) {
      const uint32_t slot = from_top ? range.last - count : range.first + count;
      if (count > 0 && max_filters_ > 0 && taken.filters + Filters(slot) > max_filters_) break;
      const bool past_want = taken.bytes + Weight(slot) > want;
      if (past_want && !Closer(taken.bytes, Weight(slot), want, spread)) break;
      taken.bytes += Weight(slot);
      taken.filters += Filters(slot);
      if (past_want) {
        ++count;
        break;
      }
    }
    if (count > 0) {
      taken.slots = from_top ? PlannedRange{range.last - count + 1, range.last}
                             : PlannedRange{range.first, range.first + count - 1};
    }
    return taken;
  }

 private:
  const std::vector<uint64_t>& slot_bytes_;
  const std::vector<uint64_t>& slot_filters_;
  const uint64_t max_filters_;
};

}  // namespace

absl::optional<PlannedMove> NextRebalanceMove(const SlotOwners& owners,
                                              const std::vector<uint64_t>& slot_bytes,
                                              const std::vector<uint64_t>& slot_filters,
                                              const RebalanceLimits& limits) {
  const std::vector<std::string>& groups = owners.groups;
  const auto slot_count = static_cast<uint32_t>(owners.owner.size());
  if (groups.size() < 2 || slot_count == 0) return absl::nullopt;
  const SlotScale scale(slot_bytes, slot_filters, limits.max_filters);
  std::vector<uint64_t> load(groups.size(), 0);
  uint64_t total = 0;
  for (uint32_t slot = 0; slot < slot_count; ++slot) {
    if (owners.owner[slot] >= groups.size()) return absl::nullopt;  // not a map
    const uint64_t weight = scale.Weight(slot);
    load[owners.owner[slot]] += weight;
    total += weight;
  }
  const size_t heavy = std::max_element(load.begin(), load.end()) - load.begin();
  const size_t light = std::min_element(load.begin(), load.end()) - load.begin();
  const double mean = static_cast<double>(total) / static_cast<double>(groups.size());
  if (static_cast<double>(load[heavy]) <= mean * (1 + limits.tolerance)) return absl::nullopt;
  // As much as takes the heaviest to the mean without taking the lightest past it.
  const uint64_t want = static_cast<uint64_t>(
      std::min(static_cast<double>(load[heavy]) - mean, mean - static_cast<double>(load[light])));
  const uint64_t spread = load[heavy] - load[light];

  // The heaviest of the candidates: slots from either end of each of the heavy group's ranges.
  absl::optional<PlannedMove> best;
  auto consider = [&](const PlannedMove& candidate) {
    if (candidate.bytes > 0 && (!best.has_value() || candidate.bytes > best->bytes)) {
      best = candidate;
    }
  };
  const std::vector<PlannedRange> ranges = RangesOf(owners, static_cast<uint32_t>(heavy));
  for (const PlannedRange& range : ranges) {
    consider(scale.TakeFromEnd(range, /*from_top=*/true, want, spread));
    consider(scale.TakeFromEnd(range, /*from_top=*/false, want, spread));
  }
  if (!best.has_value()) {
    // One edge slot heavier than `want` still narrows the spread if it weighs less than it.
    for (const PlannedRange& range : ranges) {
      for (const uint32_t edge : {range.first, range.last}) {
        const uint64_t alone = scale.Weight(edge);
        if (alone > want && alone < spread && !best.has_value()) {
          best = PlannedMove{{edge, edge}, "", "", alone, scale.Filters(edge)};
        }
      }
    }
  }
  if (!best.has_value()) return absl::nullopt;
  best->from = groups[heavy];
  best->to = groups[light];
  // Report the slots' own bytes, not their weights.
  best->bytes = 0;
  for (uint32_t slot = best->slots.first; slot <= best->slots.last; ++slot) {
    best->bytes += scale.Bytes(slot);
  }
  return best;
}

}  // namespace bloomcli

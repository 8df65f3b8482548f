// The next move of a rebalance (client/rebalance_plan.h).
#include "client/rebalance_plan.h"

#include <algorithm>

namespace bloomcli {

namespace {

// A slot's weight: its bytes, and one for being a slot.
uint64_t Weight(const std::vector<uint64_t>& slot_bytes, uint32_t slot) {
  return slot < slot_bytes.size() ? slot_bytes[slot] + 1 : 1;
}

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

}  // namespace

absl::optional<PlannedMove> NextRebalanceMove(const SlotOwners& owners,
                                              const std::vector<uint64_t>& slot_bytes,
                                              double tolerance) {
  const std::vector<std::string>& groups = owners.groups;
  const auto slot_count = static_cast<uint32_t>(owners.owner.size());
  if (groups.size() < 2 || slot_count == 0) return absl::nullopt;
  std::vector<uint64_t> load(groups.size(), 0);
  uint64_t total = 0;
  for (uint32_t slot = 0; slot < slot_count; ++slot) {
    if (owners.owner[slot] >= groups.size()) return absl::nullopt;  // not a map
    const uint64_t weight = Weight(slot_bytes, slot);
    load[owners.owner[slot]] += weight;
    total += weight;
  }
  const size_t heavy = std::max_element(load.begin(), load.end()) - load.begin();
  const size_t light = std::min_element(load.begin(), load.end()) - load.begin();
  const double mean = static_cast<double>(total) / static_cast<double>(groups.size());
  if (static_cast<double>(load[heavy]) <= mean * (1 + tolerance)) return absl::nullopt;
  // As much as takes the heaviest to the mean without taking the lightest past it.
  const uint64_t want = static_cast<uint64_t>(
      std::min(static_cast<double>(load[heavy]) - mean, mean - static_cast<double>(load[light])));
  const uint64_t spread = load[heavy] - load[light];

  absl::optional<PlannedMove> best;
  auto consider = [&](uint32_t first, uint32_t last, uint64_t weight) {
    if (!best.has_value() || weight > best->bytes) {
      best = PlannedMove{{first, last}, groups[heavy], groups[light], weight};
    }
  };
  for (const PlannedRange& range : RangesOf(owners, static_cast<uint32_t>(heavy))) {
    // Slots from either end of the range, as many as stay within `want`, and one more if that
    // comes closer to it.
    uint64_t weight = 0;
    uint32_t first = range.last + 1;
    while (first > range.first && weight + Weight(slot_bytes, first - 1) <= want) {
      weight += Weight(slot_bytes, --first);
    }
    if (first > range.first && Closer(weight, Weight(slot_bytes, first - 1), want, spread)) {
      weight += Weight(slot_bytes, --first);
    }
    if (first <= range.last) consider(first, range.last, weight);
    weight = 0;
    uint32_t last = range.first;  // one past the end taken
    while (last <= range.last && weight + Weight(slot_bytes, last) <= want) {
      weight += Weight(slot_bytes, last++);
    }
    if (last <= range.last && Closer(weight, Weight(slot_bytes, last), want, spread)) {
      weight += Weight(slot_bytes, last++);
    }
    if (last > range.first) consider(range.first, last - 1, weight);
    // One edge slot heavier than `want` still narrows the spread if it weighs less than it.
    for (const uint32_t edge : {range.first, range.last}) {
      const uint64_t alone = Weight(slot_bytes, edge);
      if (alone > want && alone < spread && !best.has_value()) consider(edge, edge, alone);
    }
  }
  if (best.has_value()) {
    // Report the slots' own bytes, not their weights.
    uint64_t bytes = 0;
    for (uint32_t slot = best->slots.first; slot <= best->slots.last; ++slot) {
      bytes += slot < slot_bytes.size() ? slot_bytes[slot] : 0;
    }
    best->bytes = bytes;
    return best;
  }
  return absl::nullopt;
}

}  // namespace bloomcli

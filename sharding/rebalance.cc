// The next move of a rebalance (sharding/rebalance.h).
#include "sharding/rebalance.h"

#include <algorithm>

namespace sharding {

namespace {

// A slot's weight: its bytes, and one for being a slot.
uint64_t Weight(const std::vector<uint64_t>& slot_bytes, uint32_t slot) {
  return slot < slot_bytes.size() ? slot_bytes[slot] + 1 : 1;
}

// Whether taking a slot weighing `next` on top of `taken` comes closer to `want` (overshooting
// it by less than it falls short now) and still narrows the `spread` between the two groups.
bool Closer(uint64_t taken, uint64_t next, uint64_t want, uint64_t spread) {
  return taken + next > want && taken + next - want < want - taken && taken + next < spread;
}

}  // namespace

absl::optional<PlannedMove> NextRebalanceMove(const ShardMap& map,
                                              const std::vector<uint64_t>& slot_bytes,
                                              double tolerance) {
  const std::vector<std::string>& groups = map.groups();
  if (groups.size() < 2 || map.slot_count() == 0) return absl::nullopt;
  std::vector<uint64_t> load(groups.size(), 0);
  uint64_t total = 0;
  for (uint32_t slot = 0; slot < map.slot_count(); ++slot) {
    const auto group = std::find(groups.begin(), groups.end(), map.OwnerOf(slot));
    const uint64_t weight = Weight(slot_bytes, slot);
    load[group - groups.begin()] += weight;
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
  for (const OwnedRange& range : map.Ranges()) {
    if (range.group != groups[heavy]) continue;
    // Slots from either end of the range, as many as stay within `want`, and one more if that
    // comes closer to it.
    uint64_t weight = 0;
    uint32_t first = range.slots.last + 1;
    while (first > range.slots.first && weight + Weight(slot_bytes, first - 1) <= want) {
      weight += Weight(slot_bytes, --first);
    }
    if (first > range.slots.first && Closer(weight, Weight(slot_bytes, first - 1), want, spread)) {
      weight += Weight(slot_bytes, --first);
    }
    if (first <= range.slots.last) consider(first, range.slots.last, weight);
    weight = 0;
    uint32_t last = range.slots.first;  // one past the end taken
    while (last <= range.slots.last && weight + Weight(slot_bytes, last) <= want) {
      weight += Weight(slot_bytes, last++);
    }
    if (last <= range.slots.last && Closer(weight, Weight(slot_bytes, last), want, spread)) {
      weight += Weight(slot_bytes, last++);
    }
    if (last > range.slots.first) consider(range.slots.first, last - 1, weight);
    // One edge slot heavier than `want` still narrows the spread if it weighs less than it.
    for (const uint32_t edge : {range.slots.first, range.slots.last}) {
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

}  // namespace sharding

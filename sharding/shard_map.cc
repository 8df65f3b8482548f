// The shard map and its record (shard_map.h).
#include "sharding/shard_map.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/slot.h"

namespace sharding {

namespace {

// More groups than any deployment needs, few enough that a map stays one short etcd value.
constexpr size_t kMaxGroups = 1024;
constexpr size_t kMaxGroupName = 128;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("shard map record: ", what));
}

}  // namespace

absl::Status ShardMap::CheckGroupName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxGroupName) {
    return absl::InvalidArgumentError(
        absl::StrCat("group name \"", name, "\" must have 1 to ", kMaxGroupName, " bytes"));
  }
  for (const char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("group name \"", name, R"(" may hold only letters, digits and ".-_/")"));
    }
  }
  if (name.front() == '/' || name.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("group name \"", name, "\" may not start or end with '/'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardMap> ShardMap::EvenSplit(const std::vector<std::string>& groups,
                                             uint32_t slot_count) {
  if (slot_count == 0 || slot_count > slots::kMaxSlotCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot count ", slot_count, " must be 1 to ", slots::kMaxSlotCount));
  }
  if (groups.empty() || groups.size() > kMaxGroups || groups.size() > slot_count) {
    return absl::InvalidArgumentError(absl::StrCat("a shard map needs 1 to ",
                                                   std::min<size_t>(kMaxGroups, slot_count),
                                                   " groups, not ", groups.size()));
  }
  std::set<std::string> seen;
  for (const std::string& group : groups) {
    if (absl::Status valid = CheckGroupName(group); !valid.ok()) return valid;
    if (!seen.insert(group).second) {
      return absl::InvalidArgumentError(absl::StrCat("group \"", group, "\" is named twice"));
    }
  }
  ShardMap map;
  map.version_ = 1;
  map.groups_ = groups;
  map.owners_.resize(slot_count);
  for (uint32_t slot = 0; slot < slot_count; ++slot) {
    // Group i owns [i*n/g, (i+1)*n/g): sizes differ by at most one slot.
    map.owners_[slot] = static_cast<uint16_t>(uint64_t{slot} * groups.size() / slot_count);
  }
  return map;
}

absl::StatusOr<SlotRange> ParseSlotRange(absl::string_view text) {
  std::vector<absl::string_view> ends = absl::StrSplit(text, absl::MaxSplits('-', 1));
  SlotRange range;
  if (!absl::SimpleAtoi(ends[0], &range.first) ||
      !absl::SimpleAtoi(ends.size() == 2 ? ends[1] : ends[0], &range.last) || ends[0].empty() ||
      (ends.size() == 2 && ends[1].empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot range \"", text, "\" is not FIRST-LAST or SLOT"));
  }
  if (range.first > range.last) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot range \"", text, "\" ends before it starts"));
  }
  return range;
}

absl::StatusOr<ShardMap> ShardMap::Decode(absl::string_view text) {
  std::map<std::string, std::string> words;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const size_t equals = word.find('=');
    if (equals == absl::string_view::npos || equals == 0) {
      return Invalid(absl::StrCat("\"", word, "\" is not key=value"));
    }
    words.insert_or_assign(std::string{word.substr(0, equals)},
                           std::string{word.substr(equals + 1)});
  }
  int format = 0;
  if (!absl::SimpleAtoi(words["format"], &format) || format < 1) return Invalid("no format");
  if (format > kFormat) {
    return absl::FailedPreconditionError(absl::StrCat("shard map record of format ", format,
                                                      ": this server reads format ", kFormat,
                                                      " (upgrade it)"));
  }
  ShardMap map;
  uint32_t slot_count = 0;
  if (!absl::SimpleAtoi(words["version"], &map.version_) || map.version_ == 0) {
    return Invalid("no version");
  }
  if (!absl::SimpleAtoi(words["slots"], &slot_count) || slot_count == 0 ||
      slot_count > slots::kMaxSlotCount) {
    return Invalid(absl::StrCat("slots=", words["slots"], " is not 1 to ", slots::kMaxSlotCount));
  }
  std::set<std::string> seen;
  for (absl::string_view group : absl::StrSplit(words["groups"], ',', absl::SkipEmpty())) {
    if (absl::Status valid = CheckGroupName(group); !valid.ok()) return Invalid(valid.message());
    if (!seen.emplace(group).second || map.groups_.size() == kMaxGroups) {
      return Invalid(absl::StrCat("group \"", group, "\" is named twice, or too many groups"));
    }
    map.groups_.emplace_back(group);
  }
  if (map.groups_.empty()) return Invalid("no groups");
  constexpr uint16_t kUnowned = 0xFFFF;
  map.owners_.assign(slot_count, kUnowned);
  for (absl::string_view owned : absl::StrSplit(words["owners"], ',', absl::SkipEmpty())) {
    const size_t colon = owned.rfind(':');
    if (colon == absl::string_view::npos) {
      return Invalid(absl::StrCat("\"", owned, "\" is not GROUP:FIRST-LAST"));
    }
    const int index = map.GroupIndex(owned.substr(0, colon));
    if (index < 0) return Invalid(absl::StrCat("\"", owned, "\" names a group not in groups="));
    absl::StatusOr<SlotRange> range = ParseSlotRange(owned.substr(colon + 1));
    if (!range.ok()) return Invalid(range.status().message());
    if (range->last >= slot_count) {
      return Invalid(absl::StrCat("\"", owned, "\" runs past the last slot ", slot_count - 1));
    }
    for (uint32_t slot = range->first; slot <= range->last; ++slot) {
      if (map.owners_[slot] != kUnowned) {
        return Invalid(absl::StrCat("slot ", slot, " has two owners"));
      }
      map.owners_[slot] = static_cast<uint16_t>(index);
    }
  }
  for (uint32_t slot = 0; slot < slot_count; ++slot) {
    if (map.owners_[slot] == kUnowned) return Invalid(absl::StrCat("slot ", slot, " has no owner"));
  }
  if (auto moving = words.find("moving"); moving != words.end() && !moving->second.empty()) {
    absl::StatusOr<SlotMove> move = map.DecodeMove(moving->second);
    if (!move.ok()) return Invalid(move.status().message());
    map.move_ = *std::move(move);
  }
  return map;
}

absl::StatusOr<SlotMove> ShardMap::DecodeMove(absl::string_view text) const {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("moving=", text, " is not FIRST-LAST:GROUP:copy|paused"));
  }
  absl::StatusOr<SlotRange> range = ParseSlotRange(parts[0]);
  if (!range.ok()) return range.status();
  if (range->last >= slot_count()) {
    return absl::InvalidArgumentError(absl::StrCat("moving=", text, " runs past the last slot"));
  }
  SlotMove move;
  move.slots = *range;
  move.to.assign(parts[1].data(), parts[1].size());
  if (parts[2] == "copy") {
    move.phase = SlotMove::Phase::kCopy;
  } else if (parts[2] == "paused") {
    move.phase = SlotMove::Phase::kPaused;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("moving=", text, " has no phase copy|paused"));
  }
  if (absl::Status valid = CheckMove(move.slots, move.to, &move.from); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("moving=", text, ": ", valid.message()));
  }
  return move;
}

absl::Status ShardMap::CheckMove(SlotRange slots, absl::string_view to, std::string* from) const {
  if (absl::Status valid = CheckRange(slots); !valid.ok()) return valid;
  if (!HasGroup(to)) {
    return absl::NotFoundError(absl::StrCat("group \"", to, "\" is not in the shard map"));
  }
  const std::string& owner = OwnerOf(slots.first);
  for (uint32_t slot = slots.first; slot <= slots.last; ++slot) {
    if (OwnerOf(slot) != owner) {
      return absl::FailedPreconditionError(
          absl::StrCat("slots ", slots.first, "-", slots.last, " have several owners (", owner,
                       ", ", OwnerOf(slot), "): move the slots of one group at a time"));
    }
  }
  if (owner == to) {
    return absl::FailedPreconditionError(
        absl::StrCat("slots ", slots.first, "-", slots.last, " are ", to, "'s already"));
  }
  *from = owner;
  return absl::OkStatus();
}

std::string ShardMap::Encode() const {
  std::vector<std::string> owned;
  for (const OwnedRange& range : Ranges()) {
    owned.push_back(absl::StrCat(range.group, ":", range.slots.first, "-", range.slots.last));
  }
  std::string record =
      absl::StrCat("format=", kFormat, " version=", version_, " slots=", slot_count(),
                   " groups=", absl::StrJoin(groups_, ","), " owners=", absl::StrJoin(owned, ","));
  if (move_.has_value()) {
    absl::StrAppend(&record, " moving=", move_->slots.first, "-", move_->slots.last, ":", move_->to,
                    ":", move_->phase == SlotMove::Phase::kCopy ? "copy" : "paused");
  }
  return record;
}

bool ShardMap::HasGroup(absl::string_view group) const { return GroupIndex(group) >= 0; }

int ShardMap::GroupIndex(absl::string_view group) const {
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (groups_[i] == group) return static_cast<int>(i);
  }
  return -1;
}

const std::string& ShardMap::OwnerOfName(absl::string_view filter_name) const {
  return OwnerOf(slots::SlotOf(filter_name, slot_count()));
}

std::vector<OwnedRange> ShardMap::Ranges() const {
  std::vector<OwnedRange> ranges;
  for (uint32_t slot = 0; slot < slot_count(); ++slot) {
    if (!ranges.empty() && ranges.back().group == groups_[owners_[slot]]) {
      ranges.back().slots.last = slot;
    } else {
      ranges.push_back({{slot, slot}, groups_[owners_[slot]]});
    }
  }
  return ranges;
}

std::vector<uint32_t> ShardMap::SlotsPerGroup() const {
  std::vector<uint32_t> counts(groups_.size(), 0);
  for (const uint16_t owner : owners_) ++counts[owner];
  return counts;
}

absl::Status ShardMap::CheckRange(SlotRange slots) const {
  if (slots.first > slots.last || slots.last >= slot_count()) {
    return absl::InvalidArgumentError(absl::StrCat("slots ", slots.first, "-", slots.last,
                                                   " are not within 0-", slot_count() - 1));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardMap> ShardMap::Assign(SlotRange slots, absl::string_view group) const {
  if (absl::Status valid = CheckRange(slots); !valid.ok()) return valid;
  if (move_.has_value()) {
    return absl::FailedPreconditionError("slots are moving: finish or abort that move first");
  }
  const int index = GroupIndex(group);
  if (index < 0) {
    return absl::NotFoundError(absl::StrCat("group \"", group, "\" is not in the shard map"));
  }
  ShardMap next = *this;
  ++next.version_;
  for (uint32_t slot = slots.first; slot <= slots.last; ++slot) {
    next.owners_[slot] = static_cast<uint16_t>(index);
  }
  return next;
}

absl::StatusOr<ShardMap> ShardMap::AddGroup(absl::string_view group) const {
  if (absl::Status valid = CheckGroupName(group); !valid.ok()) return valid;
  if (HasGroup(group)) {
    return absl::AlreadyExistsError(absl::StrCat("group \"", group, "\" is in the shard map"));
  }
  if (groups_.size() == kMaxGroups) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a shard map holds at most ", kMaxGroups, " groups"));
  }
  ShardMap next = *this;
  ++next.version_;
  next.groups_.emplace_back(group);
  return next;
}

absl::StatusOr<ShardMap> ShardMap::BeginMove(SlotRange slots, absl::string_view to) const {
  if (move_.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "slots ", move_->slots.first, "-", move_->slots.last, " are moving to ", move_->to,
        " already: finish that move (bloom-cli cluster move, again) or abort it first"));
  }
  SlotMove move;
  if (absl::Status valid = CheckMove(slots, to, &move.from); !valid.ok()) return valid;
  move.slots = slots;
  move.to.assign(to.data(), to.size());
  ShardMap next = *this;
  ++next.version_;
  next.move_ = std::move(move);
  return next;
}

absl::StatusOr<ShardMap> ShardMap::PauseMove() const {
  if (!move_.has_value() || move_->phase != SlotMove::Phase::kCopy) {
    return absl::FailedPreconditionError("no move is copying");
  }
  ShardMap next = *this;
  ++next.version_;
  next.move_->phase = SlotMove::Phase::kPaused;
  return next;
}

absl::StatusOr<ShardMap> ShardMap::FinishMove() const {
  if (!move_.has_value() || move_->phase != SlotMove::Phase::kPaused) {
    return absl::FailedPreconditionError("no move is paused");
  }
  ShardMap next = *this;
  ++next.version_;
  const auto to = static_cast<uint16_t>(GroupIndex(move_->to));
  for (uint32_t slot = move_->slots.first; slot <= move_->slots.last; ++slot) {
    next.owners_[slot] = to;
  }
  next.move_.reset();
  return next;
}

absl::StatusOr<ShardMap> ShardMap::AbortMove() const {
  if (!move_.has_value()) return absl::FailedPreconditionError("no move is in progress");
  ShardMap next = *this;
  ++next.version_;
  next.move_.reset();
  return next;
}

}  // namespace sharding

// ShardMap: which group of a sharded deployment owns which slots (common/slot.h), at a
// version. A group is one replicated cluster as bloom-server runs it (a primary and its
// followers electing through etcd); its name is its --cluster key. The map lives in etcd under
// the deployment's --shard_map key (coordination/shard_map_watch.h) and changes only by
// transactions that compare its revision, each one version higher.
//
//   ASSIGN_OR_RETURN(ShardMap map, ShardMap::EvenSplit({"bloom/a", "bloom/b"}, 4096));
//   const std::string& owner = map.OwnerOfName("user:42");           // "bloom/a" or "bloom/b"
//   ASSIGN_OR_RETURN(ShardMap next, map.Assign({0, 99}, "bloom/b")); // version + 1
//   std::string record = next.Encode();  // "format=1 version=2 slots=4096 groups=... owners=..."
//
// The record is one text line readable with etcdctl:
//   format=1 version=7 slots=4096 groups=bloom/a,bloom/b owners=bloom/a:0-1999,bloom/b:2000-4095
// Every slot has exactly one owner; a group may own none (just added, or emptied by moves).
// While slots move to another group (bloom-cli cluster move), the record also says which, where
// to, and how far the move is: `moving=100-199:bloom/b:copy` (the owner still serves them;
// the target takes copies) or `...:paused` (nobody takes writes for them until the map names
// the target their owner). One move at a time.
//
// Thread-safety: a plain value; const methods may be called from any thread.
#ifndef SHARDING_SHARD_MAP_H_
#define SHARDING_SHARD_MAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"

namespace sharding {

// Slots first..last, both included.
struct SlotRange {
  uint32_t first = 0;
  uint32_t last = 0;
  bool operator==(const SlotRange& other) const {
    return first == other.first && last == other.last;
  }
};

// A range and its owner, as the record and bloom.v1.ShardMap list them.
struct OwnedRange {
  SlotRange slots;
  std::string group;
};

// Slots moving from their owner to another group.
struct SlotMove {
  enum class Phase {
    kCopy,    // the owner serves them; the mover copies their filters to `to`
    kPaused,  // writes to them are refused everywhere while the mover copies the last changes
  };
  SlotRange slots;
  std::string from;  // their owner
  std::string to;
  Phase phase = Phase::kCopy;
};

class ShardMap {
 public:
  // The record format this code reads and writes; a record of a later format is refused (a pod
  // that cannot read the map must not guess who owns what).
  static constexpr int kFormat = 1;

  // Version 0, no slots, no groups: no map (an unsharded server, or none read yet).
  ShardMap() = default;

  // Version 1: `groups` (at least one, distinct, valid names) owning `slot_count` slots in
  // contiguous ranges as even as they can be.
  static absl::StatusOr<ShardMap> EvenSplit(const std::vector<std::string>& groups,
                                            uint32_t slot_count);
  // INVALID_ARGUMENT naming what is wrong with `text`.
  static absl::StatusOr<ShardMap> Decode(absl::string_view text);
  // INVALID_ARGUMENT unless `name` may name a group: 1 to 128 bytes of letters, digits and
  // ".-_/", not starting or ending with '/'.
  static absl::Status CheckGroupName(absl::string_view name);

  std::string Encode() const;

  uint64_t version() const { return version_; }
  uint32_t slot_count() const { return static_cast<uint32_t>(owners_.size()); }
  const std::vector<std::string>& groups() const { return groups_; }
  bool HasGroup(absl::string_view group) const;
  // For a map with slots (version > 0); `slot` below slot_count().
  const std::string& OwnerOf(uint32_t slot) const { return groups_[owners_[slot]]; }
  const std::string& OwnerOfName(absl::string_view filter_name) const;
  // The owners' ranges in slot order, adjacent slots of one owner joined.
  std::vector<OwnedRange> Ranges() const;
  // How many slots each group owns, in the order of groups().
  std::vector<uint32_t> SlotsPerGroup() const;

  // The move in progress, if any.
  const absl::optional<SlotMove>& move() const { return move_; }
  // Whether writes to `slot` are paused (its move is past copying).
  bool WritesPaused(uint32_t slot) const {
    return move_.has_value() && move_->phase == SlotMove::Phase::kPaused &&
           slot >= move_->slots.first && slot <= move_->slots.last;
  }
  // Whether `slot` is moving (in either phase).
  bool Moving(uint32_t slot) const {
    return move_.has_value() && slot >= move_->slots.first && slot <= move_->slots.last;
  }

  // The next version: `slots` owned by `group` (which must be in the map). Refused while a
  // move is in progress (FAILED_PRECONDITION).
  absl::StatusOr<ShardMap> Assign(SlotRange slots, absl::string_view group) const;
  // The next version with `slots` (all of one owner, other than `to`) moving to `to`, being
  // copied. FAILED_PRECONDITION while another move is in progress.
  absl::StatusOr<ShardMap> BeginMove(SlotRange slots, absl::string_view to) const;
  // The move's next step: copying → paused; paused → the slots owned by the target, and no move.
  // FAILED_PRECONDITION without a move in that phase.
  absl::StatusOr<ShardMap> PauseMove() const;
  absl::StatusOr<ShardMap> FinishMove() const;
  // The next version with no move; the slots stay their owner's. FAILED_PRECONDITION without one.
  absl::StatusOr<ShardMap> AbortMove() const;
  // The next version with `group` added, owning nothing; ALREADY_EXISTS if it is there.
  absl::StatusOr<ShardMap> AddGroup(absl::string_view group) const;

 private:
  absl::Status CheckRange(SlotRange slots) const;
  // OK if `slots` (all of one owner, other than `to`) may move to `to`; sets `from`.
  absl::Status CheckMove(SlotRange slots, absl::string_view to, std::string* from) const;
  absl::StatusOr<SlotMove> DecodeMove(absl::string_view text) const;
  int GroupIndex(absl::string_view group) const;  // -1: none

  uint64_t version_ = 0;
  std::vector<std::string> groups_;
  std::vector<uint16_t> owners_;  // per slot, an index into groups_
  absl::optional<SlotMove> move_;
};

// "A-B" or "A" (A to A); INVALID_ARGUMENT otherwise.
absl::StatusOr<SlotRange> ParseSlotRange(absl::string_view text);

}  // namespace sharding

#endif  // SHARDING_SHARD_MAP_H_

#include "storage/filter/checkpointed.h"

#include <algorithm>

namespace storage {

void Checkpointed::Assign(uint64_t seq, uint32_t first_index,
                          absl::Span<const uint64_t> items_added) {
  Clear();
  if (seq == 0 && first_index == 0 && items_added.empty()) return;
  if (seq < (uint64_t{1} << 32) && first_index == 0 && items_added.size() == 1 &&
      items_added[0] < (uint64_t{1} << 31)) {
    rep_ = (seq << 32) | (items_added[0] << 1) | 1;
    return;
  }
  auto* block = new uint64_t[2 + items_added.size()];
  block[0] = seq;
  block[1] = (uint64_t{first_index} << 32) | static_cast<uint32_t>(items_added.size());
  std::copy(items_added.begin(), items_added.end(), block + 2);
  rep_ = reinterpret_cast<uint64_t>(block);
}

uint64_t Checkpointed::seq() const {
  if (rep_ == 0) return 0;
  return Inline(rep_) ? rep_ >> 32 : Block(rep_)[0];
}

uint32_t Checkpointed::first_index() const {
  return is_inline() ? 0 : static_cast<uint32_t>(Block(rep_)[1] >> 32);
}

absl::InlinedVector<uint64_t, 1> Checkpointed::items_added() const {
  if (rep_ == 0) return {};
  if (Inline(rep_)) return {(rep_ & 0xffffffff) >> 1};
  const uint64_t* block = Block(rep_);
  // NOLINTNEXTLINE(modernize-return-braced-init-list): the iterator pair, not a list of two
  return absl::InlinedVector<uint64_t, 1>(block + 2, block + 2 + static_cast<uint32_t>(block[1]));
}

void Checkpointed::Clear() {
  if (!is_inline()) delete[] Block(rep_);
  rep_ = 0;
}

}  // namespace storage

#include "bloom/slice_arena.h"

#include <cstring>

#include "bloom/mapped_bits.h"

namespace bloom {

SliceArena::Ref SliceArena::Create(BlockedLayout layout, uint32_t slots) {
  if (slots == 0 || layout.num_blocks == 0) return nullptr;
  void* words = MapBits(layout.bytes() * slots);
  if (words == nullptr) return nullptr;
  return Ref(new SliceArena(layout, slots, static_cast<uint64_t*>(words)));
}

SliceArena::SliceArena(BlockedLayout layout, uint32_t slots, uint64_t* words)
    : layout_(layout), slots_(slots), words_(words), in_use_(slots, false) {}

SliceArena::~SliceArena() { UnmapBits(words_, total_bytes()); }

void SliceArena::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

uint64_t* SliceArena::AcquireSlot() {
  uint32_t slot = 0;
  {
    bloomsync::MutexLock lock(&mu_);
    while (slot < slots_ && in_use_[slot]) ++slot;
    if (slot == slots_) return nullptr;
    in_use_[slot] = true;
  }
  AddRef();
  // A slot given back keeps its old bits (its memory is interleaved with live slots'): clear
  // them now, before anyone can see the slot.
  uint64_t* const first = words_ + uint64_t{slot} * kBlockWords;
  const uint64_t stride = stride_words();
  for (uint64_t block = 0; block < layout_.num_blocks; ++block) {
    std::memset(first + block * stride, 0, kBlockBytes);
  }
  return first;
}

void SliceArena::ReleaseSlot(uint64_t* words) {
  const auto slot = static_cast<uint32_t>((words - words_) / kBlockWords);
  {
    bloomsync::MutexLock lock(&mu_);
    in_use_[slot] = false;
  }
  Unref();
}

uint32_t SliceArena::slots_in_use() const {
  bloomsync::MutexLock lock(&mu_);
  uint32_t used = 0;
  for (bool slot : in_use_) used += slot ? 1 : 0;
  return used;
}

}  // namespace bloom

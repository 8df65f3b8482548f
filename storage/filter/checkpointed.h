// Checkpointed: what a filter's last checkpoint wrote, kept by its StoredFilter until the next
// one: the journal sequence the checkpoint covers, and the items added to each sub-filter from
// first_index() on as of it (the journal after it adds to these).
//
// 8 bytes, for millions of small filters: the usual per-user filter (one sub-filter, from index
// 0, a sequence below 2^32 and fewer than 2^31 items) is held inline, tagged by the low bit;
// anything else is a heap block of the three.
//
//   Checkpointed last;
//   last.Assign(/*seq=*/7, /*first_index=*/0, {/*items=*/{42}});
//   last.seq();          // 7
//   last.items_added();  // {42}
//
// Thread-safety: none; the owner guards it (StoredFilter: its meta_mu_).
#ifndef STORAGE_FILTER_CHECKPOINTED_H_
#define STORAGE_FILTER_CHECKPOINTED_H_

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace storage {

class Checkpointed {
 public:
  Checkpointed() = default;
  Checkpointed(const Checkpointed&) = delete;
  Checkpointed& operator=(const Checkpointed&) = delete;
  ~Checkpointed() { Clear(); }

  void Assign(uint64_t seq, uint32_t first_index, absl::Span<const uint64_t> items_added);
  uint64_t seq() const;
  uint32_t first_index() const;
  absl::InlinedVector<uint64_t, 1> items_added() const;
  // Whether it lives in its 8 bytes (for tests and the size figures).
  bool is_inline() const { return rep_ == 0 || Inline(rep_); }

 private:
  // A heap block: the sequence, then first_index and size in one word, then the counts.
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a tagged pointer (low bit: inline) is a word
  static const uint64_t* Block(uint64_t rep) { return reinterpret_cast<const uint64_t*>(rep); }
  static bool Inline(uint64_t rep) { return (rep & 1) != 0; }
  void Clear();

  // 0: sequence 0 and no sub-filter; odd: the sequence in the high 32 bits and the one count
  // in bits 1-31; else a Block() (new[], 8-byte aligned, so even).
  uint64_t rep_ = 0;
};

static_assert(sizeof(Checkpointed) == 8, "Checkpointed is one word");

}  // namespace storage

#endif  // STORAGE_FILTER_CHECKPOINTED_H_

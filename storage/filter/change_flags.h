// ChangeFlags: a stored filter's state bits in one atomic byte (StoredFilter keeps millions of
// them, each in one jemalloc size class). What each bit means and who sets it:
//   kChecksChanged  checks made since the last checkpoint, so a checkpoint writes the counters.
//                   MightContain sets it after counting, the checkpoint clears it before it
//                   reads the counters (both seq_cst), so no check goes uncounted by one or
//                   the other;
//   kScheduled      the checkpoint schedule has this filter (StoredFilter::MarkChanged);
//   kOverdue        the schedule was told that the journal is overdue (ReportIfOverdue); a
//                   checkpoint clears it;
//   kDeleted,       set with the filter's apply lock held exclusively;
//   kEvicted
//   kCreationPending  DeferCreation's record is not written yet;
//   kRetirePending  the record lists sub-filters a build dropped (expired slices), so the next
//                   checkpoint must write it.
//
// Thread-safety: every operation is one atomic read-modify-write or load, seq_cst unless an
// order is given.
#ifndef STORAGE_FILTER_CHANGE_FLAGS_H_
#define STORAGE_FILTER_CHANGE_FLAGS_H_

#include <atomic>
#include <cstdint>

namespace storage {

class ChangeFlags {
 public:
  enum Bit : uint8_t {
    kChecksChanged = 1,
    kScheduled = 2,
    kOverdue = 4,
    kDeleted = 8,
    kEvicted = 16,
    kCreationPending = 32,
    kRetirePending = 64,
  };

  bool Has(Bit bit, std::memory_order order = std::memory_order_seq_cst) const {
    return (bits_.load(order) & bit) != 0;
  }
  // Sets or clears `bit`; answers whether it was set before.
  bool Set(Bit bit, std::memory_order order = std::memory_order_seq_cst) {
    return (bits_.fetch_or(bit, order) & bit) != 0;
  }
  bool Clear(Bit bit, std::memory_order order = std::memory_order_seq_cst) {
    return (bits_.fetch_and(static_cast<uint8_t>(~bit), order) & bit) != 0;
  }
  void Assign(Bit bit, bool on, std::memory_order order = std::memory_order_seq_cst) {
    if (on) {
      Set(bit, order);
    } else {
      Clear(bit, order);
    }
  }

 private:
  std::atomic<uint8_t> bits_{0};
};
static_assert(sizeof(ChangeFlags) == 1, "StoredFilter's layout counts on one byte");

}  // namespace storage

#endif  // STORAGE_FILTER_CHANGE_FLAGS_H_

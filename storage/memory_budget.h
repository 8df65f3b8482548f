// Accounting of the bytes of filter bits against the server's memory limit.
//
// Thread-safety: all methods are thread-safe (one atomic counter).
#ifndef STORAGE_MEMORY_BUDGET_H_
#define STORAGE_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace storage {

class MemoryBudget {
 public:
  // `limit_bytes` 0 means no limit.
  explicit MemoryBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}

  // Takes `bytes` from the budget, or answers ResourceExhausted (naming `what`) and takes none.
  absl::Status Charge(uint64_t bytes, absl::string_view what) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (limit_ != 0 && (bytes > limit_ || used > limit_ - bytes)) {
        return absl::ResourceExhaustedError(absl::StrCat(what, " needs ", bytes,
                                                         " bytes; the server's memory limit is ",
                                                         limit_, " bytes with ", used, " in use"));
      }
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return absl::OkStatus();
  }
  void Release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace storage

#endif  // STORAGE_MEMORY_BUDGET_H_

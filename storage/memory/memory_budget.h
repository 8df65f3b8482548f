// Accounting of memory against the server's limit (--memory_limit): filter bits, which are a
// cache (the evictor of residency.h writes cold filters out and frees them), and pinned bytes
// that cannot be evicted (Export and Import buffers).
//
// A charge for filter bits succeeds whenever the bytes fit the limit beside the pinned bytes
// (and the rest of the filter they belong to), even if the total goes over the limit: then
// over_limit() turns true and the `on_over_limit` callback wakes the evictor, which brings the
// total back under the limit. RESOURCE_EXHAUSTED is left for what could never fit.
//
// Thread-safety: all methods are thread-safe (atomic counters); the callback runs on the
// charging thread and must not block.
#ifndef STORAGE_MEMORY_MEMORY_BUDGET_H_
#define STORAGE_MEMORY_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace storage {

class MemoryBudget {
 public:
  // `limit_bytes` 0 means no limit.
  explicit MemoryBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}

  // Set once, before any charge.
  void set_on_over_limit(std::function<void()> callback) { on_over_limit_ = std::move(callback); }

  // Filter bits: `bytes` more for a filter that already holds `keep` bytes. ResourceExhausted
  // (naming `what`) only when keep + bytes cannot fit beside the pinned bytes.
  absl::Status ChargeCached(uint64_t bytes, uint64_t keep, absl::string_view what) {
    const uint64_t pinned = pinned_.load(std::memory_order_relaxed);
    if (limit_ != 0 && (keep + bytes > limit_ || pinned > limit_ - keep - bytes)) {
      return Exhausted(bytes, what, pinned);
    }
    Add(bytes);
    return absl::OkStatus();
  }
  // ResourceExhausted (naming `what`) if ChargePinned(bytes) would be now; charges nothing.
  absl::Status CheckPinnedFits(uint64_t bytes, absl::string_view what) const {
    const uint64_t pinned = pinned_.load(std::memory_order_relaxed);
    if (limit_ != 0 && (bytes > limit_ || pinned > limit_ - bytes)) {
      return Exhausted(bytes, what, pinned);
    }
    return absl::OkStatus();
  }
  // Bytes that cannot be evicted; ResourceExhausted when the pinned bytes would pass the limit.
  absl::Status ChargePinned(uint64_t bytes, absl::string_view what) {
    uint64_t pinned = pinned_.load(std::memory_order_relaxed);
    do {
      if (limit_ != 0 && (bytes > limit_ || pinned > limit_ - bytes)) {
        return Exhausted(bytes, what, pinned);
      }
    } while (!pinned_.compare_exchange_weak(pinned, pinned + bytes, std::memory_order_relaxed));
    Add(bytes);
    return absl::OkStatus();
  }
  void Release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  void ReleasePinned(uint64_t bytes) {
    pinned_.fetch_sub(bytes, std::memory_order_relaxed);
    Release(bytes);
  }

  // Turns pinned bytes into filter bits (an Import's charge, once its filter exists).
  void Unpin(uint64_t bytes) { pinned_.fetch_sub(bytes, std::memory_order_relaxed); }

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t pinned() const { return pinned_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  bool over_limit() const { return limit_ != 0 && used() > limit_; }

 private:
  void Add(uint64_t bytes) {
    const uint64_t used = used_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (limit_ != 0 && used > limit_ && on_over_limit_) on_over_limit_();
  }
  absl::Status Exhausted(uint64_t bytes, absl::string_view what, uint64_t pinned) const {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " needs ", bytes, " bytes; the server's memory limit is ", limit_, " bytes with ",
        used(), " in use (", pinned, " of them by Export/Import transfers)"));
  }

  const uint64_t limit_;
  std::function<void()> on_over_limit_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> pinned_{0};
};

}  // namespace storage

#endif  // STORAGE_MEMORY_MEMORY_BUDGET_H_

// Coalescer: BloomClient's pipelined mode (ClientOptions::pipelined). Single-key (or small)
// Add/MightContain/Remove/Count calls from many threads share a few Pipeline streams, and calls
// of one kind on the same filter that wait together go out as one operation with all their
// items.
//
// Batching without a timer, as RocksDB's write thread does it: a call that finds its stream
// idle is sent at once, alone; calls that arrive while batches are in flight wait, and when a
// batch's answers are all back the stream's reader thread sends everything that gathered
// meanwhile, one operation per (kind, filter, create spec). Under load batches grow by
// themselves; alone, a call costs one round trip. Up to two batches are in flight per stream
// (the second only while the first's answers are small, to a server that packs), so the
// server serves one while this side delivers the other's answers.
//
// Each caller blocks only for its own answer (at most ClientOptions::timeout:
// DEADLINE_EXCEEDED). A failed operation fails the calls in it with its code; where a merged
// operation fails for what one call could have caused (INVALID_ARGUMENT, RESOURCE_EXHAUSTED),
// its calls are retried alone, so each gets the answer it would have got by itself. A broken
// stream fails its unanswered calls with UNAVAILABLE (an add is idempotent: retry it; a remove
// is not, and may have been made), or with UNAUTHENTICATED / PERMISSION_DENIED when the server
// refused the stream's token, and the next call opens a new stream.
//
// Threads: each stream has a reader thread, which also sends small follow-up batches, and a
// writer thread for large ones, so the reader never blocks on a write the server cannot take
// until answers are read (assumes the server's --pipeline_window is at least 8).
//
// Thread-safety: thread-safe. Callers must not be inside a call when it is destroyed.
#ifndef CLIENT_COALESCER_H_
#define CLIENT_COALESCER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "bloom/v1/bloom.grpc.pb.h"

namespace bloomclient {

// Raises `last` to `sequence` if that is higher (a CAS loop: many threads answer writes).
inline void RaiseSequence(std::atomic<uint64_t>& last, uint64_t sequence) {
  uint64_t seen = last.load();
  while (seen < sequence && !last.compare_exchange_weak(seen, sequence)) {
  }
}

class Coalescer {
 public:
  struct Options {
    size_t streams = 1;        // Pipeline streams; a call picks one by its filter's name
    size_t rounds = 2;         // batches in flight per stream: 1 or 2 (0 counts as 1, more as 2)
    size_t max_items = 10000;  // items in one operation
    absl::Duration timeout = absl::Seconds(10);
    std::string token;  // sent as "authorization: Bearer <token>" when the stream opens
    // Read-your-writes through followers: raised to the sequence of each add's answer, and
    // sent as min_sequence with each check. Null: not tracked. Must outlive the coalescer.
    std::atomic<uint64_t>* last_sequence = nullptr;
  };
  // `stub` must outlive the coalescer.
  Coalescer(bloom::v1::BloomFilterService::Stub* stub, Options options);
  ~Coalescer();
  Coalescer(const Coalescer&) = delete;
  Coalescer& operator=(const Coalescer&) = delete;

  // As BloomClient::Add / MightContain for up to max_items items.
  absl::StatusOr<std::vector<bool>> Add(absl::string_view name, absl::Span<const std::string> items,
                                        const bloom::v1::FilterSpec* create_if_missing);
  absl::StatusOr<std::vector<bool>> MightContain(absl::string_view name,
                                                 absl::Span<const std::string> items,
                                                 bool absent_if_missing = false);
  // As BloomClient::Remove. Calls on one filter merged into one operation remove in the order
  // they were made: of two calls removing an item held once, the first removes it.
  absl::StatusOr<std::vector<bool>> Remove(absl::string_view name,
                                           absl::Span<const std::string> items);
  // As BloomClient::Count, or nullopt (nothing sent) while the stream's server has not said
  // that it takes counts (bloom-pipeline-count: older servers end the stream on one): the
  // caller then makes the unary call. A new stream's first calls go unary that way.
  absl::StatusOr<absl::optional<std::vector<uint32_t>>> Count(absl::string_view name,
                                                              absl::Span<const std::string> items);

 private:
  class Lane;
  struct Call;
  absl::StatusOr<std::vector<bool>> Submit(std::shared_ptr<Call> call);

  const Options options_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace bloomclient

#endif  // CLIENT_COALESCER_H_

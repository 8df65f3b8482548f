// The systems bloom-bench drives: bloom-server over gRPC, and Redis two ways (a client-side
// Bloom filter over a bitmap, as Redisson and common tutorials do, and RedisBloom's BF.*).
//
// Thread-safety: a Target is one connection (or a share of the pipelined client), used by one
// client thread.
#ifndef LOADTEST_TARGETS_H_
#define LOADTEST_TARGETS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loadtest {

class Target {
 public:
  virtual ~Target() = default;
  // Creates filter `name` for `capacity` items at `error_rate` (empty). UNIMPLEMENTED when the
  // target cannot do it (a Redis server without the Bloom module).
  virtual absl::Status Prepare(const std::string& name, uint64_t capacity, double error_rate) = 0;
  // One round trip: adds `keys`; added[i] = key i was new.
  virtual absl::Status Add(const std::string& name, const std::vector<std::string>& keys,
                           std::vector<bool>& added) = 0;
  // One round trip: present[i] = key i might be in the filter.
  virtual absl::Status MightContain(const std::string& name, const std::vector<std::string>& keys,
                                    std::vector<bool>& present) = 0;
  // One round trip (cuckoo targets): counts[i] = copies of key i held; a filter not created
  // yet holds none. UNIMPLEMENTED where the target has no count.
  virtual absl::Status Count(const std::string& /*name*/, const std::vector<std::string>& /*keys*/,
                             std::vector<uint32_t>& /*counts*/) {
    return absl::UnimplementedError("this target has no count (bloom-cuckoo and redis-cf do)");
  }
  // Loads the keys "0" .. "count-1" into `name` as fast as the target allows (preloading is not
  // measured); the end state is the same as adding them. UNIMPLEMENTED: the caller adds them in
  // batches instead.
  virtual absl::Status BulkLoad(const std::string& /*name*/, uint64_t /*count*/) {
    return absl::UnimplementedError("no bulk load");
  }
};

// "bloom" or "bloom-cuckoo" (CUCKOO filters; address host:port), "redis-bitmap", "redis-bf" or
// "redis-cf" (RedisBloom's cuckoo filters, at its default bucket size; address host:port). Filters
// are created on first use by the bloom target (create_if_missing) with `capacity`/`error_rate`.
// `transport` (bloom only): "unary" calls, one connection per target; "pipeline", a raw
// Pipeline stream per target with one operation in flight; "client", every target sharing one
// pipelined BloomClient, which coalesces their concurrent calls (over
// $BLOOM_BENCH_PIPELINE_STREAMS streams, default 1; a filter's calls always share one).
absl::StatusOr<std::unique_ptr<Target>> MakeTarget(const std::string& kind,
                                                   const std::string& address, uint64_t capacity,
                                                   double error_rate,
                                                   const std::string& transport = "unary");

}  // namespace loadtest

#endif  // LOADTEST_TARGETS_H_

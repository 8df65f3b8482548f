// The RPC table: what each method this server answers is, in one place. The service reads the
// role a call needs and whether a follower forwards it, metrics its label and the items it
// counts, the token gate which methods may be called without a token, and the follower's
// forwarder the method paths, and the shard router (service/shard_router.h) how a call names
// the filters it touches.
//
//   const rpcs::RpcInfo& add = rpcs::Info(rpcs::Rpc::kAdd);
//   forwarder.Unary(context, add.path, request, response, done);   // "/bloom.v1.../Add"
//   if (add.access == rpcs::Access::kWrite) ...                     // needs a write token
//
// The rows are bloom.v1.BloomFilterService's methods, the operations a Pipeline stream carries
// (counted apart from the stream: "Pipeline.Add"), and the health and reflection services
// (which the token gate may open; they are not counted in bloom_rpc_*).
//
// Thread-safety: constant data; every function is thread-safe.
#ifndef COMMON_RPCS_H_
#define COMMON_RPCS_H_

#include <cstddef>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace rpcs {

enum class Rpc {
  kReserve,
  kAdd,
  kMightContain,
  kStats,
  kDelete,
  kList,
  kExport,
  kImport,
  kPipeline,
  kPipelineAdd,
  kPipelineMightContain,
  kMerge,
  kRemove,
  kCount,
  kPipelineRemove,
  kPipelineCount,
  kGetShardMap,
  kHealthCheck,
  kHealthWatch,
  kReflection,
  kReflectionV1,
};
inline constexpr size_t kNumRpcs = 21;

// The token role a call needs (service/auth.h's Role). A Pipeline stream needs only a read
// token to open; each write operation on it needs a write token.
enum class Access { kRead, kWrite };

// What a follower does with the call.
enum class Forwarding {
  kAlways,         // a write: the primary answers it, as the caller's own call
  kUnlessApplied,  // a read: answered here once this pod has applied its min_sequence (waiting
                   // a little, no thread held), else by the primary
  kWholeStream,    // a stream proxied to the primary as a whole (Pipeline, Import)
  kNever,          // answered here (Export, from the follower's own store; the shard map;
                   // health, reflection)
  kNotACall,       // an operation inside a Pipeline stream: the stream decides
};

// Where the call is served.
enum class Lane {
  kGrpcThread,   // on the gRPC thread that received it, or the store's group committer
  kItemThreads,  // unary Add and MightContain: the callback API or --item_call_threads
  kAdminLane,    // List and Stats: call_lane.h, off gRPC's threads, bounded
  kStream,       // a streaming reactor (Pipeline, Export, Import, health Watch, reflection)
};

// Whether the token gate lets the call in without a token (token_gate.h, --open_methods).
enum class Tokenless { kNever, kIfHealthOpen, kIfReflectionOpen };

// How the call names the filters it touches: what routing by filter name reads.
enum class Routing {
  kNone,          // no filter (the shard map, health, reflection)
  kByName,        // one filter: the request's `name`
  kMergeFilters,  // Merge: `target` and every name in `sources`
  kPrefix,        // List: every filter whose name starts with `prefix`
  kPerOperation,  // a stream whose messages each name one filter (Pipeline, Import)
};

// Which items metrics count when the call succeeds.
enum class CountedItems { kNone, kAdded, kChecked };

struct RpcInfo {
  Rpc rpc;
  const char* label;  // the `method` label of bloom_rpc_* and the name logs use
  const char* path;   // the gRPC method path; nullptr for an operation inside a stream
  Access access;
  Forwarding forwarding;
  Lane lane;
  Tokenless tokenless;
  Routing routing;
  CountedItems items;
  bool measured;  // counted in bloom_rpc_requests_total and bloom_rpc_duration_seconds
};

const RpcInfo& Info(Rpc rpc);
// Every row, in the order of Rpc.
absl::Span<const RpcInfo> All();
// The row whose path is `path`, or nullptr for a method not in the table.
const RpcInfo* FindByPath(absl::string_view path);

}  // namespace rpcs

#endif  // COMMON_RPCS_H_

// The RPC table (common/rpcs.h).
#include "common/rpcs.h"

namespace rpcs {
namespace {

#define BLOOM_METHOD(name) "/bloom.v1.BloomFilterService/" name

// Short names for the access column, so that a row fits two lines.
constexpr Access kR = Access::kRead;
constexpr Access kW = Access::kWrite;

// One row per Rpc, in its order (checked by rpcs_test).
constexpr RpcInfo kTable[kNumRpcs] = {
    {Rpc::kReserve, "Reserve", BLOOM_METHOD("Reserve"), kW, Forwarding::kAlways, Lane::kGrpcThread,
     Tokenless::kNever, Routing::kByName, CountedItems::kNone, true},
    {Rpc::kAdd, "Add", BLOOM_METHOD("Add"), kW, Forwarding::kAlways, Lane::kItemThreads,
     Tokenless::kNever, Routing::kByName, CountedItems::kAdded, true},
    {Rpc::kMightContain, "MightContain", BLOOM_METHOD("MightContain"), kR,
     Forwarding::kUnlessApplied, Lane::kItemThreads, Tokenless::kNever, Routing::kByName,
     CountedItems::kChecked, true},
    {Rpc::kStats, "Stats", BLOOM_METHOD("Stats"), kR, Forwarding::kUnlessApplied, Lane::kAdminLane,
     Tokenless::kNever, Routing::kByName, CountedItems::kNone, true},
    {Rpc::kDelete, "Delete", BLOOM_METHOD("Delete"), kW, Forwarding::kAlways, Lane::kGrpcThread,
     Tokenless::kNever, Routing::kByName, CountedItems::kNone, true},
    {Rpc::kList, "List", BLOOM_METHOD("List"), kR, Forwarding::kUnlessApplied, Lane::kAdminLane,
     Tokenless::kNever, Routing::kPrefix, CountedItems::kNone, true},
    {Rpc::kExport, "Export", BLOOM_METHOD("Export"), kR, Forwarding::kNever, Lane::kStream,
     Tokenless::kNever, Routing::kByName, CountedItems::kNone, true},
    {Rpc::kImport, "Import", BLOOM_METHOD("Import"), kW, Forwarding::kWholeStream, Lane::kStream,
     Tokenless::kNever, Routing::kPerOperation, CountedItems::kNone, true},
    {Rpc::kPipeline, "Pipeline", BLOOM_METHOD("Pipeline"), kR, Forwarding::kWholeStream,
     Lane::kStream, Tokenless::kNever, Routing::kPerOperation, CountedItems::kNone, true},
    {Rpc::kPipelineAdd, "Pipeline.Add", nullptr, kW, Forwarding::kNotACall, Lane::kStream,
     Tokenless::kNever, Routing::kByName, CountedItems::kAdded, true},
    {Rpc::kPipelineMightContain, "Pipeline.MightContain", nullptr, kR, Forwarding::kNotACall,
     Lane::kStream, Tokenless::kNever, Routing::kByName, CountedItems::kChecked, true},
    {Rpc::kMerge, "Merge", BLOOM_METHOD("Merge"), kW, Forwarding::kAlways, Lane::kGrpcThread,
     Tokenless::kNever, Routing::kMergeFilters, CountedItems::kNone, true},
    {Rpc::kRemove, "Remove", BLOOM_METHOD("Remove"), kW, Forwarding::kAlways, Lane::kGrpcThread,
     Tokenless::kNever, Routing::kByName, CountedItems::kNone, true},
    {Rpc::kCount, "Count", BLOOM_METHOD("Count"), kR, Forwarding::kUnlessApplied, Lane::kGrpcThread,
     Tokenless::kNever, Routing::kByName, CountedItems::kNone, true},
    {Rpc::kPipelineRemove, "Pipeline.Remove", nullptr, kW, Forwarding::kNotACall, Lane::kStream,
     Tokenless::kNever, Routing::kByName, CountedItems::kNone, true},
    {Rpc::kPipelineCount, "Pipeline.Count", nullptr, kR, Forwarding::kNotACall, Lane::kStream,
     Tokenless::kNever, Routing::kByName, CountedItems::kNone, true},
    {Rpc::kGetShardMap, "GetShardMap", BLOOM_METHOD("GetShardMap"), kR, Forwarding::kNever,
     Lane::kGrpcThread, Tokenless::kNever, Routing::kNone, CountedItems::kNone, true},
    {Rpc::kHealthCheck, "Health.Check", "/grpc.health.v1.Health/Check", kR, Forwarding::kNever,
     Lane::kGrpcThread, Tokenless::kIfHealthOpen, Routing::kNone, CountedItems::kNone, false},
    {Rpc::kHealthWatch, "Health.Watch", "/grpc.health.v1.Health/Watch", kR, Forwarding::kNever,
     Lane::kStream, Tokenless::kIfHealthOpen, Routing::kNone, CountedItems::kNone, false},
    {Rpc::kReflection, "ServerReflectionInfo",
     "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", kR, Forwarding::kNever,
     Lane::kStream, Tokenless::kIfReflectionOpen, Routing::kNone, CountedItems::kNone, false},
    {Rpc::kReflectionV1, "ServerReflectionInfo.v1",
     "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", kR, Forwarding::kNever,
     Lane::kStream, Tokenless::kIfReflectionOpen, Routing::kNone, CountedItems::kNone, false},
};

#undef BLOOM_METHOD

}  // namespace

const RpcInfo& Info(Rpc rpc) { return kTable[static_cast<size_t>(rpc)]; }

absl::Span<const RpcInfo> All() { return kTable; }

const RpcInfo* FindByPath(absl::string_view path) {
  for (const RpcInfo& info : kTable) {
    if (info.path != nullptr && path == info.path) return &info;
  }
  return nullptr;
}

}  // namespace rpcs

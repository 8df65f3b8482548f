// ShardRoutes: a client's copy of its sharded deployment's map (bloom.v1 GetShardMap), to send
// each call for a filter straight to the primary of the group that owns the filter's slot
// (common/slot.h) instead of through a pod that would forward it (ClientOptions::shard_routing).
//
//   ShardRoutes routes(seed_stub, connect, prepare, coalescing);
//   routes.Refresh();                                  // the map, from the seed's pod
//   std::shared_ptr<ShardRoutes::Group> group = routes.For("user:42");  // null: the seed
//   ... call group->stub ...; routes.AfterCall(context, status);
//
// The copy is fetched again when an answer says it is stale: a forwarded answer's
// `bloom-shard-map-version` header names a later version (one fetch per version), or an error
// says a filter belongs to another group (a pod's refusal while the map changes; at most one
// fetch each 100 ms). Calls meanwhile go where the copy says, and the pods forward what it gets
// wrong. An unsharded
// server (map version 0) or one that predates sharding (UNIMPLEMENTED) routes everything to the
// seed.
//
// Thread-safety: thread-safe. A Group stays valid while a caller holds it.
#ifndef CLIENT_SHARD_ROUTES_H_
#define CLIENT_SHARD_ROUTES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "client/coalescer.h"
#include "grpcpp/grpcpp.h"

namespace bloomclient {

class ShardRoutes {
 public:
  // One group's primary, and what calls to it use.
  struct Group {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<bloom::v1::BloomFilterService::Stub> stub;
    // Sequences are a group's own: read-your-writes is tracked per group.
    std::atomic<uint64_t> last_sequence{0};
    std::unique_ptr<Coalescer> coalescer;  // pipelined mode; uses `stub` and `last_sequence`
  };
  using Connect = std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>;
  using Prepare = std::function<void(grpc::ClientContext& context)>;

  // `seed` (the stub of the client's own target) must outlive this. `coalescing`: the
  // pipelined mode's options, for each group's coalescer (nullopt: not pipelined).
  ShardRoutes(bloom::v1::BloomFilterService::Stub* seed, Connect connect, Prepare prepare,
              absl::optional<Coalescer::Options> coalescing);

  // Fetches the map from the seed now: OK (and routes through the seed) for an unsharded
  // server or one that predates sharding. With `at_least`, only if this copy is older than
  // that version (another thread may have fetched it meanwhile).
  absl::Status Refresh(uint64_t at_least = 0);
  // The group whose primary serves `name`; null: the seed serves it.
  std::shared_ptr<Group> For(absl::string_view name) const;
  // After a call: fetches the map again if the answer says this copy is stale.
  void AfterCall(const grpc::ClientContext& context, const grpc::Status& status);
  void AfterError(const absl::Status& status);
  uint64_t version() const;

 private:
  void RefreshIfDue();

  bloom::v1::BloomFilterService::Stub* const seed_;
  const Connect connect_;
  const Prepare prepare_;
  const absl::optional<Coalescer::Options> coalescing_;
  std::mutex refresh_mu_;                           // one fetch at a time
  absl::Time last_refresh_ = absl::InfinitePast();  // guarded by refresh_mu_
  mutable std::mutex mu_;
  uint64_t version_ = 0;                                      // guarded by mu_
  uint32_t slot_count_ = 0;                                   // guarded by mu_
  std::vector<std::shared_ptr<Group>> owner_;                 // per slot; guarded by mu_
  std::map<std::string, std::shared_ptr<Group>> by_address_;  // guarded by mu_
};

}  // namespace bloomclient

#endif  // CLIENT_SHARD_ROUTES_H_

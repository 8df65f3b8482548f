// A List in a sharded deployment (shard_router.h): every group holds some of the filters, so
// the pod asked lists its own group's and asks one pod of each other group for theirs (a
// forwarded List, which that pod answers from its own group only), then merges them in name
// order into one page. The page token stays the last name listed, as for one group: each
// group lists the names after it.
//
//   ListEveryGroup(core, context, request, response, std::move(finish));
//
// The caller's token goes with each group's List (each group checks it), and this pod's own
// List is checked first: a caller it refuses costs the other groups nothing. A group that
// cannot answer fails the whole List (UNAVAILABLE, naming it), since a page without its
// filters would be wrong, not just short. A List asking for a min_sequence sends it to each
// group's primary (sequences are each group's own).
//
// Thread-safety: thread-safe; `finish` runs once, on this thread or on one of gRPC's.
#ifndef SERVICE_SHARDED_LIST_H_
#define SERVICE_SHARDED_LIST_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bloom/v1/bloom.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/bloom_service.h"
#include "service/shard_router.h"

namespace service {

// Which names a List served by this pod shows (null: every name), or why it cannot be served:
// - in a sharded deployment, only filters whose slot this pod's group owns in the map it holds,
//   unless a slot mover asks (ShardRouter::MoverCall: it lists what the group holds, copies of
//   moving slots and copies a move left behind included). Else a List during a move would show
//   a moving filter twice, once from its owner and once from the copy at the target;
// - with `request.slots`, only filters of those slots (FAILED_PRECONDITION from a pod with no
//   shard map, UNAVAILABLE from one that has not read it yet, INVALID_ARGUMENT past its slots).
// `router` may be null (an unsharded server).
absl::StatusOr<std::function<bool(absl::string_view)>> NamesListed(
    const ShardRouter* router, const bloom::v1::ListRequest& request,
    const grpc::ServerContextBase* context);

// `request` and `response` must stay valid until `finish` runs.
void ListEveryGroup(BloomService* core, grpc::ServerContextBase* context,
                    const bloom::v1::ListRequest& request, bloom::v1::ListResponse* response,
                    BloomService::Finish finish);

}  // namespace service

#endif  // SERVICE_SHARDED_LIST_H_

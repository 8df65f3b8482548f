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

#include "bloom/v1/bloom.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/bloom_service.h"

namespace service {

// `request` and `response` must stay valid until `finish` runs.
void ListEveryGroup(BloomService* core, grpc::ServerContextBase* context,
                    const bloom::v1::ListRequest& request, bloom::v1::ListResponse* response,
                    BloomService::Finish finish);

}  // namespace service

#endif  // SERVICE_SHARDED_LIST_H_

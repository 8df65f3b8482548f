// Export and Import streams on gRPC's callback API: a stream costs no thread while it waits for
// its client, so stalled clients cannot pile up threads (docs/security.md).
//
//  - Export pulls its dump from an ExportCursor one chunk (at most 1 MiB) at a time, as the
//    client takes them: one write in flight, the cursor's buffers charged to --memory_limit.
//  - Import reads one chunk at a time into the store's PendingImport (whose memory is charged
//    as the bits arrive) and commits when the client half-closes.
//  - Both take a TransferGuard ticket: at most --max_transfers at once and
//    --max_transfers_per_client of one client's; one that moves no chunk for
//    --transfer_idle_timeout, or less than --transfer_min_rate over it, is ended: an Import
//    with ABORTED (its charge is released at once), an Export by cancelling the call (its
//    client may not be reading anyway).
//  - On shutdown a stream ends UNAVAILABLE at its next chunk.
//
// Thread-safety: an Export's reactions never overlap (one write in flight) and its abandon only
// cancels the call, so it needs no lock. An Import guards its state with its own mutex, which
// the watchdog's abandon also takes; its Append runs under that mutex so that an abandon cannot
// free the import under it, and gRPC is never called while it is held.
#ifndef SERVICE_TRANSFERS_H_
#define SERVICE_TRANSFERS_H_

#include <grpcpp/support/server_callback.h>

#include "bloom/v1/bloom.grpc.pb.h"

namespace service {

class BloomService;

// Start serving a stream of `service` (which must outlive it).
grpc::ServerWriteReactor<bloom::v1::ExportChunk>* StartExport(
    BloomService* service, grpc::CallbackServerContext* context,
    const bloom::v1::ExportRequest& request);
grpc::ServerReadReactor<bloom::v1::ImportChunk>* StartImport(BloomService* service,
                                                             grpc::CallbackServerContext* context,
                                                             bloom::v1::ImportResponse* response);

}  // namespace service

#endif  // SERVICE_TRANSFERS_H_

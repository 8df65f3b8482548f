// A follower's Pipeline and Import streams, proxied to the primary whole: every message goes
// up as it arrives, every answer comes back, and the stream ends with the primary's status.
// A Pipeline stream carries adds, which only the primary takes; proxying the whole stream keeps
// its promise that a check after an add of the same item sees it.
//
// One message in flight in each direction at a time, so a slow side slows the other, as a
// direct stream would; the caller's token and deadline go with it (Forwarder::ContextFor).
//
// Thread-safety: the reactors are gRPC's; each proxy deletes itself when both of its calls are
// done.
#ifndef SERVICE_STREAM_PROXY_H_
#define SERVICE_STREAM_PROXY_H_

#include <string>

#include "absl/status/statusor.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "service/forwarder.h"

namespace service {

// `client` is the admitted caller's ClientKey (auth.h), or why the follower refused the stream
// (it then finishes with that at once). Each stream takes a place on a connection to the
// primary (Forwarder::streams(), counted for `client`); with none to be had it finishes
// RESOURCE_EXHAUSTED at once.
// The Pipeline stream's messages pass as bytes, unparsed (the primary reads them).
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ProxyPipeline(
    Forwarder* forwarder, grpc::CallbackServerContext* context,
    const absl::StatusOr<std::string>& client);

grpc::ServerReadReactor<bloom::v1::ImportChunk>* ProxyImport(
    Forwarder* forwarder, grpc::CallbackServerContext* context, bloom::v1::ImportResponse* response,
    const absl::StatusOr<std::string>& client);

}  // namespace service

#endif  // SERVICE_STREAM_PROXY_H_

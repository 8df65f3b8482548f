// Conversions between the API's protobuf messages and the storage layer's types, and the one
// place where absl::Status becomes grpc::Status.
//
// Thread-safety: pure functions.
#ifndef SERVICE_CONVERT_H_
#define SERVICE_CONVERT_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "bloom/scalable_filter.h"
#include "bloom/v1/bloom.pb.h"
#include "storage/filter/stored_filter.h"

namespace service {

// Same code (absl's codes are gRPC's), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

bloom::FilterParams FromProto(const bloom::v1::FilterSpec& spec);
void ToProto(const bloom::FilterParams& spec, bloom::v1::FilterSpec* out);
void ToProto(const storage::FilterInfo& info, bloom::v1::FilterStats* out);

}  // namespace service

#endif  // SERVICE_CONVERT_H_

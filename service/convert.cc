#include "service/convert.h"

#include <cmath>
#include <string>

#include "absl/time/time.h"

namespace service {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

bloom::FilterSpec FromProto(const bloom::v1::FilterSpec& spec) {
  return {spec.capacity(), spec.error_rate(), spec.expansion(), spec.non_scaling()};
}

void ToProto(const bloom::FilterSpec& spec, bloom::v1::FilterSpec* out) {
  out->set_capacity(spec.capacity);
  out->set_error_rate(spec.error_rate);
  out->set_expansion(spec.expansion);
  out->set_non_scaling(spec.non_scaling);
}

void ToProto(const storage::FilterInfo& info, bloom::v1::FilterStats* out) {
  const bloom::ScalableFilterStats& s = info.stats;
  out->set_name(info.name);
  ToProto(info.spec, out->mutable_spec());
  out->set_capacity(s.capacity);
  out->set_size_bytes(s.size_bytes);
  out->set_sub_filters(static_cast<uint32_t>(s.sub_filters.size()));
  out->set_items_added(s.items_added);
  out->set_estimated_cardinality(static_cast<uint64_t>(std::llround(s.estimated_cardinality)));
  out->set_fill_ratio(s.fill_ratio);
  out->set_estimated_error_rate(s.estimated_error_rate);
  for (const bloom::SubFilterStats& sub : s.sub_filters) {
    bloom::v1::SubFilterStats* o = out->add_sub_filter_stats();
    o->set_capacity(sub.capacity);
    o->set_error_rate(sub.error_rate);
    o->set_bits(sub.bits);
    o->set_hash_count(sub.hash_count);
    o->set_items_added(sub.items_added);
    o->set_fill_ratio(sub.fill_ratio);
  }
  const int64_t micros = absl::ToUnixMicros(info.created_at);
  out->mutable_created_at()->set_seconds(micros / 1'000'000);
  out->mutable_created_at()->set_nanos(static_cast<int32_t>(micros % 1'000'000) * 1000);
  out->set_checks(info.checks);
  out->set_check_hits(info.check_hits);
}

}  // namespace service

#include "service/convert.h"

#include <cmath>
#include <string>

#include "absl/time/time.h"

namespace service {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return {static_cast<grpc::StatusCode>(status.code()), static_cast<std::string>(status.message())};
}

namespace {

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t nanos = absl::ToInt64Nanoseconds(d % absl::Seconds(1));
  out->set_seconds(absl::ToInt64Seconds(d - absl::Nanoseconds(nanos)));
  out->set_nanos(static_cast<int32_t>(nanos));
}

void ToProto(absl::Time t, google::protobuf::Timestamp* out) {
  const absl::Duration since_epoch = t - absl::UnixEpoch();
  const int64_t seconds = absl::ToInt64Seconds(absl::Floor(since_epoch, absl::Seconds(1)));
  out->set_seconds(seconds);
  out->set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(since_epoch - absl::Seconds(seconds))));
}

}  // namespace

bloom::FilterParams FromProto(const bloom::v1::FilterSpec& spec) {
  bloom::FilterParams out{spec.capacity(), spec.error_rate(), spec.expansion(), spec.non_scaling()};
  out.window = FromProto(spec.window());
  out.window_slices = spec.window_slices();
  out.idle_ttl = FromProto(spec.idle_ttl());
  switch (spec.kind()) {
    case bloom::v1::FILTER_KIND_UNSPECIFIED:
    case bloom::v1::FILTER_KIND_BLOOM:
      out.kind = bloom::FilterKind::kBloom;
      break;
    case bloom::v1::FILTER_KIND_CUCKOO:
      out.kind = bloom::FilterKind::kCuckoo;
      break;
    default:  // an enum value from a newer client: NormalizeSpec names it
      out.kind = static_cast<bloom::FilterKind>(0xff);
  }
  return out;
}

void ToProto(const bloom::FilterParams& spec, bloom::v1::FilterSpec* out) {
  out->set_capacity(spec.capacity);
  out->set_error_rate(spec.error_rate);
  out->set_expansion(spec.expansion);
  out->set_non_scaling(spec.non_scaling);
  if (spec.window != absl::ZeroDuration()) ToProto(spec.window, out->mutable_window());
  out->set_window_slices(spec.window_slices);
  if (spec.idle_ttl != absl::ZeroDuration()) ToProto(spec.idle_ttl, out->mutable_idle_ttl());
  // Unset for BLOOM: Stats of a Bloom filter read as before kinds existed.
  if (spec.cuckoo()) out->set_kind(bloom::v1::FILTER_KIND_CUCKOO);
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
    if (sub.slice_start.has_value()) ToProto(*sub.slice_start, o->mutable_slice_start());
    o->set_buckets(sub.buckets);
    o->set_fingerprint_bits(sub.fingerprint_bits);
  }
  ToProto(info.created_at, out->mutable_created_at());
  if (info.expires_at.has_value()) ToProto(*info.expires_at, out->mutable_expires_at());
  if (info.window_start.has_value()) ToProto(*info.window_start, out->mutable_window_start());
  out->set_checks(info.checks);
  out->set_check_hits(info.check_hits);
}

}  // namespace service

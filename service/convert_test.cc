// The conversions at the API's edge: status codes and messages pass unchanged, a FilterSpec
// survives the trip to FilterParams and back (durations to the nanosecond, negative ones
// included, which validation then refuses), and Stats fields land in their proto fields, with
// Timestamps before the epoch normalized as protobuf requires (nanos never negative).
#include "service/convert.h"

#include "gtest/gtest.h"

namespace service {
namespace {

TEST(ConvertTest, StatusCodesAndMessagesPassUnchanged) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  const absl::Status statuses[] = {absl::InvalidArgumentError("spec.capacity must be at least 1"),
                                   absl::NotFoundError("filter 'x' not found"),
                                   absl::AlreadyExistsError("exists"),
                                   absl::ResourceExhaustedError("full"),
                                   absl::DataLossError("checksum"),
                                   absl::UnavailableError("disk full"),
                                   absl::FailedPreconditionError("closed"),
                                   absl::AbortedError("retry"),
                                   absl::PermissionDeniedError("read token"),
                                   absl::UnauthenticatedError("no token"),
                                   absl::DeadlineExceededError("late"),
                                   absl::InternalError("bug")};
  for (const absl::Status& status : statuses) {
    const grpc::Status converted = ToGrpcStatus(status);
    EXPECT_EQ(static_cast<int>(converted.error_code()), static_cast<int>(status.code()));
    EXPECT_EQ(converted.error_message(), status.message());
  }
}

TEST(ConvertTest, AFilterSpecSurvivesTheRoundTrip) {
  bloom::FilterParams params{123'456, 0.001, 4, false};
  params.window = absl::Hours(24 * 7) + absl::Milliseconds(1500) + absl::Nanoseconds(7);
  params.window_slices = 16;
  params.idle_ttl = absl::Minutes(30);
  bloom::v1::FilterSpec proto;
  ToProto(params, &proto);
  EXPECT_EQ(proto.capacity(), 123'456u);
  EXPECT_EQ(proto.window().seconds(), 7 * 24 * 3600 + 1);
  EXPECT_EQ(proto.window().nanos(), 500'000'007);
  EXPECT_EQ(proto.idle_ttl().seconds(), 1800);
  EXPECT_TRUE(FromProto(proto) == params);

  // Negative durations keep seconds and nanos of one sign (protobuf's rule), and come back.
  params.window = -absl::Milliseconds(1500);
  ToProto(params, &proto);
  EXPECT_EQ(proto.window().seconds(), -1);
  EXPECT_EQ(proto.window().nanos(), -500'000'000);
  EXPECT_EQ(FromProto(proto).window, -absl::Milliseconds(1500));

  // No window and no idle_ttl: the messages stay unset.
  bloom::v1::FilterSpec plain;
  ToProto(bloom::FilterParams{1000, 0.01, 2, false}, &plain);
  EXPECT_FALSE(plain.has_window());
  EXPECT_FALSE(plain.has_idle_ttl());
  EXPECT_EQ(FromProto(plain).window, absl::ZeroDuration());
}

TEST(ConvertTest, StatsFieldsLandInTheirProtoFields) {
  storage::FilterInfo info;
  info.name = "users";
  info.spec = {1000, 0.01, 2, false};
  info.created_at = absl::UnixEpoch() - absl::Milliseconds(250);  // before the epoch
  info.checks = 40;
  info.check_hits = 3;
  info.stats.capacity = 3000;
  info.stats.size_bytes = 4416;
  info.stats.items_added = 1500;
  info.stats.estimated_cardinality = 1499.6;
  info.stats.fill_ratio = 0.25;
  info.stats.estimated_error_rate = 0.004;
  bloom::SubFilterStats sub;
  sub.capacity = 1000;
  sub.error_rate = 0.005;
  sub.bits = 11776;
  sub.hash_count = 7;
  sub.items_added = 1000;
  sub.fill_ratio = 0.4;
  info.stats.sub_filters = {sub, sub};
  info.stats.sub_filters[1].slice_start = absl::FromUnixSeconds(1'700'000'000);

  bloom::v1::FilterStats out;
  ToProto(info, &out);
  EXPECT_EQ(out.name(), "users");
  EXPECT_EQ(out.spec().capacity(), 1000u);
  EXPECT_EQ(out.capacity(), 3000u);
  EXPECT_EQ(out.size_bytes(), 4416u);
  EXPECT_EQ(out.sub_filters(), 2u);
  EXPECT_EQ(out.items_added(), 1500u);
  EXPECT_EQ(out.estimated_cardinality(), 1500u);  // rounded to the nearest
  EXPECT_DOUBLE_EQ(out.fill_ratio(), 0.25);
  EXPECT_DOUBLE_EQ(out.estimated_error_rate(), 0.004);
  EXPECT_EQ(out.checks(), 40u);
  EXPECT_EQ(out.check_hits(), 3u);
  EXPECT_EQ(out.created_at().seconds(), -1);
  EXPECT_EQ(out.created_at().nanos(), 750'000'000);
  EXPECT_FALSE(out.has_expires_at());
  EXPECT_FALSE(out.has_window_start());
  ASSERT_EQ(out.sub_filter_stats_size(), 2);
  EXPECT_EQ(out.sub_filter_stats(0).hash_count(), 7u);
  EXPECT_EQ(out.sub_filter_stats(0).bits(), 11776u);
  EXPECT_FALSE(out.sub_filter_stats(0).has_slice_start());
  EXPECT_EQ(out.sub_filter_stats(1).slice_start().seconds(), 1'700'000'000);

  info.expires_at = absl::FromUnixSeconds(1'800'000'000);
  info.window_start = absl::FromUnixSeconds(1'600'000'000);
  bloom::v1::FilterStats with_times;
  ToProto(info, &with_times);
  EXPECT_EQ(with_times.expires_at().seconds(), 1'800'000'000);
  EXPECT_EQ(with_times.window_start().seconds(), 1'600'000'000);
}

}  // namespace
}  // namespace service

// bloom-cli's output (client/cli_output.h).
#include "client/cli_output.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace bloomcli {
namespace {

std::string FormatTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FormatTime(absl::RFC3339_sec, absl::FromUnixSeconds(t.seconds()),
                          absl::UTCTimeZone());
}

}  // namespace

int Error(const absl::Status& status) {
  std::fprintf(stderr, "bloom-cli: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               static_cast<std::string>(status.message()).c_str());
  return 1;
}

void PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) json = "{}";
  std::cout << json;
}

void PrintStats(const bloom::v1::FilterStats& s) {
  std::cout << absl::StrFormat(
      "name:                  %s\n"
      "capacity:              %d (spec %d, error_rate %g, expansion %d%s)\n"
      "size_bytes:            %d\n"
      "sub_filters:           %d\n"
      "items_added:           %d\n"
      "estimated_cardinality: %d\n"
      "fill_ratio:            %.4f\n"
      "estimated_error_rate:  %.3g\n"
      "checks:                %d (%d present)\n",
      s.name(), s.capacity(), s.spec().capacity(), s.spec().error_rate(), s.spec().expansion(),
      s.spec().non_scaling() ? ", non_scaling" : "", s.size_bytes(), s.sub_filters(),
      s.items_added(), s.estimated_cardinality(), s.fill_ratio(), s.estimated_error_rate(),
      s.checks(), s.check_hits());
  if (s.spec().has_window()) {
    std::cout << absl::StrFormat(
        "window:                %s in %d slices (items added since %s read present)\n",
        absl::FormatDuration(absl::Seconds(s.spec().window().seconds()) +
                             absl::Nanoseconds(s.spec().window().nanos())),
        s.spec().window_slices(), FormatTimestamp(s.window_start()));
  }
  if (s.spec().kind() == bloom::v1::FILTER_KIND_CUCKOO) {
    std::cout << absl::StrFormat(
        "kind:                  cuckoo (items_added: copies held; fill_ratio: load factor)\n");
    for (const bloom::v1::SubFilterStats& table : s.sub_filter_stats()) {
      std::cout << absl::StrFormat(
          "  table:               %d buckets of 4, %d-bit fingerprints, load %.4f\n",
          table.buckets(), table.fingerprint_bits(), table.fill_ratio());
    }
  }
  if (s.has_expires_at()) {
    std::cout << absl::StrFormat(
        "expires_at:            %s unless used (idle_ttl %s)\n", FormatTimestamp(s.expires_at()),
        absl::FormatDuration(absl::Seconds(s.spec().idle_ttl().seconds())));
  }
}

}  // namespace bloomcli

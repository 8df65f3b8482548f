#include "storage/format/filter_records.h"

#include <utility>
#include <vector>

#include "rocksdb/db.h"
#include "storage/db/rocksdb_status.h"
#include "storage/filter/filter_kind.h"

namespace storage {

absl::StatusOr<absl::optional<StoredRecord>> ReadFilterRecord(const Database& db,
                                                              absl::string_view name) {
  std::string value;
  const rocksdb::Status got = db.db()->Get(rocksdb::ReadOptions(), db.filters(),
                                           rocksdb::Slice(name.data(), name.size()), &value);
  if (got.IsNotFound()) return absl::nullopt;
  if (absl::Status read = FromRocksDb(got, "looking up a filter"); !read.ok()) return read;
  return StoredRecord{DecodeFilterRecord(value)};
}

FilterInfo InfoFromRecord(std::string name, const FilterRecord& record, absl::Time now) {
  FilterInfo info;
  info.name = std::move(name);
  info.spec = record.spec;
  info.created_at = absl::FromUnixMicros(record.created_at_micros);
  info.expires_at = IdleExpiry(record.spec, record.last_used_micros);
  info.checks = record.checks;
  info.check_hits = record.check_hits;
  if (record.spec.windowed()) info.window_start = now - record.spec.window;
  info.stats = FilterKind::Of(record.spec).ExpectedStats(record, now);
  return info;
}

absl::optional<absl::Time> IdleExpiry(absl::Duration idle_ttl, int64_t last_used_micros) {
  if (idle_ttl == absl::ZeroDuration()) return absl::nullopt;
  return absl::FromUnixMicros(last_used_micros) + idle_ttl;
}

bool RecordIdleExpired(const FilterRecord& record, absl::Time now) {
  const absl::optional<absl::Time> at = IdleExpiry(record.spec, record.last_used_micros);
  return at.has_value() && *at <= now;
}

}  // namespace storage

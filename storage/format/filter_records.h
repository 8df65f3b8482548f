// A filter's metadata record (encoding.h's FilterRecord) as the store reads it: looked up by
// name and decoded, and what can be told from it without building the filter (its Stats, its
// idle expiry).
//
//   ASSIGN_OR_RETURN(absl::optional<StoredRecord> found, ReadFilterRecord(db, "users"));
//   if (!found.has_value()) return NotFound();
//   if (!found->record.ok()) MarkUnreadable(found->record.status());  // DATA_LOSS
//
// Every reader of one record by name goes through ReadFilterRecord: loading a cold filter,
// deleting one, and the idle sweep. Scans (start-up, List, the sweep's pass over the column
// family) decode each value they meet with DecodeFilterRecord.
//
// Thread-safety: pure functions, and reads of RocksDB (which is thread-safe).
#ifndef STORAGE_FORMAT_FILTER_RECORDS_H_
#define STORAGE_FORMAT_FILTER_RECORDS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "bloom/scalable_filter.h"
#include "storage/db/database.h"
#include "storage/format/encoding.h"

namespace storage {

// What Stats reports about a filter.
struct FilterInfo {
  std::string name;
  bloom::FilterParams spec;  // normalized
  absl::Time created_at;
  bloom::ScalableFilterStats stats;
  uint64_t checks = 0;      // MightContain items checked
  uint64_t check_hits = 0;  // ... of which answered "maybe present"
  // Windowed filters: the oldest instant whose adds still read present (now - window).
  absl::optional<absl::Time> window_start;
  // Filters with an idle_ttl: when the filter is deleted if nobody uses it until then.
  absl::optional<absl::Time> expires_at;
};

// A record found under a name: decoded, or the decoding's DATA_LOSS (the stored bytes are
// unreadable; the name exists and can be deleted).
struct StoredRecord {
  absl::StatusOr<FilterRecord> record;
};

// The record of `name`: nullopt if there is none; the read's error (UNAVAILABLE, ...) if
// RocksDB could not be read.
absl::StatusOr<absl::optional<StoredRecord>> ReadFilterRecord(const Database& db,
                                                              absl::string_view name);

// What Stats reports about a filter that is not in memory, from its metadata record alone:
// counts as of its last checkpoint (all of them for an evicted filter), and fill and error
// rate expected from those counts (bloom::ExpectedSubFilterStats) rather than counted;
// slices expired at `now` left out.
FilterInfo InfoFromRecord(std::string name, const FilterRecord& record, absl::Time now);

// When a filter with an idle_ttl is deleted if unused (its last use + idle_ttl); nullopt for a
// filter without one.
absl::optional<absl::Time> IdleExpiry(absl::Duration idle_ttl, int64_t last_used_micros);
inline absl::optional<absl::Time> IdleExpiry(const bloom::FilterParams& spec,
                                             int64_t last_used_micros) {
  return IdleExpiry(spec.idle_ttl, last_used_micros);
}
// Whether the filter `record` describes is past its idle_ttl at `now`.
bool RecordIdleExpired(const FilterRecord& record, absl::Time now);

}  // namespace storage

#endif  // STORAGE_FORMAT_FILTER_RECORDS_H_

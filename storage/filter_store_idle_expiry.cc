// Idle expiry: a filter with an idle_ttl is deleted once nobody added to or checked it for
// that long (the same effect as Delete: the name is free at once).
//
// The answers are exact without waiting for a sweep: every lookup by name (Acquire) and every
// List checks the filter's expiry against the store's clock and treats an expired filter as
// deleted, deleting it on the spot under the name's lock. The sweeper only gives the space
// back, at a bounded cost per checkpointer pass (about a second): resident filters are checked
// by the pass that already visits them, and cold ones from their metadata records without
// loading them, kColdSweepRecords records per pass from where the previous pass stopped.
//
// Last use is kept to the second in memory (StoredFilter::TouchIdle, on Add and MightContain)
// and persisted by checkpoints: reads never become writes of their own.
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "storage/db/rocksdb_status.h"
#include "storage/filter_store.h"

namespace storage {
namespace {

// Metadata records the cold sweep reads per pass: 10 million filters in about 17 minutes.
constexpr int kColdSweepRecords = 10'000;

// Whether an encoded record may carry an idle_ttl (version 2) without decoding it: "BLMF" and a
// little-endian u16 version.
bool MayHaveIdleTtl(absl::string_view value) {
  return value.size() > 6 && static_cast<uint8_t>(value[4]) == 2 && value[5] == 0;
}

}  // namespace

bool FilterStore::IdleExpired(const StoredFilter& filter, absl::Time now) const {
  // A replica serves a filter until the primary's deletion of it arrives: expiry is the
  // primary's decision, by the primary's clock.
  if (options_.replica) return false;
  const absl::optional<absl::Time> at = filter.IdleExpiresAt();
  return at.has_value() && *at <= now && filter.Usable().ok();
}

absl::Status FilterStore::ExpireLocked(const std::shared_ptr<StoredFilter>& filter) {
  RETURN_IF_ERROR(filter->Delete(options_.sync));
  Remove(filter->name());
  filters_expired_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<bool> FilterStore::ExpireColdIfIdle(absl::string_view name,
                                                   const FilterRecord& record) {
  if (options_.replica || !RecordIdleExpired(record, options_.clock->Now())) return false;
  StoredFilter cold(static_cast<std::string>(name), absl::OkStatus(), &context_, record.generation);
  RETURN_IF_ERROR(cold.Delete(options_.sync));
  residency_.cold_filters.fetch_sub(1, std::memory_order_relaxed);
  filters_expired_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void FilterStore::SweepIdleResident(const std::shared_ptr<StoredFilter>& filter) {
  if (!filter->has_idle_ttl() || filter->evicted() ||
      !IdleExpired(*filter, options_.clock->Now())) {
    return;
  }
  bloomsync::MutexLock name_lock(&NameLock(filter->name()));
  if (Find(filter->name()) != filter || !IdleExpired(*filter, options_.clock->Now())) return;
  if (absl::Status s = ExpireLocked(filter); !s.ok()) {
    bloomlog::LogError(absl::StrCat("deleting idle filter '", filter->name(),
                                    "' failed (will retry): ", s.message()));
  }
}

void FilterStore::SweepIdleCold() {
  if (!MayHaveCold()) return;
  std::vector<std::string> expired;
  {
    std::unique_ptr<rocksdb::Iterator> it = db_->Scan(db_->filters());
    it->Seek(cold_sweep_cursor_);
    int read = 0;
    const absl::Time now = options_.clock->Now();
    for (; it->Valid() && read < kColdSweepRecords; it->Next(), ++read) {
      const absl::string_view value(it->value().data(), it->value().size());
      if (!MayHaveIdleTtl(value)) continue;
      absl::StatusOr<FilterRecord> record = DecodeFilterRecord(value);
      if (record.ok() && RecordIdleExpired(*record, now)) {
        expired.emplace_back(it->key().data(), it->key().size());
      }
    }
    cold_sweep_cursor_ = it->Valid() ? it->key().ToString() : std::string();
    if (!it->status().ok()) cold_sweep_cursor_.clear();
  }
  for (const std::string& name : expired) {
    bloomsync::MutexLock name_lock(&NameLock(name));
    if (Find(name) != nullptr) continue;  // resident: its own check decides
    // Deleted meanwhile, a read error, or unreadable: the next sweep looks again.
    absl::StatusOr<absl::optional<StoredRecord>> found = ReadFilterRecord(*db_, name);
    if (!found.ok() || !found->has_value() || !(*found)->record.ok()) continue;
    absl::StatusOr<bool> gone = ExpireColdIfIdle(name, *(*found)->record);
    if (!gone.ok()) {
      bloomlog::LogError(absl::StrCat("deleting idle filter '", name,
                                      "' failed (will retry): ", gone.status().message()));
    }
  }
}

}  // namespace storage

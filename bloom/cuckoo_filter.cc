// CuckooFilter (cuckoo_filter.h): the chain of cuckoo tables, its growth and its all-or-nothing
// adds.
#include "bloom/cuckoo_filter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "bloom/hash.h"

namespace bloom {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

}  // namespace

absl::StatusOr<std::unique_ptr<CuckooFilter>> CuckooFilter::CreateEmpty(const FilterParams& spec,
                                                                        uint64_t seed) {
  if (spec.windowed()) {
    return absl::InvalidArgumentError(
        "a cuckoo filter has no window: items leave it by Remove (or the whole filter by "
        "idle_ttl)");
  }
  std::unique_ptr<CuckooFilter> filter(new CuckooFilter(spec, seed));
  // Table 0 must exist: the spec's own error rate and capacity must be reachable.
  if (absl::StatusOr<CuckooLayout> first = filter->LayoutOf(0); !first.ok()) {
    return first.status();
  }
  return filter;
}

absl::StatusOr<std::unique_ptr<CuckooFilter>> CuckooFilter::Create(const FilterParams& spec,
                                                                   uint64_t seed) {
  absl::StatusOr<std::unique_ptr<CuckooFilter>> filter = CreateEmpty(spec, seed);
  if (!filter.ok()) return filter.status();
  bloomsync::MutexLock lock(&(*filter)->mu_);
  if (absl::Status grown = (*filter)->GrowLocked(); !grown.ok()) return grown;
  return filter;
}

absl::StatusOr<CuckooFilter::TableShape> CuckooFilter::ShapeOf(int index) const {
  absl::StatusOr<ChainTarget> target = ChainTargetFor(spec_, index);
  if (!target.ok()) return target.status();
  absl::StatusOr<CuckooLayout> layout = ChooseCuckooLayout(target->capacity, target->error_rate);
  if (!layout.ok()) return layout.status();
  return TableShape{*target, *layout};
}

absl::StatusOr<CuckooLayout> CuckooFilter::LayoutOf(int index) const {
  absl::StatusOr<TableShape> shape = ShapeOf(index);
  if (!shape.ok()) return shape.status();
  return shape->layout;
}

uint64_t CuckooFilter::KeyOf(int index) const {
  return Mix(seed_ ^ Mix(static_cast<uint64_t>(index) + 1));
}

uint64_t CuckooFilter::TableHash(uint64_t item_hash, int index) {
  return index == 0 ? item_hash : Mix(item_hash + static_cast<uint64_t>(index) * kGolden);
}

absl::Status CuckooFilter::GrowLocked() {
  const int index = static_cast<int>(tables_.size());
  absl::StatusOr<TableShape> shape = ShapeOf(index);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<std::unique_ptr<CuckooTable>> table =
      CuckooTable::Create(shape->layout, KeyOf(index));
  if (!table.ok()) return table.status();
  tables_.push_back(*std::move(table));
  targets_.push_back(shape->target);
  return absl::OkStatus();
}

absl::Status CuckooFilter::AppendTable(std::unique_ptr<CuckooTable> table) {
  bloomsync::MutexLock lock(&mu_);
  const int index = static_cast<int>(tables_.size());
  absl::StatusOr<TableShape> shape = ShapeOf(index);
  if (!shape.ok()) return shape.status();
  const CuckooLayout& layout = shape->layout;
  if (!(table->layout() == layout) || table->key() != KeyOf(index)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuckoo table ", index, " has ", table->layout().num_buckets, " buckets of ",
        table->layout().fingerprint_bits, "-bit fingerprints; its filter's spec gives ",
        layout.num_buckets, " of ", layout.fingerprint_bits, " bits"));
  }
  tables_.push_back(std::move(table));
  targets_.push_back(shape->target);
  return absl::OkStatus();
}

bool CuckooFilter::InsertLocked(uint64_t item_hash) {
  const int newest = static_cast<int>(tables_.size()) - 1;
  CuckooTable& table = *tables_[newest];
  if (table.occupied() >= targets_[newest].capacity) return false;
  return table.Insert(table.ProbeFor(TableHash(item_hash, newest)));
}

absl::Status CuckooFilter::Add(absl::Span<const absl::string_view> items) {
  bloomsync::MutexLock lock(&mu_);
  const size_t tables_before = tables_.size();
  // (table, item hash) of each copy added so far, to take them out again if one does not fit.
  std::vector<std::pair<int, uint64_t>> added;
  added.reserve(items.size());
  absl::Status status;
  for (absl::string_view item : items) {
    const uint64_t hash = HashItem(item, seed_);
    if (!InsertLocked(hash)) {
      status = GrowLocked();
      if (status.ok() && !InsertLocked(hash)) {
        // A new table's first insert always finds an empty bucket.
        status = absl::InternalError("a new cuckoo table refused its first item");
      }
      if (!status.ok()) break;
    }
    added.emplace_back(static_cast<int>(tables_.size()) - 1, hash);
  }
  if (status.ok()) return status;
  for (size_t i = added.size(); i-- > 0;) {  // newest first: the reverse of the walks
    const auto [index, hash] = added[i];
    CuckooTable& table = *tables_[index];
    table.Remove(table.ProbeFor(TableHash(hash, index)));
  }
  tables_.resize(tables_before);
  targets_.resize(tables_before);
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    return absl::ResourceExhaustedError(absl::StrCat("the cuckoo filter is full (",
                                                     status.message(),
                                                     "); none of the batch's items were added"));
  }
  return status;
}

std::vector<bool> CuckooFilter::MightContain(absl::Span<const absl::string_view> items) const {
  std::vector<bool> present(items.size(), false);
  bloomsync::ReaderMutexLock lock(&mu_);
  for (size_t i = 0; i < items.size(); ++i) {
    const uint64_t hash = HashItem(items[i], seed_);
    for (size_t t = 0; t < tables_.size() && !present[i]; ++t) {
      const CuckooTable& table = *tables_[t];
      present[i] = table.Contains(table.ProbeFor(TableHash(hash, static_cast<int>(t))));
    }
  }
  return present;
}

std::vector<uint32_t> CuckooFilter::Count(absl::Span<const absl::string_view> items) const {
  std::vector<uint32_t> counts(items.size(), 0);
  bloomsync::ReaderMutexLock lock(&mu_);
  for (size_t i = 0; i < items.size(); ++i) {
    const uint64_t hash = HashItem(items[i], seed_);
    for (size_t t = 0; t < tables_.size(); ++t) {
      const CuckooTable& table = *tables_[t];
      counts[i] += table.Count(table.ProbeFor(TableHash(hash, static_cast<int>(t))));
    }
  }
  return counts;
}

std::vector<bool> CuckooFilter::Remove(absl::Span<const absl::string_view> items) {
  std::vector<bool> removed(items.size(), false);
  bloomsync::MutexLock lock(&mu_);
  for (size_t i = 0; i < items.size(); ++i) {
    const uint64_t hash = HashItem(items[i], seed_);
    for (int t = static_cast<int>(tables_.size()) - 1; t >= 0 && !removed[i]; --t) {
      CuckooTable& table = *tables_[t];
      removed[i] = table.Remove(table.ProbeFor(TableHash(hash, t)));
    }
  }
  return removed;
}

CuckooFilterStats CuckooFilter::Stats() const {
  CuckooFilterStats stats;
  double all_pass = 1;
  uint64_t slots = 0;
  bloomsync::ReaderMutexLock lock(&mu_);
  for (size_t t = 0; t < tables_.size(); ++t) {
    const CuckooTable& table = *tables_[t];
    CuckooTableStats one;
    one.capacity = targets_[t].capacity;
    one.error_rate = targets_[t].error_rate;
    one.buckets = table.layout().num_buckets;
    one.fingerprint_bits = table.layout().fingerprint_bits;
    one.items = table.occupied();
    one.load_factor = table.load();
    one.estimated_error_rate = CuckooFalsePositiveRate(one.load_factor, one.fingerprint_bits);
    stats.capacity += one.capacity;
    stats.size_bytes += table.layout().bytes();
    stats.items += one.items;
    stats.buckets += one.buckets;
    slots += table.layout().slots();
    all_pass *= 1 - one.estimated_error_rate;
    stats.tables.push_back(one);
  }
  stats.load_factor = slots == 0 ? 0 : static_cast<double>(stats.items) / slots;
  stats.estimated_error_rate = 1 - all_pass;
  return stats;
}

int CuckooFilter::num_tables() const {
  bloomsync::ReaderMutexLock lock(&mu_);
  return static_cast<int>(tables_.size());
}

void CuckooFilter::ForEachTable(absl::FunctionRef<void(int, const CuckooTable&)> visit) const {
  bloomsync::ReaderMutexLock lock(&mu_);
  for (size_t t = 0; t < tables_.size(); ++t) visit(static_cast<int>(t), *tables_[t]);
}

std::vector<std::pair<int, uint64_t>> CuckooFilter::TakeDirtyPages() {
  std::vector<std::pair<int, uint64_t>> pages;
  bloomsync::MutexLock lock(&mu_);
  for (size_t t = 0; t < tables_.size(); ++t) {
    for (uint64_t page : tables_[t]->TakeDirtyPages()) {
      pages.emplace_back(static_cast<int>(t), page);
    }
  }
  return pages;
}

}  // namespace bloom

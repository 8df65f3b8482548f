// CuckooFilter (cuckoo_filter.h): the chain of cuckoo tables, its growth and its all-or-nothing
// adds.
#include "bloom/cuckoo_filter.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bloom/hash.h"

namespace bloom {

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
  return index == 0 ? item_hash : Mix(item_hash + static_cast<uint64_t>(index) * kGoldenGamma);
}

const uint64_t* CuckooFilter::TableHashes(absl::Span<const uint64_t> item_hashes, int index,
                                          std::vector<uint64_t>& remixed) {
  if (index == 0) return item_hashes.data();
  remixed.resize(item_hashes.size());
  for (size_t i = 0; i < item_hashes.size(); ++i) remixed[i] = TableHash(item_hashes[i], index);
  return remixed.data();
}

absl::Status CuckooFilter::GrowLocked() {
  const int index = static_cast<int>(tables_.size());
  absl::StatusOr<TableShape> shape = ShapeOf(index);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<std::unique_ptr<CuckooTable>> table =
      CuckooTable::Create(shape->layout, KeyOf(index));
  if (!table.ok()) return table.status();
  (*table)->RecordChanges(recording_, static_cast<uint32_t>(index));
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
  return Add(items, [](absl::Span<const CuckooChange>, int, int) { return absl::OkStatus(); });
}

void CuckooFilter::RecordLocked(CuckooChangeLog* changes) {
  recording_ = changes;
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables_[t]->RecordChanges(changes, static_cast<uint32_t>(t));
  }
}

void CuckooFilter::UndoLocked(absl::Span<const CuckooChange> changes, size_t tables_before) {
  for (size_t i = changes.size(); i-- > 0;) {  // newest first
    // Cannot fail: each change was made at a position of its table.
    tables_[changes[i].table]->Apply(changes[i], /*undo=*/true).IgnoreError();
  }
  tables_.resize(tables_before);
  targets_.resize(tables_before);
}

namespace {

// A thread's change log, reused from one add or remove to the next, so a batch's changes are
// written into memory that is already mapped and cached: a fresh log for each batch of adds
// (32 bytes a change, 200 KB for 5,000 adds) would cost page faults and cache misses. A nested
// use (there is none) would get a log of its own. A log grown past kKeptBytes is let go: what a
// thread keeps is not charged to the memory budget, so it stays small (batches of up to about
// 8,000 adds reuse it).
class ChangeList {
 public:
  ChangeList() : nested_(Shared().in_use) {
    Shared().in_use = true;
    Log().Clear();
  }
  ~ChangeList() {
    if (nested_) return;
    Shared().in_use = false;
    if (Shared().changes.capacity_bytes() > kKeptBytes) Shared().changes = CuckooChangeLog();
  }
  ChangeList(const ChangeList&) = delete;
  ChangeList& operator=(const ChangeList&) = delete;

  CuckooChangeLog& Log() { return nested_ ? own_ : Shared().changes; }

 private:
  static constexpr size_t kKeptBytes = 320 << 10;
  struct ThreadList {
    CuckooChangeLog changes;
    bool in_use = false;
  };
  static ThreadList& Shared() {
    thread_local ThreadList shared;
    return shared;
  }

  const bool nested_;
  CuckooChangeLog own_;
};

absl::Span<const CuckooChange> Changes(const CuckooChangeLog& log) {
  return {log.data(), log.size()};
}

std::vector<uint64_t> HashAll(absl::Span<const absl::string_view> items, uint64_t seed) {
  std::vector<uint64_t> hashes(items.size());
  for (size_t i = 0; i < items.size(); ++i) hashes[i] = HashItem(items[i], seed);
  return hashes;
}

}  // namespace

uint64_t CuckooFilter::Hash(absl::string_view item) const { return HashItem(item, seed_); }

absl::Status CuckooFilter::Add(absl::Span<const absl::string_view> items, Persist persist) {
  return AddHashes(HashAll(items, seed_), persist);
}

absl::Status CuckooFilter::AddHashes(absl::Span<const uint64_t> hashes, Persist persist) {
  bloomsync::MutexLock lock(&mu_);
  const size_t tables_before = tables_.size();
  ChangeList list;
  CuckooChangeLog& changes = list.Log();
  changes.Reserve(hashes.size() + hashes.size() / 4);  // most inserts write one slot
  RecordLocked(&changes);
  absl::Status status;
  std::vector<uint64_t> remixed;  // the items' hashes in a table after the first
  for (size_t done = 0; done < hashes.size();) {
    // The newest table takes what it can; when it refuses an item (full, or at its target
    // capacity), the chain grows and the next table goes on from that item.
    const int newest = static_cast<int>(tables_.size()) - 1;
    const size_t left = hashes.size() - done;
    const size_t inserted = tables_[newest]->InsertMany(
        TableHashes(hashes.subspan(done), newest, remixed), left, targets_[newest].capacity);
    done += inserted;
    if (done == hashes.size()) break;
    status = GrowLocked();
    if (!status.ok()) break;
    if (!InsertLocked(hashes[done])) {
      // A new table's first insert always finds an empty bucket.
      status = absl::InternalError("a new cuckoo table refused its first item");
      break;
    }
    ++done;
  }
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    status =
        absl::ResourceExhaustedError(absl::StrCat("the cuckoo filter is full (", status.message(),
                                                  "); none of the batch's items were added"));
  }
  if (status.ok() && !changes.empty()) {
    status = persist(Changes(changes), static_cast<int>(tables_before),
                     static_cast<int>(tables_.size()));
  }
  RecordLocked(nullptr);
  if (!status.ok()) UndoLocked(Changes(changes), tables_before);
  return status;
}

std::vector<bool> CuckooFilter::MightContain(absl::Span<const absl::string_view> items) const {
  const std::vector<uint64_t> hashes = HashAll(items, seed_);
  std::unique_ptr<bool[]> present(new bool[hashes.size()]);
  MightContainHashes(hashes, present.get());
  // Not `return {first, last}`: braces would make a vector of those two pointers as bools.
  std::vector<bool> answers(present.get(), present.get() + hashes.size());
  return answers;
}

void CuckooFilter::MightContainHashes(absl::Span<const uint64_t> hashes, bool* present) const {
  std::fill(present, present + hashes.size(), false);
  std::vector<uint64_t> remixed;  // the items' hashes in tables after the first
  bloomsync::ReaderMutexLock lock(&mu_);
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables_[t]->ContainsMany(TableHashes(hashes, static_cast<int>(t), remixed), hashes.size(),
                             present);
  }
}

std::vector<uint32_t> CuckooFilter::Count(absl::Span<const absl::string_view> items) const {
  return CountHashes(HashAll(items, seed_));
}

std::vector<uint32_t> CuckooFilter::CountHashes(absl::Span<const uint64_t> hashes) const {
  std::vector<uint32_t> counts(hashes.size(), 0);
  std::vector<uint64_t> remixed;  // the items' hashes in tables after the first
  bloomsync::ReaderMutexLock lock(&mu_);
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables_[t]->CountMany(TableHashes(hashes, static_cast<int>(t), remixed), hashes.size(),
                          counts.data());
  }
  return counts;
}

std::vector<bool> CuckooFilter::Remove(absl::Span<const absl::string_view> items) {
  // Cannot fail: nothing to persist.
  return *Remove(items, [](absl::Span<const CuckooChange>, int, int) { return absl::OkStatus(); });
}

absl::StatusOr<std::vector<bool>> CuckooFilter::Remove(absl::Span<const absl::string_view> items,
                                                       Persist persist) {
  return RemoveHashes(HashAll(items, seed_), persist);
}

absl::StatusOr<std::vector<bool>> CuckooFilter::RemoveHashes(absl::Span<const uint64_t> hashes,
                                                             Persist persist) {
  std::unique_ptr<bool[]> removed(new bool[hashes.size()]());
  bloomsync::MutexLock lock(&mu_);
  const size_t tables = tables_.size();
  ChangeList list;
  CuckooChangeLog& changes = list.Log();
  RecordLocked(&changes);
  // Each item loses a copy from the newest table that holds one: the newest table first for the
  // whole batch, then the older ones for the items not yet removed (the same outcome as trying
  // each item's tables in turn, with the batch's cache misses overlapped).
  std::vector<uint64_t> remixed;
  for (int t = static_cast<int>(tables) - 1; t >= 0; --t) {
    tables_[t]->RemoveMany(TableHashes(hashes, t, remixed), hashes.size(), removed.get());
  }
  absl::Status status;
  if (!changes.empty()) {
    status = persist(Changes(changes), static_cast<int>(tables), static_cast<int>(tables));
  }
  RecordLocked(nullptr);
  if (!status.ok()) {
    UndoLocked(Changes(changes), tables);
    return status;
  }
  return std::vector<bool>(removed.get(), removed.get() + hashes.size());
}

absl::Status CuckooFilter::Replay(absl::Span<const CuckooChange> changes) {
  bloomsync::MutexLock lock(&mu_);
  for (const CuckooChange& change : changes) {
    if (change.table >= tables_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("a change names cuckoo table ", change.table,
                                                     " of a chain of ", tables_.size()));
    }
    if (absl::Status applied = tables_[change.table]->Apply(change); !applied.ok()) return applied;
  }
  return absl::OkStatus();
}

absl::Status CuckooFilter::ReplayPersisted(absl::Span<const CuckooChange> changes,
                                           Persist persist) {
  bloomsync::MutexLock lock(&mu_);
  for (const CuckooChange& change : changes) {
    absl::Status fits =
        change.table < tables_.size()
            ? tables_[change.table]->CheckFits(change)
            : absl::InvalidArgumentError(absl::StrCat("a change names cuckoo table ", change.table,
                                                      " of a chain of ", tables_.size()));
    if (!fits.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the copy does not match its original (", fits.message(), ")"));
    }
  }
  const int tables = static_cast<int>(tables_.size());
  if (absl::Status persisted = persist(changes, tables, tables); !persisted.ok()) {
    return persisted;
  }
  for (const CuckooChange& change : changes) {
    // Cannot fail: checked above, under the same lock.
    tables_[change.table]->Apply(change).IgnoreError();
  }
  return absl::OkStatus();
}

CuckooTableStats ExpectedCuckooTableStats(const ChainTarget& target, const CuckooLayout& layout,
                                          uint64_t items) {
  CuckooTableStats one;
  one.capacity = target.capacity;
  one.error_rate = target.error_rate;
  one.buckets = layout.num_buckets;
  one.fingerprint_bits = layout.fingerprint_bits;
  one.items = items;
  one.load_factor = static_cast<double>(items) / static_cast<double>(layout.slots());
  one.estimated_error_rate = CuckooFalsePositiveRate(one.load_factor, one.fingerprint_bits);
  return one;
}

CuckooFilterStats CombineCuckooTableStats(std::vector<CuckooTableStats> tables) {
  CuckooFilterStats stats;
  double all_pass = 1;
  uint64_t slots = 0;
  for (const CuckooTableStats& one : tables) {
    const CuckooLayout layout{one.buckets, one.fingerprint_bits};
    stats.capacity += one.capacity;
    stats.size_bytes += layout.bytes();
    stats.items += one.items;
    stats.buckets += one.buckets;
    slots += layout.slots();
    all_pass *= 1 - one.estimated_error_rate;
  }
  stats.load_factor = slots == 0 ? 0 : static_cast<double>(stats.items) / slots;
  stats.estimated_error_rate = 1 - all_pass;
  stats.tables = std::move(tables);
  return stats;
}

ScalableFilterStats AsFilterStats(const CuckooFilterStats& stats) {
  ScalableFilterStats out;
  out.capacity = stats.capacity;
  out.size_bytes = stats.size_bytes;
  out.items_added = stats.items;
  out.estimated_cardinality = static_cast<double>(stats.items);
  out.fill_ratio = stats.load_factor;
  out.estimated_error_rate = stats.estimated_error_rate;
  for (const CuckooTableStats& one : stats.tables) {
    SubFilterStats sub;
    sub.capacity = one.capacity;
    sub.error_rate = one.error_rate;
    sub.bits = CuckooLayout{one.buckets, one.fingerprint_bits}.slots() * one.fingerprint_bits;
    sub.items_added = one.items;
    sub.fill_ratio = one.load_factor;
    sub.estimated_cardinality = static_cast<double>(one.items);
    sub.estimated_error_rate = one.estimated_error_rate;
    sub.buckets = one.buckets;
    sub.fingerprint_bits = one.fingerprint_bits;
    out.sub_filters.push_back(sub);
  }
  return out;
}

CuckooFilterStats CuckooFilter::Stats() const {
  std::vector<CuckooTableStats> tables;
  bloomsync::ReaderMutexLock lock(&mu_);
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables.push_back(
        ExpectedCuckooTableStats(targets_[t], tables_[t]->layout(), tables_[t]->occupied()));
  }
  return CombineCuckooTableStats(std::move(tables));
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

void CuckooFilter::MarkPageDirty(int table, uint64_t page) {
  bloomsync::MutexLock lock(&mu_);
  if (table >= 0 && static_cast<size_t>(table) < tables_.size()) {
    tables_[table]->MarkPageDirty(page);
  }
}

absl::StatusOr<std::unique_ptr<CuckooFilter>> CuckooFilter::Clone() const {
  std::unique_ptr<CuckooFilter> copy(new CuckooFilter(spec_, seed_));
  bloomsync::ReaderMutexLock lock(&mu_);
  bloomsync::MutexLock copy_lock(&copy->mu_);
  for (const std::unique_ptr<CuckooTable>& original : tables_) {
    const CuckooTable& table = *original;
    absl::StatusOr<std::unique_ptr<CuckooTable>> copied =
        CuckooTable::Create(table.layout(), table.key());
    if (!copied.ok()) return copied.status();
    for (uint64_t page = 0; page < table.num_pages(); ++page) {
      // Cannot fail: the same layout, so the same page sizes.
      (*copied)->LoadPage(page, table.ReadPage(page)).IgnoreError();
    }
    copy->tables_.push_back(*std::move(copied));
  }
  copy->targets_ = targets_;
  return copy;
}

void CuckooFilter::MarkAllPagesDirty() {
  bloomsync::MutexLock lock(&mu_);
  for (const std::unique_ptr<CuckooTable>& table : tables_) {
    for (uint64_t page = 0; page < table->num_pages(); ++page) table->MarkPageDirty(page);
  }
}

uint64_t CuckooFilter::NumPages(int index) const {
  bloomsync::ReaderMutexLock lock(&mu_);
  if (index < 0 || static_cast<size_t>(index) >= tables_.size()) return 0;
  return tables_[index]->num_pages();
}

absl::Status CuckooFilter::LoadPage(int table, uint64_t page, absl::string_view data) {
  bloomsync::MutexLock lock(&mu_);
  if (table < 0 || static_cast<size_t>(table) >= tables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a page of cuckoo table ", table, " of a chain of ", tables_.size()));
  }
  return tables_[table]->LoadPage(page, data);
}

std::string CuckooFilter::ReadPage(int table, uint64_t page) const {
  bloomsync::ReaderMutexLock lock(&mu_);
  if (table < 0 || static_cast<size_t>(table) >= tables_.size()) return {};
  return tables_[table]->ReadPage(page);
}

}  // namespace bloom

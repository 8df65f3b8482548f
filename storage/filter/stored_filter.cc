#include "storage/filter/stored_filter.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/write_batch.h"
#include "storage/checkpoint/checkpoint_schedule.h"
#include "storage/format/encoding.h"
#include "storage/format/page_encoding.h"

namespace storage {
namespace {

// Marks EvictedError(): callers retry such an add on the reloaded filter.
constexpr absl::string_view kEvictedPayload = "bloom.evicted";

}  // namespace

absl::StatusOr<std::unique_ptr<bloom::ScalableFilter>> StoredFilter::BuildFilter(
    const FilterRecord& record, const bloomtime::Clock* clock, bool drop_expired) {
  // A windowed record lists its slices oldest first: skip the expired prefix.
  size_t skip = 0;
  if (drop_expired && record.spec.windowed()) {
    const absl::Time now = clock->Now();
    while (skip < record.sub_filters.size() &&
           bloom::SliceExpiry(record.spec, record.sub_filters[skip].slice_start_micros) <= now) {
      ++skip;
    }
  }
  const int first = static_cast<int>(record.first_sub_index + skip);
  std::unique_ptr<bloom::ScalableFilter> filter =
      bloom::ScalableFilter::CreateEmpty(record.spec, record.seed, clock, first);
  bloom::SliceTag slice{0, -1};
  for (size_t i = skip; i < record.sub_filters.size(); ++i) {
    const SubFilterRecord& s = record.sub_filters[i];
    bloom::SubFilterShape shape{s.capacity, s.error_rate, {s.num_blocks, s.hash_count}};
    // A slice is retired whole, so its sub-filters in the record start at its position 0.
    const bool same_slice = slice.position >= 0 && slice.start_micros == s.slice_start_micros;
    slice = {s.slice_start_micros, same_slice ? slice.position + 1 : 0};
    absl::StatusOr<std::unique_ptr<bloom::BlockedBloomFilter>> bits =
        filter->MakeBits(shape.layout, record.spec.windowed() ? slice.position : 0);
    if (!bits.ok()) return bits.status();
    const int index = first + static_cast<int>(i - skip);
    absl::StatusOr<std::unique_ptr<bloom::SubFilter>> sub = bloom::SubFilter::Create(
        index, shape, *std::move(bits),
        record.spec.windowed() ? absl::optional<bloom::SliceTag>(slice) : absl::nullopt);
    if (!sub.ok()) return sub.status();
    (*sub)->set_items_added(s.items_added);
    filter->AppendSubFilter(*std::move(sub));
  }
  return filter;
}

std::shared_ptr<StoredFilter> StoredFilter::Make(absl::string_view name, const FilterRecord& record,
                                                 Built built, const StoreContext* context,
                                                 uint64_t charged_bytes) {
  if (built.cuckoo != nullptr) {
    return std::make_shared<StoredFilter>(name, record, std::move(built.cuckoo), context,
                                          charged_bytes);
  }
  return std::make_shared<StoredFilter>(name, record, std::move(built.chain), context,
                                        charged_bytes);
}

// With its shared_ptr's count (make_shared), 160 bytes: one size class of jemalloc, not the
// next (192). Millions of per-user filters each have one; see the member order.
static_assert(sizeof(StoredFilter) <= 144, "StoredFilter outgrew its 160-byte allocation");

StoredFilter::StoredFilter(absl::string_view name, const FilterRecord& record,
                           std::unique_ptr<bloom::ScalableFilter> filter,
                           const StoreContext* context, uint64_t charged_bytes)
    : name_(name),
      generation_(record.generation),
      created_at_micros_(record.created_at_micros),
      context_(context),
      next_seq_(record.checkpoint_seq + 1),
      checks_(record.checks),
      check_hits_(record.check_hits),
      chain_(filter != nullptr ? std::move(*filter) : bloom::ScalableFilter()),
      charged_units_(static_cast<uint32_t>(charged_bytes / kChargeUnitBytes)),
      last_checkpoint_second_(SecondsSinceEpoch(absl::Now())),
      has_chain_(filter != nullptr) {
  if (has_chain_ && record.spec.idle_ttl != absl::ZeroDuration()) {
    rare_ = std::make_unique<Rare>();
    rare_->idle_ttl_micros = absl::ToInt64Microseconds(record.spec.idle_ttl);
    rare_->last_used_micros.store(record.last_used_micros != 0 ? record.last_used_micros
                                                               : record.created_at_micros);
  }
  bloomsync::MutexLock lock(&meta_mu_);
  flags_.Assign(kRetirePending, has_chain_ && record.first_sub_index !=
                                                  static_cast<uint32_t>(chain_.first_index()));
  absl::InlinedVector<uint64_t, 1> items_added;
  for (const SubFilterRecord& s : record.sub_filters) items_added.push_back(s.items_added);
  checkpointed_.Assign(record.checkpoint_seq, record.first_sub_index, items_added);
}

StoredFilter::StoredFilter(absl::string_view name, absl::Status error, const StoreContext* context,
                           absl::optional<uint64_t> generation)
    : name_(name),
      generation_(generation.value_or(0)),
      created_at_micros_(0),
      context_(context),
      charged_units_(0),
      last_checkpoint_second_(0),
      generation_known_(generation.has_value()) {
  if (!error.ok()) {
    rare_ = std::make_unique<Rare>();
    rare_->load_error = std::move(error);
  }
}

absl::Time StoredFilter::SecondsEpoch() {
  static const absl::Time epoch = absl::Now();
  return epoch;
}

uint32_t StoredFilter::SecondsSinceEpoch(absl::Time t) {
  return static_cast<uint32_t>(std::max<int64_t>(0, absl::ToInt64Seconds(t - SecondsEpoch())));
}

uint64_t StoredFilter::CountJournalBytes(uint64_t bytes) {
  uint32_t count = journal_bytes_.load();
  uint32_t updated;
  do {
    updated = static_cast<uint32_t>(std::min<uint64_t>(count + bytes, kMaxCountedJournalBytes));
  } while (!journal_bytes_.compare_exchange_weak(count, updated));
  return updated;
}

StoredFilter::~StoredFilter() {
  const uint64_t charged = charged_bytes();
  if (charged > 0) budget()->Release(charged);
}

PersistedState StoredFilter::PersistedNow() const {
  PersistedState state;
  state.checkpoint_seq = checkpointed_.seq();
  state.checks = checks_.load();
  state.check_hits = check_hits_.load();
  state.first_index = checkpointed_.first_index();
  state.last_used_micros = LastUsedMicros();
  state.items_added = checkpointed_.items_added();
  return state;
}

absl::Status StoredFilter::Usable() const {
  if (flags_.Has(kDeleted, std::memory_order_acquire)) {
    return absl::NotFoundError(absl::StrCat("filter '", name(), "' not found"));
  }
  return rare_ == nullptr ? absl::OkStatus() : rare_->load_error;
}

void StoredFilter::MarkUnreadable(const absl::Status& error) {
  if (rare_ == nullptr) rare_ = std::make_unique<Rare>();
  if (rare_->load_error.ok()) {
    rare_->load_error = absl::DataLossError(absl::StrCat(
        "filter '", name(), "' is unreadable (delete it to reuse the name): ", error.message()));
  }
}

uint64_t StoredFilter::checkpoint_seq() const {
  bloomsync::MutexLock lock(&meta_mu_);
  return checkpointed_.seq();
}

void StoredFilter::FinishRecovery(uint64_t next_seq, uint64_t replayed_bytes) {
  next_seq_.store(next_seq);
  journal_bytes_.store(static_cast<uint32_t>(std::min<uint64_t>(
      replayed_bytes, kMaxCountedJournalBytes)));  // scheduled when it becomes resident (Watch)
}

void StoredFilter::NotifySchedule() const { context_->schedule->Changed(name()); }

void StoredFilter::ReportIfOverdue() {
  if (context_->schedule == nullptr || flags_.Has(kOverdue)) return;
  if (!JournalOverdue()) return;
  if (!flags_.Set(kOverdue)) context_->schedule->Overdue(name());
}

absl::Status StoredFilter::Addable() const {
  RETURN_IF_ERROR(Usable());
  if (evicted()) return EvictedError();
  return absl::OkStatus();
}

absl::Status StoredFilter::EvictedError() const {
  absl::Status status = absl::UnavailableError(
      absl::StrCat("filter '", name(), "' was evicted from memory during the call; retry it"));
  status.SetPayload(kEvictedPayload, absl::Cord("1"));
  return status;
}

bool StoredFilter::IsEvicted(const absl::Status& status) {
  return absl::IsUnavailable(status) && status.GetPayload(kEvictedPayload).has_value();
}

void StoredFilter::DeferCreation() { flags_.Set(kCreationPending); }

bool StoredFilter::AddPendingCreation(rocksdb::WriteBatch& batch) const {
  if (!flags_.Has(kCreationPending)) return false;
  // The record as FindOrCreate made it, rebuilt from what never changes (generation, seed,
  // spec, creation time, the first sub-filter) rather than kept encoded: ~130 bytes less for
  // every resident filter not yet checkpointed, which is most per-user filters in a cache.
  PersistedState created;
  created.last_used_micros = created_at_micros_;
  FilterRecord record = MakeRecord(created, nullptr);
  if (record.sub_filters.size() > 1) record.sub_filters.resize(1);  // later ones write their own
  // The generation needs no claim of its own: it is below the synced generation ceiling.
  batch.Put(db()->filters(), NameSlice(), EncodeFilterRecord(record));
  return true;
}

absl::Status StoredFilter::EnsurePersisted(bool sync) {
  if (!flags_.Has(kCreationPending)) return absl::OkStatus();
  bloomsync::ReaderMutexLock lock(&apply_mu_);
  if (absl::Status addable = Addable(); !addable.ok()) return addable;
  rocksdb::WriteBatch batch;
  if (!AddPendingCreation(batch)) return absl::OkStatus();
  RETURN_IF_ERROR(db()->Write(batch, sync, "creating a filter"));
  flags_.Clear(kCreationPending);
  return absl::OkStatus();
}

absl::Status StoredFilter::PersistNewSubFilter(const bloom::SubFilter& sub, bool sync) {
  const uint64_t bytes = OwnBitsBytes(sub) + kSubFilterOverheadBytes;
  RETURN_IF_ERROR(CheckResidentCharge(charged_bytes() + bytes, name()));
  if (absl::Status charged = budget()->ChargeCached(
          bytes, charged_bytes(),
          absl::StrCat("growing filter '", name(), "' to ", sub.index() + 1, " sub-filters"));
      !charged.ok()) {
    return charged;
  }
  bloomsync::MutexLock lock(&meta_mu_);
  rocksdb::WriteBatch batch;
  const bool creating = AddPendingCreation(batch);
  // Put again over the creation record: the full record with the new sub-filter.
  batch.Put(db()->filters(), NameSlice(), EncodeFilterRecord(MakeRecord(PersistedNow(), &sub)));
  if (absl::Status written = db()->Write(batch, sync, "persisting a new sub-filter");
      !written.ok()) {
    budget()->Release(bytes);
    return written;
  }
  if (creating) flags_.Clear(kCreationPending);
  charged_units_.fetch_add(static_cast<uint32_t>(bytes / kChargeUnitBytes));
  return absl::OkStatus();
}

absl::Status StoredFilter::PersistJournalRecord(const std::string& record, bool sync) {
  rocksdb::WriteBatch batch;
  const bool creating = AddPendingCreation(batch);
  batch.Put(db()->journal(), JournalKey(generation_, next_seq_.fetch_add(1)), record);
  RETURN_IF_ERROR(db()->Write(batch, sync, "journaling a slot move's catch-up"));
  if (creating) flags_.Clear(kCreationPending);
  CountJournalBytes(record.size());
  return absl::OkStatus();
}

absl::StatusOr<size_t> StoredFilter::CatchUp(absl::Span<const absl::string_view> records,
                                             bool sync) {
  size_t written = 0;
  {
    // Exclusively: no add or checkpoint sees it half done, and no add races a windowed
    // chain's catch-up (ScalableFilter::ReplayMissing).
    bloomsync::WriterMutexLock lock(&apply_mu_);
    RETURN_IF_ERROR(Addable());
    ASSIGN_OR_RETURN(written, kind().CatchUp(*this, records, sync));
  }
  if (journal_bytes_.load() > 0) MarkChanged();
  ReportIfOverdue();
  return written;
}

absl::Status StoredFilter::PrepareGroupAdd(absl::Span<const uint64_t> hashes, bool* added,
                                           bool sync, rocksdb::WriteBatch& batch,
                                           GroupedAdd& grouped) {
  if (absl::Status addable = Addable(); !addable.ok()) return addable;
  if (has_idle_ttl()) TouchIdle(context_->clock->Now());
  ASSIGN_OR_RETURN(grouped.prepared,
                   chain_.PrepareAdd(hashes, added, [&](const bloom::SubFilter& sub) {
                     return PersistNewSubFilter(sub, sync);
                   }));
  if (grouped.exclusive && flags_.Has(kCreationPending) && !grouped.prepared.new_hashes.empty() &&
      PutCreationCheckpoint(grouped, batch)) {
    grouped.creating = grouped.wrote_pages = grouped.needs_write = true;
    return absl::OkStatus();
  }
  // A creation still pending needs the write even when nothing is new (as EnsurePersisted).
  grouped.creating = AddPendingCreation(batch);
  if (!grouped.prepared.new_hashes.empty()) {
    const std::string record =
        EncodeJournalRecord(grouped.prepared.runs, grouped.prepared.new_hashes);
    batch.Put(db()->journal(), JournalKey(generation_, next_seq_.fetch_add(1)), record);
    grouped.journal_bytes = record.size();
  }
  grouped.needs_write = grouped.creating || !grouped.prepared.new_hashes.empty();
  return absl::OkStatus();
}

void StoredFilter::FinishGroupAdd(const GroupedAdd& grouped, bool written) {
  if (!written) {
    chain_.AbortAdd(grouped.prepared);
    return;
  }
  chain_.CommitAdd(grouped.prepared);
  const uint64_t journal = CountJournalBytes(grouped.journal_bytes);
  if (grouped.journal_bytes > 0) MarkChanged();
  if (journal >= kMinJournalBytesForEarlyCheckpoint) ReportIfOverdue();
  if (grouped.wrote_pages) {
    // The pages just written hold these bits, and no other add ran meanwhile (apply_mu_ is
    // held exclusively): nothing is dirty, and the record written is the last checkpoint.
    bloom::BlockedBloomFilter& bits = chain_.first()->bits();
    (void)bits.TakeDirtyPages();
    bloomsync::MutexLock meta(&meta_mu_);
    const uint64_t items_added = chain_.first()->items_added();
    checkpointed_.Assign(checkpointed_.seq(), static_cast<uint32_t>(chain_.first()->index()),
                         {&items_added, 1});
  }
  if (grouped.creating) flags_.Clear(kCreationPending);
}

bool StoredFilter::PutCreationCheckpoint(GroupedAdd& grouped, rocksdb::WriteBatch& batch) const {
  const bloom::ScalableFilter::PreparedAdd& prepared = grouped.prepared;
  const bloom::SubFilter* first = chain_.first();
  if (first == nullptr || first->next() != nullptr || prepared.runs.size() != 1 ||
      prepared.runs[0].sub_filter != first->index()) {
    return false;
  }
  const bloom::BlockedBloomFilter& bits = first->bits();
  const uint64_t bytes = bits.layout().bytes();
  if (bytes > kMaxCreationCheckpointBytes) return false;
  PersistedState state;  // checkpoint_seq 0: no journal record precedes this one
  state.first_index = static_cast<uint32_t>(first->index());
  state.items_added = {first->items_added()};  // the prepared add's reservation included
  state.last_used_micros = LastUsedMicros();
  batch.Put(db()->filters(), NameSlice(), EncodeFilterRecord(MakeRecord(state, nullptr)));
  std::vector<uint64_t> words(bytes / sizeof(uint64_t), 0);
  bits.AddManyTo(prepared.new_hashes, words.data());
  std::string dense;
  std::string page_bytes;
  for (uint64_t page = 0; page < bits.num_pages(); ++page) {
    const uint64_t begin = page * bloom::BlockedBloomFilter::kPageBytes / sizeof(uint64_t);
    const uint64_t end = begin + bits.page_size(page) / sizeof(uint64_t);
    if (std::all_of(words.begin() + begin, words.begin() + end,
                    [](uint64_t w) { return w == 0; })) {
      continue;  // a page never written reads as zeros
    }
    dense.resize((end - begin) * sizeof(uint64_t));
    std::memcpy(dense.data(), words.data() + begin, dense.size());
    EncodePageBytes(dense, page_bytes);
    batch.Put(
        db()->blocks(),
        BlockKey(generation_, static_cast<uint32_t>(first->index()), static_cast<uint32_t>(page)),
        page_bytes);
  }
  return true;
}

absl::Status StoredFilter::MightContain(absl::Span<const uint64_t> hashes, bool* present) {
  if (absl::Status usable = Usable(); !usable.ok()) return usable;
  if (has_idle_ttl()) TouchIdle(context_->clock->Now());
  std::fill(present, present + hashes.size(), false);
  kind().MightContain(*this, hashes, present);
  checks_.fetch_add(hashes.size());
  check_hits_.fetch_add(std::count(present, present + hashes.size(), true));
  if (!flags_.Has(kChecksChanged)) {
    flags_.Set(kChecksChanged);
    MarkChanged();
  }
  return absl::OkStatus();
}

absl::StatusOr<FilterInfo> StoredFilter::Info() const {
  if (absl::Status usable = Usable(); !usable.ok()) return usable;
  FilterInfo info;
  info.name = name_.str();
  info.spec = spec();
  info.created_at = absl::FromUnixMicros(created_at_micros_);
  info.stats = kind().Stats(*this);
  info.checks = checks_.load(std::memory_order_relaxed);
  info.check_hits = check_hits_.load(std::memory_order_relaxed);
  if (info.spec.windowed()) info.window_start = chain_.clock()->Now() - info.spec.window;
  info.expires_at = IdleExpiresAt();
  return info;
}

bloom::FilterParams StoredFilter::spec() const {
  bloom::FilterParams spec = kind().Spec(*this);
  if (has_idle_ttl()) spec.idle_ttl = absl::Microseconds(rare_->idle_ttl_micros);
  return spec;
}

absl::optional<absl::Time> StoredFilter::IdleExpiresAt() const {
  if (!has_idle_ttl()) return absl::nullopt;
  return IdleExpiry(absl::Microseconds(rare_->idle_ttl_micros),
                    rare_->last_used_micros.load(std::memory_order_relaxed));
}

absl::StatusOr<FilterRecord> StoredFilter::SnapshotRecord() const {
  bloomsync::ReaderMutexLock lock(&apply_mu_);  // no slice retires meanwhile
  return LiveRecord();
}

absl::StatusOr<FilterRecord> StoredFilter::PinChain() {
  bloomsync::ReaderMutexLock lock(&apply_mu_);  // orders the pin before or after a retirement
  absl::StatusOr<FilterRecord> record = LiveRecord();
  if (record.ok()) chain_pins_.fetch_add(1);
  return record;
}

absl::StatusOr<FilterRecord> StoredFilter::LiveRecord() const {
  if (absl::Status usable = Usable(); !usable.ok()) return usable;
  if (!kind().mergeable()) {
    return absl::FailedPreconditionError(absl::StrCat("filter '", name(), "' is a ", kind().name(),
                                                      " filter: Merge takes BLOOM filters only"));
  }
  PersistedState live;
  live.checks = checks_.load();
  live.check_hits = check_hits_.load();
  live.first_index = static_cast<uint32_t>(chain_.first_index());
  for (const bloom::SubFilter* sub = chain_.first(); sub != nullptr; sub = sub->next()) {
    live.items_added.push_back(sub->items_added());
  }
  live.last_used_micros = LastUsedMicros();
  return MakeRecord(live, nullptr);
}

FilterRecord StoredFilter::RecordBase(const PersistedState& state) const {
  FilterRecord record;
  record.generation = generation_;
  record.seed = seed();
  record.created_at_micros = created_at_micros_;
  record.spec = spec();
  record.checkpoint_seq = state.checkpoint_seq;
  record.checks = state.checks;
  record.check_hits = state.check_hits;
  record.first_sub_index = state.first_index;
  record.last_used_micros = state.last_used_micros;
  return record;
}

FilterRecord StoredFilter::MakeBloomRecord(const PersistedState& state,
                                           const bloom::SubFilter* extra) const {
  FilterRecord record = RecordBase(state);
  auto append = [&](const bloom::SubFilter& sub) {
    // Sub-filters the state does not cover (retired since, or new) are left out or count 0.
    if (sub.index() < static_cast<int>(state.first_index)) return;
    const size_t i = sub.index() - state.first_index;
    const bloom::SubFilterShape shape = sub.shape();
    if (record.sub_filters.empty()) record.first_sub_index = static_cast<uint32_t>(sub.index());
    record.sub_filters.push_back(
        {shape.capacity, shape.error_rate, shape.layout.num_blocks, shape.layout.hash_count,
         i < state.items_added.size() ? state.items_added[i] : 0, sub.slice().start_micros});
  };
  for (const bloom::SubFilter* sub = chain_.first(); sub != nullptr; sub = sub->next()) {
    append(*sub);
  }
  if (extra != nullptr) append(*extra);
  return record;
}

absl::Status StoredFilter::Delete(bool sync) {
  const WritePacer::Rush rush(context_->pacer);  // a paced checkpoint of this filter hurries
  bloomsync::MutexLock checkpoint_lock(&checkpoint_mu_);
  bloomsync::WriterMutexLock lock(&apply_mu_);
  if (flags_.Has(kDeleted)) return Usable();
  rocksdb::WriteBatch batch;
  batch.Delete(db()->filters(), NameSlice());
  if (generation_known_) {  // an unreadable record's generation is unknown: its data stays
    batch.DeleteRange(db()->blocks(), GenerationPrefix(generation_),
                      GenerationPrefix(generation_ + 1));
    batch.DeleteRange(db()->journal(), GenerationPrefix(generation_),
                      GenerationPrefix(generation_ + 1));
  }
  if (absl::Status written = db()->Write(batch, sync, "deleting a filter"); !written.ok()) {
    return written;
  }
  flags_.Set(kDeleted, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace storage

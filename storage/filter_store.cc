#include "storage/filter_store.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "absl/hash/hash.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "rocksdb/write_batch.h"
#include "storage/db/rocksdb_status.h"
#include "storage/format/encoding.h"

namespace storage {
namespace {

constexpr size_t kMaxNameLength = 255;
constexpr size_t kDefaultPageSize = 100;

// Braces are for hash tags (common/slot.h): "feed:{user42}:seen" shares its slot with every
// name tagged {user42}.
bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '/' || c == '-' || c == '{' || c == '}';
}

std::string DescribeSpec(const bloom::FilterParams& spec) {
  return absl::StrCat("capacity=", spec.capacity, " error_rate=", spec.error_rate,
                      " expansion=", spec.expansion,
                      " non_scaling=", spec.non_scaling ? "true" : "false");
}

// A fresh hash seed per filter, so nobody can precompute items that flood a given filter:
// SplitMix64 over a per-process base from the kernel's entropy and a counter, so seeds are
// unpredictable without the base and distinct per filter. The kernel is asked once per
// process, not per filter: a std::random_device traps into the hypervisor on a VM, which would
// double the cost of creating a small filter.
uint64_t RandomSeed() {
  static const uint64_t base = [] {
    std::random_device entropy;
    return (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  }();
  static std::atomic<uint64_t> counter{0};
  uint64_t z = base + 0x9e3779b97f4a7c15ULL * (counter.fetch_add(1, std::memory_order_relaxed) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

absl::Status ValidateFilterName(absl::string_view name, absl::string_view field) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be 1 to ", kMaxNameLength,
                                                   " characters long, got ", name.size()));
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " may only contain letters, digits and _ . : / - { }; got '",
                       absl::CHexEscape(absl::string_view(&c, 1)), "'"));
    }
  }
  return absl::OkStatus();
}

FilterStore::FilterStore(const StoreOptions& options, std::unique_ptr<Database> db)
    : options_(options),
      db_(std::move(db)),
      budget_(options.memory_limit_bytes),
      creations_(RandomSeed(), kCreationLogCapacity) {}

absl::StatusOr<std::unique_ptr<FilterStore>> FilterStore::Open(const StoreOptions& options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir must be set");
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                   Database::Open(options.data_dir, options.env, options.log_retention));
  auto store = std::unique_ptr<FilterStore>(new FilterStore(options, std::move(db)));
  FilterStore* raw = store.get();
  store->budget_.set_on_over_limit([raw] {
    {
      bloomsync::BlockingLock lock(&raw->residency_.evict_mu);
      raw->residency_.evict_requested = true;
    }
    raw->residency_.evict_cv.NotifyOne();
  });
  if (options.replica) {
    // Filters the primary creates arrive in RocksDB, not in memory: a miss looks there.
    store->residency_.may_have_cold.store(true);
    store->replica_visible_.store(store->LatestSequence());
  } else if (options.min_replica_acks > 0) {
    store->acks_ =
        std::make_unique<ReplicaAcks>(options.min_replica_acks, options.replica_ack_timeout);
  }
  RETURN_IF_ERROR(store->Load());
  if (!options.replica && options.may_acknowledge != nullptr) {
    // Not only calls: checkpoints, evictions and expiry write too (after loading, which may
    // delete orphaned pages before this pod takes any write).
    store->db_->SetWriteGate([raw] { return raw->CheckWritable(); });
  }
  if (options.memory_limit_bytes != 0 && options.background_eviction) {
    store->evictor_ = std::thread([raw] { raw->EvictLoop(); });
  }
  if (options.background_checkpoints && !options.replica) {
    store->checkpointer_ = std::make_unique<Checkpointer>(
        absl::Seconds(1), [raw](absl::Time now) { return raw->RunCheckpointPass(now); });
  }
  if (options.sync) {
    store->wal_syncer_ = std::make_unique<WalSyncer>([raw]() -> absl::Status {
      bloomsync::ReaderMutexLock lifecycle(&raw->lifecycle_mu_);
      RETURN_IF_ERROR(raw->CheckOpen());
      // Every write that finished before the requests of this sync has a sequence number up
      // to this one; if the last sync already covered it, there is nothing to make durable.
      const uint64_t sequence = raw->db_->db()->GetLatestSequenceNumber();
      if (sequence == raw->synced_sequence_) return absl::OkStatus();
      RETURN_IF_ERROR(raw->db_->SyncWal());
      raw->synced_sequence_ = sequence;
      return absl::OkStatus();
    });
  }
  return store;
}

FilterStore::~FilterStore() {
  if (absl::Status closed = Close(); !closed.ok()) {
    bloomlog::LogError(absl::StrCat("closing the filter store: ", closed.message()));
  }
}

absl::Status FilterStore::Close() {
  closing_.store(true, std::memory_order_relaxed);
  pacer_.Stop();  // a paced checkpoint in progress finishes at once
  if (checkpointer_ != nullptr) checkpointer_->Stop();
  {
    bloomsync::BlockingLock lock(&residency_.evict_mu);
    residency_.evict_stop = true;
  }
  residency_.evict_cv.NotifyAll();
  residency_.evicted_cv.NotifyAll();
  if (evictor_.joinable()) evictor_.join();
  // Deferred adds already written are made durable and answered (later ones sync themselves).
  if (wal_syncer_ != nullptr) wal_syncer_->Stop();
  bloomsync::WriterMutexLock lock(&lifecycle_mu_);
  if (closed_.load()) return absl::OkStatus();
  absl::Status result;
  // A replica's RocksDB holds what the primary wrote, and only that; nor does a primary that
  // stopped writing (fenced, or handing over) checkpoint: its journal has every write.
  if (!options_.replica && CheckWritable().ok()) {
    for (const std::shared_ptr<StoredFilter>& filter : registry_.Snapshot()) {
      result.Update(filter->Checkpoint(options_.sync));
    }
  }
  result.Update(db_->Close());
  closed_.store(true);
  return result;
}

absl::Status FilterStore::CheckOpen() const {
  if (closed_.load()) return absl::FailedPreconditionError("the filter store is closed");
  return absl::OkStatus();
}

StoreFigures FilterStore::Figures() const {
  StoreFigures figures;
  figures.memory_used_bytes = budget_.used();
  figures.cold_filters = static_cast<size_t>(std::max<int64_t>(0, residency_.cold_filters.load()));
  figures.evictions = residency_.evictions.load(std::memory_order_relaxed);
  figures.loads = residency_.loads.load(std::memory_order_relaxed);
  figures.load_time = absl::Microseconds(residency_.load_micros.load(std::memory_order_relaxed));
  figures.memory_limit_bytes = budget_.limit();
  figures.orphans_deleted_at_start = load_report_.orphans_deleted;
  figures.checkpoints = checkpoints_.load(std::memory_order_relaxed);
  figures.checkpoint_failures = checkpoint_failures_.load(std::memory_order_relaxed);
  figures.filters_expired = filters_expired_.load(std::memory_order_relaxed);
  figures.slices_retired = slices_retired_.load(std::memory_order_relaxed);
  figures.wal_syncs = wal_syncs();
  figures.wal_sync_requests = wal_sync_requests();
  figures.group_commits = committer_.batches();
  figures.group_commit_jobs = committer_.jobs();
  if (struct statvfs fs{}; statvfs(options_.data_dir.c_str(), &fs) == 0) {
    figures.disk_size_bytes = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
    figures.disk_free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  }
  const absl::Time now = absl::Now();
  const bool moving = !journal_holds_.empty();  // a slot move is reading journals
  const absl::Time holds_now = options_.clock->Now();
  for (const std::shared_ptr<StoredFilter>& filter : registry_.Snapshot()) {
    ++figures.filters;
    ++figures.resident_filters;
    if (const absl::Status usable = filter->Usable(); !usable.ok()) {
      if (usable.code() == absl::StatusCode::kDataLoss) ++figures.unreadable_filters;
      if (usable.code() == absl::StatusCode::kResourceExhausted) ++figures.unloaded_filters;
    }
    if (uint64_t held_after = 0;
        moving && journal_holds_.HeldAfter(filter->generation(), holds_now, &held_after)) {
      ++figures.journal_held_filters;
      const uint64_t last = filter->last_journal_seq();
      if (last > held_after) figures.journal_hold_lag_records += last - held_after;
    }
    const uint64_t pending = filter->journal_bytes();
    if (pending == 0) continue;
    figures.journal_pending_bytes += pending;
    figures.checkpoint_lag = std::max(figures.checkpoint_lag, now - filter->last_checkpoint());
  }
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);  // not while RocksDB is reopened
  if (!closed_.load()) figures.rocksdb = db_->Figures();
  return figures;
}

absl::StatusOr<uint64_t> FilterStore::AllocateGeneration() {
  const uint64_t generation = next_generation_.fetch_add(1);
  if (generation < generation_ceiling_.load()) return generation;
  bloomsync::MutexLock lock(&ceiling_mu_);
  if (generation >= generation_ceiling_.load()) RETURN_IF_ERROR(RaiseCeiling(generation));
  return generation;
}

absl::Status FilterStore::RaiseCeiling(uint64_t generation) {
  // Generations come in blocks: one synced write per kGenerationBlock filters created.
  constexpr uint64_t kGenerationBlock = 4096;
  const uint64_t ceiling = generation + 1 + kGenerationBlock;
  rocksdb::WriteBatch batch;
  batch.Put(static_cast<std::string>(kGenerationCeilingKey), absl::StrCat(ceiling));
  RETURN_IF_ERROR(db_->Write(batch, /*sync=*/true, "reserving filter generations"));
  generation_ceiling_.store(ceiling);
  return absl::OkStatus();
}

absl::Status FilterStore::DeleteRaceError(absl::string_view name) {
  return absl::AbortedError(absl::StrCat("filter '", name,
                                         "' was deleted and created again by other callers "
                                         "throughout this call; retry it"));
}

absl::StatusOr<std::shared_ptr<StoredFilter>> FilterStore::FindOrCreate(
    absl::string_view name, const bloom::FilterParams& spec, bool& created, bool defer_write,
    absl::FunctionRef<void()> before_waiting,
    absl::optional<uint64_t> seed) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  bloomsync::Mutex& name_lock = NameLock(name);
  if (!name_lock.TryLock()) {
    before_waiting();
    name_lock.Lock();
  }
  absl::StatusOr<std::shared_ptr<StoredFilter>> filter =
      FindOrCreateLocked(name, spec, created, defer_write, seed);
  name_lock.Unlock();
  if (filter.ok() && budget_.over_limit()) {
    before_waiting();
    WaitForRoom();
  }
  return filter;
}

absl::StatusOr<std::shared_ptr<StoredFilter>> FilterStore::FindOrCreateLocked(
    absl::string_view name, const bloom::FilterParams& spec, bool& created, bool defer_write,
    absl::optional<uint64_t> seed) {
  created = false;
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> existing, AcquireLocked(name));
  if (existing != nullptr) return existing;

  FilterRecord record;
  const absl::Time now = options_.clock->Now();
  ASSIGN_OR_RETURN(const SubFilterRecord first,
                   FilterKind::Of(spec).NewSubFilterRecord(spec, 0, now));
  record.sub_filters.push_back(first);
  ASSIGN_OR_RETURN(record.generation, AllocateGeneration());
  record.seed = seed.has_value() ? *seed : RandomSeed();
  record.created_at_micros = absl::ToUnixMicros(now);
  record.last_used_micros = record.created_at_micros;
  record.spec = spec;
  const uint64_t bytes = RecordCharge(record);
  RETURN_IF_ERROR(CheckResidentCharge(bytes, name));
  RETURN_IF_ERROR(budget_.ChargeCached(bytes, 0, absl::StrCat("filter '", name, "'")));
  absl::StatusOr<StoredFilter::Built> filter = StoredFilter::Build(record, options_.clock);
  absl::Status status = filter.status();
  if (status.ok() && !defer_write) {
    rocksdb::WriteBatch batch;
    batch.Put(db_->filters(), static_cast<std::string>(name), EncodeFilterRecord(record));
    status = db_->Write(batch, options_.sync, "reserving a filter");
  }
  if (!status.ok()) {
    budget_.Release(bytes);
    return status;
  }
  std::shared_ptr<StoredFilter> stored =
      StoredFilter::Make(name, record, *std::move(filter), &context_, bytes);
  if (defer_write) stored->DeferCreation();
  Insert(stored);
  creations_.Record(name, now);
  created = true;
  return stored;
}

absl::StatusOr<FilterStore::ReserveResult> FilterStore::Reserve(absl::string_view name,
                                                                const bloom::FilterParams& spec,
                                                                bool defer_ack) {
  absl::StatusOr<ReserveResult> result;
  {
    bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
    RETURN_IF_ERROR(CheckOpen());
    RETURN_IF_ERROR(CheckWritable());
    RETURN_IF_ERROR(ValidateFilterName(name));
    ASSIGN_OR_RETURN(const bloom::FilterParams normalized, bloom::NormalizeSpec(spec));
    result = ReserveWith(name, normalized, absl::nullopt, "");
  }
  if (result.ok() && !defer_ack) RETURN_IF_ERROR(WaitReplicated());  // holding no lock
  return result;
}

absl::StatusOr<FilterStore::ReserveResult> FilterStore::ReserveWith(
    absl::string_view name, const bloom::FilterParams& normalized, absl::optional<uint64_t> seed,
    absl::string_view like) {
  // A Delete racing this Reserve can remove the filter it found or made before it answers:
  // look again (Reserve never answers NOT_FOUND).
  for (int attempt = 0; attempt < kDeleteRaceRetries; ++attempt) {
    ReserveResult result;
    ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter,
                     FindOrCreate(
                         name, normalized, result.created, /*defer_write=*/false, [] {}, seed));
    // Found as created by an Add whose first write has not happened yet: write it now, the
    // answer says the filter exists.
    absl::Status persisted = filter->EnsurePersisted(options_.sync);
    if (absl::IsNotFound(persisted)) continue;
    RETURN_IF_ERROR(persisted);
    absl::StatusOr<FilterInfo> info = filter->Info();  // NOT_FOUND once deleted
    if (absl::IsNotFound(info.status())) continue;
    if (!info.ok()) return info.status();
    if (!result.created && !(filter->spec() == normalized)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "filter '", name, "' already exists with a different spec (",
          DescribeSpec(filter->spec()), "; requested ", DescribeSpec(normalized), ")"));
    }
    if (!result.created && seed.has_value() && filter->seed() != *seed) {
      return absl::AlreadyExistsError(
          absl::StrCat("filter '", name, "' already exists, not made like '", like, "'"));
    }
    result.info = *std::move(info);
    return result;
  }
  return DeleteRaceError(name);
}

absl::StatusOr<std::vector<bool>> FilterStore::Add(absl::string_view name,
                                                   absl::Span<const absl::string_view> items,
                                                   const bloom::FilterParams* create_if_missing,
                                                   bool defer_sync) {
  // A batch of one: the same path as the adds of a Pipeline read (lookups, create_if_missing
  // racing Delete, evicted filters, the creating add's checkpoint), one RocksDB write.
  ASSIGN_OR_RETURN(std::unique_ptr<OperationBatch> batch, StartBatch(defer_sync));
  const OperationBatch::Ticket ticket = batch->Add(name, items, create_if_missing);
  absl::StatusOr<std::vector<bool>> added = batch->TakeResult(ticket);
  if (added.ok() && !defer_sync) RETURN_IF_ERROR(WaitReplicated());
  return added;
}

absl::StatusOr<std::vector<bool>> FilterStore::MightContain(
    absl::string_view name, absl::Span<const absl::string_view> items) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, FindUsable(name));
  std::vector<uint64_t> hashes(items.size());
  for (size_t i = 0; i < items.size(); ++i) hashes[i] = filter->Hash(items[i]);
  std::unique_ptr<bool[]> present(new bool[items.size()]);
  RETURN_IF_ERROR(filter->MightContain(hashes, present.get()));
  return std::vector<bool>(present.get(), present.get() + items.size());
}

absl::Status FilterStore::MightContainInto(absl::string_view name,
                                           absl::Span<const absl::string_view> items,
                                           bool* present) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, FindUsable(name));
  std::vector<uint64_t> hashes(items.size());
  for (size_t i = 0; i < items.size(); ++i) hashes[i] = filter->Hash(items[i]);
  return filter->MightContain(hashes, present);
}

absl::StatusOr<FilterInfo> FilterStore::Stats(absl::string_view name) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  ASSIGN_OR_RETURN(std::shared_ptr<StoredFilter> filter, FindUsable(name));
  return filter->Info();
}

absl::StatusOr<std::unique_ptr<OperationBatch>> FilterStore::StartBatch(bool defer_sync) {
  // holds lifecycle_mu_
  RETURN_IF_ERROR(CheckWritable());
  std::unique_ptr<OperationBatch> batch(new OperationBatch(this, options_.sync && !defer_sync));
  if (closed_.load()) return absl::FailedPreconditionError("the filter store is closed");
  return batch;
}

void FilterStore::WhenDurable(WalSyncer::Done done) { AfterWrites(std::move(done), true); }

void FilterStore::WhenReplicated(WalSyncer::Done done) { AfterWrites(std::move(done), false); }

void FilterStore::AfterWrites(WalSyncer::Done done, bool sync_wal) {
  if (absl::Status fenced = CheckMayAcknowledge(); !fenced.ok()) {
    std::move(done)(fenced);  // no use waiting for what cannot be acknowledged
    return;
  }
  // Every write so far (the caller's among them).
  const uint64_t sequence = LatestSequence();
  if (options_.may_acknowledge != nullptr) {  // asked again last, right before the answer
    done = [this, sequence, done = std::move(done)](const absl::Status& status) mutable {
      absl::Status answer = status.ok() ? CheckMayAcknowledge() : status;
      if (answer.ok() && options_.on_acknowledged) options_.on_acknowledged(sequence);
      std::move(done)(answer);
    };
  }
  if (acks_ != nullptr) {
    // Then the followers' acknowledgement of it (in the order asked: the syncer answers in
    // order, and so does ReplicaAcks for growing sequences).
    done = [this, sequence, done = std::move(done)](const absl::Status& synced) mutable {
      if (!synced.ok()) {
        std::move(done)(synced);
        return;
      }
      acks_->WhenAcked(sequence, std::move(done));
    };
  }
  if (wal_syncer_ == nullptr || !sync_wal) {
    std::move(done)(absl::OkStatus());
    return;
  }
  wal_syncer_->AfterSync(std::move(done));
}

absl::Status FilterStore::Delete(absl::string_view name, bool defer_ack) {
  {
    bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
    RETURN_IF_ERROR(CheckOpen());
    RETURN_IF_ERROR(CheckWritable());
    RETURN_IF_ERROR(ValidateFilterName(name));
    bloomsync::MutexLock name_lock(&NameLock(name));
    std::shared_ptr<StoredFilter> filter = Find(name);
    if (filter == nullptr && MayHaveCold()) {
      RETURN_IF_ERROR(DeleteCold(name));
    } else if (filter == nullptr) {
      return absl::NotFoundError(absl::StrCat("filter '", name, "' not found"));
    } else {
      RETURN_IF_ERROR(filter->Delete(options_.sync));
      Remove(filter->name());
    }
  }
  return defer_ack ? absl::OkStatus() : WaitReplicated();  // holding no lock
}

absl::StatusOr<FilterStore::ListPage> FilterStore::List(absl::string_view prefix, size_t page_size,
                                                        absl::string_view page_token) {
  return List(ListQuery{.prefix = prefix, .page_size = page_size, .page_token = page_token});
}

absl::StatusOr<FilterStore::ListPage> FilterStore::List(const ListQuery& query) {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  const absl::string_view prefix = query.prefix;
  const absl::string_view page_token = query.page_token;
  if (!page_token.empty()) RETURN_IF_ERROR(ValidateFilterName(page_token, "page_token"));
  const size_t page_size = query.page_size == 0 ? kDefaultPageSize : query.page_size;
  ListPage page;
  std::unique_ptr<rocksdb::Iterator> it = db_->Scan(db_->filters());
  const absl::Time now = options_.clock->Now();
  const std::string start =
      page_token.empty() ? static_cast<std::string>(prefix) : static_cast<std::string>(page_token);
  for (it->Seek(start); it->Valid(); it->Next()) {
    const absl::string_view name(it->key().data(), it->key().size());
    if (name.substr(0, prefix.size()) != prefix) break;
    if (!page_token.empty() && name <= page_token) continue;
    if (query.accept != nullptr && !query.accept(name)) continue;
    std::shared_ptr<StoredFilter> filter = Find(name);
    if (filter != nullptr && filter->evicted()) filter = nullptr;  // leaving memory: it is cold
    absl::StatusOr<FilterRecord> record;
    if (filter != nullptr) {
      if (!filter->Usable().ok()) continue;     // deleted, broken
      if (IdleExpired(*filter, now)) continue;  // as good as deleted (filter_store_idle_expiry.cc)
    } else {
      if (!MayHaveCold()) continue;  // mid-reserve or mid-delete
      // A cold filter is listed from its record, without loading it (which would evict others).
      record = DecodeFilterRecord(absl::string_view(it->value().data(), it->value().size()));
      if (!record.ok()) continue;  // unreadable: skipped, as resident unreadable ones are
      if (RecordIdleExpired(*record, now)) continue;
    }
    if (page.filters.size() == page_size) {
      page.next_page_token = page.filters.back().name;
      break;
    }
    if (query.names_only) {
      page.filters.push_back(FilterInfo{.name = static_cast<std::string>(name)});
      continue;
    }
    absl::StatusOr<FilterInfo> info =
        filter != nullptr
            ? filter->Info()
            : InfoFromRecord(static_cast<std::string>(name), *record, options_.clock->Now());
    if (!info.ok()) continue;
    page.filters.push_back(*std::move(info));
  }
  RETURN_IF_ERROR(FromRocksDb(it->status(), "listing filters"));
  return page;
}

absl::Status FilterStore::CheckpointAll() {
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  RETURN_IF_ERROR(CheckOpen());
  absl::Status result;
  for (const std::shared_ptr<StoredFilter>& filter : registry_.Snapshot()) {
    result.Update(filter->Checkpoint(options_.sync));
  }
  return result;
}

bool FilterStore::VisitForCheckpoint(const std::shared_ptr<StoredFilter>& filter, absl::Time now) {
  // Not WaitForStop(ZeroDuration()): a condition variable's wait with a timeout that has
  // passed still makes a futex call, and a pass may visit hundreds of thousands of filters.
  if (StopRequested()) return false;
  if (!CheckWritable().ok()) return false;  // fenced: the next pass tries again
  SweepIdleResident(filter);
  if (!filter->CheckpointDue(now, options_.checkpoint_interval)) return true;
  absl::Status s = filter->Checkpoint(options_.sync, /*paced=*/true);
  (s.ok() ? checkpoints_ : checkpoint_failures_).fetch_add(1, std::memory_order_relaxed);
  if (!s.ok()) {
    bloomlog::LogError(absl::StrCat("checkpoint of filter '", filter->name(),
                                    "' failed (will retry): ", s.message()));
  }
  return true;
}

bool FilterStore::RunCheckpointPass(absl::Time now) {
  if (db_->NeedsReopen()) {
    // No operation runs while the lifecycle lock is held exclusively, so RocksDB can be closed
    // and opened under them: the filters stay in memory, and every acknowledged write is in
    // the WAL that the reopen replays.
    bloomsync::WriterMutexLock lifecycle(&lifecycle_mu_);
    if (closed_.load()) return false;
    absl::Status reopened = db_->Reopen();
    if (reopened.ok()) {
      bloomlog::LogWarning("RocksDB reopened after a write error; writes are accepted again");
    } else {
      bloomlog::LogError(
          absl::StrCat("reopening RocksDB failed (will retry): ", reopened.message()));
    }
  }
  bloomsync::ReaderMutexLock lifecycle(&lifecycle_mu_);
  if (closed_.load()) return false;
  schedule_.Pass(
      now, options_.checkpoint_interval, options_.clock->Now(),
      [this](absl::string_view name) { return Find(name); },
      [&](const std::shared_ptr<StoredFilter>& filter) { return VisitForCheckpoint(filter, now); });
  if (StopRequested()) return false;
  SweepIdleCold();
  return true;
}

}  // namespace storage

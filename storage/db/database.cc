#include "storage/db/database.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/blocking_mutex.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "rocksdb/cache.h"
#include "rocksdb/env.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/listener.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/options.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/table.h"
#include "storage/db/rocksdb_status.h"
#include "storage/format/encoding.h"
#include "storage/replica/wal_archive.h"

namespace storage {
namespace {

// Block cache shared by every column family, holding data blocks and also index and filter
// blocks. By default RocksDB keeps every open SST file's whole index (and filter) outside any
// cache: with 10 million filters (15 GB of pages) that is ~150 MB the memory limit does not
// see. Partitioned indexes and filters keep only a small top level per file pinned; the
// partitions come and go through this cache, so RocksDB's reads use at most this much.
constexpr size_t kBlockCacheBytes = 64 << 20;
// How often the archive of log files kept for followers is brought within its bounds
// (wal_archive.h): it may pass its size limit by what is archived within one interval.
constexpr absl::Duration kArchivePurgeInterval = absl::Seconds(1);

// Tells the archive of log files that a flush finished: RocksDB archives the log files it
// freed right after, and the archive is brought back within its limit at once.
class ArchiveWaker final : public rocksdb::EventListener {
 public:
  explicit ArchiveWaker(WalArchive* archive) : archive_(archive) {}
  void OnFlushCompleted(rocksdb::DB* /*db*/, const rocksdb::FlushJobInfo& /*info*/) override {
    archive_->Wake();
  }

 private:
  WalArchive* const archive_;  // outlives RocksDB (Database closes RocksDB first)
};

rocksdb::BlockBasedTableOptions TableOptions(const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_top_level_index_and_filter = true;
  table.index_type = rocksdb::BlockBasedTableOptions::IndexType::kTwoLevelIndexSearch;
  table.metadata_block_size = 4096;
  return table;
}

// The filters' metadata records are read by name when a cold filter is used
// (filter_store_residency.cc), and most lookups of a name that does not exist (a per-user check
// with absent_if_missing) should not touch an SST file: whole-key Bloom filters on its tables.
rocksdb::ColumnFamilyOptions MetadataFamilyOptions(const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions options;
  rocksdb::BlockBasedTableOptions table = TableOptions(cache);
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.partition_filters = true;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // The same for the memtable: a name that is not there (every filter created on first add
  // is first looked up) is refused by a Bloom filter instead of a skip-list search of cache
  // misses. 2% of the memtable's
  // budget is ~1.3 MB, about 25 bits per record.
  options.memtable_whole_key_filtering = true;
  options.memtable_prefix_bloom_size_ratio = 0.02;
  return options;
}

rocksdb::ColumnFamilyOptions BitsFamilyOptions(const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions options;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(TableOptions(cache)));
  // Bloom filter bits and item hashes are random: compression costs CPU and saves nothing.
  options.compression = rocksdb::kNoCompression;
  options.write_buffer_size = 64 << 20;
  return options;
}

// The memtables of the journal and of the pages: 256K buckets by filter generation (2 MB of
// pointers per memtable), each a sorted linked list of its few records, or, past
// kGenerationSkipListThreshold records (one busy filter's: its records and the point deletes
// that trim them share its bucket), a skip list at full height (12 levels, RocksDB's default).
constexpr size_t kGenerationMemtableBuckets = 1 << 18;
constexpr uint32_t kGenerationSkipListThreshold = 64;

// The journal takes one record per add of each filter, keyed by (generation, seq), and the
// pages family a page for each filter created on first add (its first checkpoint, keyed by
// generation, sub-filter and page): with many per-user filters both insert at random places.
// In RocksDB's default memtable, one skip list for all, each such insert misses the cache at
// every level (InlineSkipList::FindSpliceForLevel). Hashed by generation, an insert touches
// one bucket and its short list.
//
// Why linked lists and not skip lists per bucket (HashSkipList): those cost ~330 bytes of arena
// each at the height a busy filter needs, so only a few thousand buckets fit, whose lists then
// hold tens of records each with many per-user filters (Debian's RocksDB, built with
// assertions, also searches once more per insert to assert the key is new). Linked-list
// buckets cost 8 bytes each, so 16 times as many hold a few records each.
// tests/bench/compare.sh scenario 5 (per-user filters) measures the effect.
//
// The price, paid where it is cheap: these memtables iterate in key order only within a
// generation (GenerationScan below, how one filter's pages and journal are read), and a full
// scan (Scan, at start-up) sorts a copy. The metadata family stays ordered: List pages through
// it by name, and Get reads it by name.
rocksdb::ColumnFamilyOptions GenerationHashedFamilyOptions(
    const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions options = BitsFamilyOptions(cache);
  options.prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(kGenerationPrefixBytes));
  options.memtable_factory.reset(rocksdb::NewHashLinkListRepFactory(
      kGenerationMemtableBuckets, /*huge_page_tlb_size=*/0,
      /*bucket_entries_logging_threshold=*/0, /*if_log_bucket_dist_when_flash=*/false,
      kGenerationSkipListThreshold));
  return options;
}

// RocksDB's own log goes to the server's log, not to a LOG file in the data dir: Debian's RocksDB
// 7.8 aborts (an assertion in WritableFileWriter) when it writes to a LOG file whose previous
// write failed, so on a full disk the first error message it tried to log killed the server.
// Its informational chatter becomes debug lines; warnings and errors stay what they are.
class ServerLogLogger final : public rocksdb::Logger {
 public:
  ServerLogLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL) {}

  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    const bloomlog::Level ours =
        level >= rocksdb::InfoLogLevel::ERROR_LEVEL && level != rocksdb::InfoLogLevel::HEADER_LEVEL
            ? bloomlog::Level::kError
        : level == rocksdb::InfoLogLevel::WARN_LEVEL ? bloomlog::Level::kWarning
                                                     : bloomlog::Level::kDebug;
    if (!bloomlog::Enabled(ours)) return;
    char buffer[1024];
    const int n = std::vsnprintf(buffer, sizeof(buffer), format, ap);
    if (n < 0) return;
    const size_t length = std::min<size_t>(static_cast<size_t>(n), sizeof(buffer) - 1);
    bloomlog::Log(ours, absl::StrCat("rocksdb: ", absl::string_view(buffer, length)));
  }
};

// Room RocksDB needs to open `dir` beyond its write-ahead logs: a new log, MANIFEST and OPTIONS.
constexpr uint64_t kOpenMarginBytes = 16 << 20;

// Debian's RocksDB 7.8 aborts on an assertion (WritableFileWriter's "sync_without_flush_called_")
// when a recovery write fails on a full disk: the process would die with SIGABRT at every
// start. So look first: recovery replays the WAL into memtables and flushes them to SST files,
// which needs about the WAL's size, and refuse to open with a clear error without that room.
absl::Status CheckRoomToOpen(const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::exists(dir, error)) return absl::OkStatus();  // created empty
  uint64_t wal_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".log" && entry.is_regular_file(error)) {
      wal_bytes += entry.file_size(error);
    }
  }
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) return absl::OkStatus();  // RocksDB will say what is wrong
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  const uint64_t needed = wal_bytes + kOpenMarginBytes;
  if (free_bytes >= needed) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("data dir ", dir, " has ", free_bytes, " bytes free; opening it needs about ",
                   needed, " (its write-ahead log of ", wal_bytes,
                   " bytes is replayed and flushed, plus ", kOpenMarginBytes,
                   "): free space or grow the volume, then start again (nothing "
                   "acknowledged is lost)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& dir, rocksdb::Env* env,
                                                         LogRetention retention) {
  auto database = std::unique_ptr<Database>(new Database(dir, env, retention));
  database->statistics_ = rocksdb::CreateDBStatistics();
  if (retention.ttl > absl::ZeroDuration() && retention.size_limit_bytes > 0) {
    database->archive_ = std::make_unique<WalArchive>(
        env != nullptr ? env : rocksdb::Env::Default(), dir, retention, kArchivePurgeInterval);
  }
  if (absl::Status opened = database->OpenRocksDb(); !opened.ok()) return opened;
  return database;
}

absl::Status Database::OpenRocksDb() {
  rocksdb::DBOptions options;
  if (env_ != nullptr) options.env = env_;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.max_background_jobs = 2;
  // Bound the WAL: once it passes this, RocksDB flushes the column families that pin old logs.
  // A start after kill -9 replays all of it: 128 MB keeps that well under a second.
  options.max_total_wal_size = 128 << 20;
  options.keep_log_file_num = 4;
  // Followers tail the write-ahead log (replication_log.h): obsolete log files are archived
  // and kept within these bounds instead of deleted at once.
  options.WAL_ttl_seconds = static_cast<uint64_t>(absl::ToInt64Seconds(retention_.ttl));
  options.WAL_size_limit_MB = (retention_.size_limit_bytes + (1 << 20) - 1) >> 20;
  // One memtable budget for all column families (each would otherwise buffer up to 64 MB
  // before flushing), so the server's memory beyond its filters stays bounded.
  options.db_write_buffer_size = 64 << 20;
  // Recovery from write errors is driven by Write() (Resume) and Reopen(), not by RocksDB's
  // background retries.
  options.max_bgerror_resume_count = 0;
  // Only RocksDB's default skip list takes concurrent inserts (the hashed memtables of the
  // pages and the journal do not). Little is lost: the group committer (group_commit.h) writes most
  // adds in one batch from one thread already.
  options.allow_concurrent_memtable_write = false;
  options.statistics = statistics_;
  options.info_log = std::make_shared<ServerLogLogger>();
  if (archive_ != nullptr) {
    options.listeners.push_back(std::make_shared<ArchiveWaker>(archive_.get()));
  }

  // Made once: Reopen() keeps it (and Figures() may read it meanwhile).
  if (block_cache_ == nullptr) block_cache_ = rocksdb::NewLRUCache(kBlockCacheBytes);
  const std::shared_ptr<rocksdb::Cache>& cache = block_cache_;
  rocksdb::ColumnFamilyOptions default_options;
  default_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(TableOptions(cache)));
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, default_options},
      {"filters", MetadataFamilyOptions(cache)},
      {"blocks", GenerationHashedFamilyOptions(cache)},
      {"journal", GenerationHashedFamilyOptions(cache)},
  };
  RETURN_IF_ERROR(CheckRoomToOpen(dir_));
  rocksdb::DB* raw = nullptr;
  rocksdb::Status status = rocksdb::DB::Open(options, dir_, families, &handles_, &raw);
  if (!status.ok()) {
    if (status.IsIOError() && absl::StrContains(status.ToString(), "lock")) {
      return absl::FailedPreconditionError(
          absl::StrCat("data dir ", dir_, " is in use by another bloom-server process (",
                       status.ToString(), ")"));
    }
    return FromRocksDb(status, absl::StrCat("opening RocksDB in ", dir_));
  }
  db_.reset(raw);

  std::string version;
  status = raw->Get(rocksdb::ReadOptions(), static_cast<std::string>(kFormatVersionKey), &version);
  if (status.IsNotFound()) {
    rocksdb::WriteBatch batch;
    batch.Put(static_cast<std::string>(kFormatVersionKey), absl::StrCat(kFormatVersion));
    return Write(batch, /*sync=*/true, "writing format version");
  }
  if (!status.ok()) return FromRocksDb(status, "reading format version");
  uint32_t found = 0;
  if (!absl::SimpleAtoi(version, &found) || found != kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat("data dir ", dir_, " has format version '",
                                                      version, "'; this server reads ",
                                                      kFormatVersion));
  }
  return absl::OkStatus();
}

absl::Status Database::Reopen() {
  CloseRocksDb().IgnoreError();  // a DB that failed writes may fail to close cleanly too
  RETURN_IF_ERROR(OpenRocksDb());
  needs_resume_.store(false);
  needs_reopen_.store(false);
  return absl::OkStatus();
}

Database::Database(std::string dir, rocksdb::Env* env, LogRetention retention)
    : dir_(std::move(dir)), env_(env), retention_(retention) {}

Database::~Database() {
  // Callers Close() explicitly to see errors; a destructor can only drop them.
  Close().IgnoreError();
}

void Database::NoteLogReader() const {
  if (archive_ != nullptr) archive_->NoteReader();
}

absl::Status Database::Close() {
  if (db_ != nullptr) {
    // Flushed memtables leave no write-ahead log to replay: the next start-up after a clean
    // shutdown opens at once (with the WAL it replayed up to max_total_wal_size first).
    rocksdb::FlushOptions flush;
    flush.allow_write_stall = true;
    absl::Status flushed = FromRocksDb(db_->Flush(flush, handles_), "flushing at shutdown");
    if (!flushed.ok()) bloomlog::LogError(flushed.message());  // the WAL still has it all
  }
  absl::Status closed = CloseRocksDb();
  if (archive_ != nullptr) {
    // The flush archived the last log files: what the bounds do not keep goes now, not at the
    // next start (a server without followers leaves no archive behind).
    if (absl::StatusOr<uint64_t> kept = archive_->Purge(absl::Now()); !kept.ok()) {
      bloomlog::LogWarning(kept.status().ToString());
    }
    archive_.reset();
  }
  return closed;
}

absl::Status Database::CloseRocksDb() {
  if (db_ == nullptr) return absl::OkStatus();
  absl::Status result;
  for (rocksdb::ColumnFamilyHandle* handle : handles_) {
    result.Update(FromRocksDb(db_->DestroyColumnFamilyHandle(handle), "closing column family"));
  }
  handles_.clear();
  result.Update(FromRocksDb(db_->Close(), "closing RocksDB"));
  db_.reset();
  return result;
}

#ifdef BLOOM_TSAN
namespace {
// Debian's librocksdb is not instrumented: ThreadSanitizer cannot see how RocksDB's write
// group hands one thread's batch to the leader thread, and reports the batch buffers as
// races. Under TSAN only, writes (and WAL syncs) are serialised by a pthread mutex that TSAN
// does see, so the reports left are about our code. Production builds keep RocksDB's group
// commit.
bloomsync::BlockingMutex& TsanWriteMutex() {
  static bloomsync::BlockingMutex* mu = new bloomsync::BlockingMutex();
  return *mu;
}

// The same for reads: an iterator reads memtable entries that a write put there, ordered by
// RocksDB's skip-list atomics, which TSAN cannot see either (a cold sweep reading records while
// adds created filters was reported). Each move of the iterator takes the write mutex, so it
// only reaches entries whose write TSAN saw finish; entries never change once written.
class TsanOrderedIterator final : public rocksdb::Iterator {
 public:
  explicit TsanOrderedIterator(rocksdb::Iterator* base) : base_(base) {}
  ~TsanOrderedIterator() override {
    Ordered([&] { base_.reset(); });  // releases memtables a flush may be freeing
  }
  bool Valid() const override { return base_->Valid(); }
  void SeekToFirst() override {
    Ordered([&] { base_->SeekToFirst(); });
  }
  void SeekToLast() override {
    Ordered([&] { base_->SeekToLast(); });
  }
  void Seek(const rocksdb::Slice& target) override {
    Ordered([&] { base_->Seek(target); });
  }
  void SeekForPrev(const rocksdb::Slice& target) override {
    Ordered([&] { base_->SeekForPrev(target); });
  }
  void Next() override {
    Ordered([&] { base_->Next(); });
  }
  void Prev() override {
    Ordered([&] { base_->Prev(); });
  }
  rocksdb::Slice key() const override { return base_->key(); }
  rocksdb::Slice value() const override { return base_->value(); }
  rocksdb::Status status() const override { return base_->status(); }

 private:
  template <typename Move>
  static void Ordered(Move move) {
    bloomsync::BlockingLock lock(&TsanWriteMutex());
    move();
  }
  std::unique_ptr<rocksdb::Iterator> base_;
};
}  // namespace
#endif

void Database::NoteWriteError(const rocksdb::Status& status) {
  if (!status.IsIOError()) return;
  needs_resume_.store(true);
  bloomsync::MutexLock lock(&error_mu_);
  last_write_error_ = status.ToString();
  if (status.IsNoSpace()) last_write_error_ += " (disk full)";
}

absl::Status Database::SyncWal() {
#ifdef BLOOM_TSAN
  bloomsync::BlockingLock lock(&TsanWriteMutex());
#endif
  if (db_ == nullptr) {
    return absl::UnavailableError("syncing the write-ahead log: storage is being reopened");
  }
  rocksdb::Status status = db_->SyncWAL();
  NoteWriteError(status);
  return FromRocksDb(status, "syncing the write-ahead log");
}

absl::Status Database::Write(rocksdb::WriteBatch& batch, bool sync, absl::string_view context) {
  rocksdb::WriteOptions options;
  options.sync = sync;
#ifdef BLOOM_TSAN
  bloomsync::BlockingLock lock(&TsanWriteMutex());
#endif
  if (write_gate_) {
    if (absl::Status allowed = write_gate_(); !allowed.ok()) {
      return {allowed.code(), absl::StrCat(context, ": ", allowed.message())};
    }
  }
  if (db_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(context, ": storage is being reopened after a write error"));
  }
  if (needs_resume_.load()) {
    // Resume() flushes and switches to a new WAL; while the cause persists it fails again.
    rocksdb::Status resumed = db_->Resume();
    if (!resumed.ok()) {
      if (!resumed.IsBusy()) needs_reopen_.store(true);
      bloomsync::MutexLock lock(&error_mu_);
      return absl::UnavailableError(absl::StrCat(context,
                                                 ": storage is recovering from a write error (",
                                                 last_write_error_, "): ", resumed.ToString()));
    }
    needs_resume_.store(false);
  }
  rocksdb::Status status = db_->Write(options, &batch);
  NoteWriteError(status);
  if (status.ok() && write_waiters_.load() > 0) {
    bloomsync::BlockingLock lock(&write_wait_mu_);
    write_wait_cv_.NotifyAll();
  }
  return FromRocksDb(status, context);
}

uint64_t Database::LatestSequence() const {
  return db_ == nullptr ? 0 : db_->GetLatestSequenceNumber();
}

bool Database::WaitForWriteAfter(uint64_t sequence, absl::Duration timeout,
                                 const std::atomic<bool>* woken) {
  bloomsync::BlockingLock lock(&write_wait_mu_);
  write_waiters_.fetch_add(1);  // seq_cst, as the writer's load: neither misses the other
  // A write between the check and the wait notifies under write_wait_mu_, which this holds.
  const bool written = write_wait_cv_.WaitFor(lock, absl::ToChronoMicroseconds(timeout), [&] {
    return LatestSequence() > sequence || (woken != nullptr && woken->load());
  });
  write_waiters_.fetch_sub(1);
  return written;
}

void Database::WakeWriteWaiters() {
  bloomsync::BlockingLock lock(&write_wait_mu_);
  write_wait_cv_.NotifyAll();
}

RocksDbFigures Database::Figures() const {
  RocksDbFigures figures;
  if (db_ == nullptr) return figures;
  // A property RocksDB does not know reads as 0: figures are best effort, never an error.
  auto property = [&](rocksdb::ColumnFamilyHandle* family, const rocksdb::Slice& name) {
    uint64_t value = 0;
    return db_->GetIntProperty(family, name, &value) ? value : 0;
  };
  for (rocksdb::ColumnFamilyHandle* family : handles_) {
    figures.live_sst_bytes += property(family, rocksdb::DB::Properties::kLiveSstFilesSize);
    figures.pending_compaction_bytes +=
        property(family, rocksdb::DB::Properties::kEstimatePendingCompactionBytes);
    figures.memtable_bytes += property(family, rocksdb::DB::Properties::kCurSizeAllMemTables);
    figures.table_reader_bytes +=
        property(family, rocksdb::DB::Properties::kEstimateTableReadersMem);
  }
  if (block_cache_ != nullptr) figures.block_cache_bytes = block_cache_->GetUsage();
  figures.write_stopped =
      property(db_->DefaultColumnFamily(), rocksdb::DB::Properties::kIsWriteStopped) != 0;
  figures.delayed_write_rate =
      property(db_->DefaultColumnFamily(), rocksdb::DB::Properties::kActualDelayedWriteRate);
  if (statistics_ != nullptr) {
    figures.write_stall_micros = statistics_->getTickerCount(rocksdb::STALL_MICROS);
  }
  return figures;
}

std::unique_ptr<rocksdb::Iterator> Database::NewIterator(
    const rocksdb::ReadOptions& options, rocksdb::ColumnFamilyHandle* family) const {
  if (db_ == nullptr) {
    return std::unique_ptr<rocksdb::Iterator>(rocksdb::NewErrorIterator(
        rocksdb::Status::Aborted("storage is being reopened after a write error")));
  }
#ifdef BLOOM_TSAN
  rocksdb::Iterator* base;
  {
    bloomsync::BlockingLock lock(&TsanWriteMutex());
    base = db_->NewIterator(options, family);
  }
  return std::make_unique<TsanOrderedIterator>(base);
#else
  return std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(options, family));
#endif
}

std::unique_ptr<rocksdb::Iterator> Database::Scan(rocksdb::ColumnFamilyHandle* family) const {
  rocksdb::ReadOptions options;
  options.fill_cache = false;
  options.readahead_size = 4 << 20;
  options.total_order_seek = true;  // the pages' and journal's memtables are hashed
  return NewIterator(options, family);
}

GenerationScan::GenerationScan(const Database& db, rocksdb::ColumnFamilyHandle* family,
                               uint64_t generation)
    : upper_(GenerationPrefix(generation + 1)), upper_slice_(upper_) {
  rocksdb::ReadOptions options;
  // With a prefix extractor (the journal), a seek reads only this generation's keys (its
  // memtable bucket); the bound ends the scan there for every family.
  options.iterate_upper_bound = &upper_slice_;
  it_ = db.NewIterator(options, family);
  it_->Seek(GenerationPrefix(generation));
}

}  // namespace storage

#include "storage/database.h"

#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "storage/encoding.h"
#include "storage/rocksdb_status.h"

namespace storage {
namespace {

rocksdb::ColumnFamilyOptions BitsFamilyOptions() {
  rocksdb::ColumnFamilyOptions options;
  // Bloom filter bits and item hashes are random: compression costs CPU and saves nothing.
  options.compression = rocksdb::kNoCompression;
  options.write_buffer_size = 64 << 20;
  return options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& dir,
                                                         rocksdb::Env* env) {
  auto database = std::unique_ptr<Database>(new Database(dir, env));
  database->statistics_ = rocksdb::CreateDBStatistics();
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
  options.max_total_wal_size = 512 << 20;
  options.keep_log_file_num = 4;
  // One memtable budget for all column families (each would otherwise buffer up to 64 MB
  // before flushing), so the server's memory beyond its filters stays bounded.
  options.db_write_buffer_size = 64 << 20;
  // Recovery from write errors is driven by Write() (Resume) and Reopen(), not by RocksDB's
  // background retries.
  options.max_bgerror_resume_count = 0;
  options.statistics = statistics_;

  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {"filters", rocksdb::ColumnFamilyOptions()},
      {"blocks", BitsFamilyOptions()},
      {"journal", BitsFamilyOptions()},
  };
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
  status = raw->Get(rocksdb::ReadOptions(), std::string(kFormatVersionKey), &version);
  if (status.IsNotFound()) {
    rocksdb::WriteBatch batch;
    batch.Put(std::string(kFormatVersionKey), absl::StrCat(kFormatVersion));
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

Database::~Database() {
  // Callers Close() explicitly to see errors; a destructor can only drop them.
  Close().IgnoreError();
}

absl::Status Database::Close() { return CloseRocksDb(); }

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

absl::Status Database::Write(rocksdb::WriteBatch& batch, bool sync, absl::string_view context) {
  rocksdb::WriteOptions options;
  options.sync = sync;
#ifdef BLOOM_TSAN
  // Debian's librocksdb is not instrumented: ThreadSanitizer cannot see how RocksDB's write
  // group hands one thread's batch to the leader thread, and reports the batch buffers as
  // races. Under TSAN only, writes are serialised by a pthread mutex that TSAN does see, so
  // the reports left are about our code. Production builds keep RocksDB's group commit.
  static std::mutex* tsan_write_mu = new std::mutex();
  std::lock_guard<std::mutex> lock(*tsan_write_mu);
#endif
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
  if (status.IsIOError()) {
    needs_resume_.store(true);
    bloomsync::MutexLock lock(&error_mu_);
    last_write_error_ = status.ToString();
    if (status.IsNoSpace()) last_write_error_ += " (disk full)";
  }
  return FromRocksDb(status, context);
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
  }
  figures.write_stopped =
      property(db_->DefaultColumnFamily(), rocksdb::DB::Properties::kIsWriteStopped) != 0;
  figures.delayed_write_rate =
      property(db_->DefaultColumnFamily(), rocksdb::DB::Properties::kActualDelayedWriteRate);
  if (statistics_ != nullptr) {
    figures.write_stall_micros = statistics_->getTickerCount(rocksdb::STALL_MICROS);
  }
  return figures;
}

std::unique_ptr<rocksdb::Iterator> Database::Scan(rocksdb::ColumnFamilyHandle* family) const {
  if (db_ == nullptr) {
    return std::unique_ptr<rocksdb::Iterator>(rocksdb::NewErrorIterator(
        rocksdb::Status::Aborted("storage is being reopened after a write error")));
  }
  rocksdb::ReadOptions options;
  options.fill_cache = false;
  options.readahead_size = 4 << 20;
  return std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(options, family));
}

}  // namespace storage

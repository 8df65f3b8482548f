#include "storage/database.h"

#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& dir) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.max_background_jobs = 2;
  // Bound the WAL: once it passes this, RocksDB flushes the column families that pin old logs.
  options.max_total_wal_size = 512 << 20;
  options.keep_log_file_num = 4;
  auto database = std::unique_ptr<Database>(new Database());
  database->statistics_ = rocksdb::CreateDBStatistics();
  options.statistics = database->statistics_;

  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {"filters", rocksdb::ColumnFamilyOptions()},
      {"blocks", BitsFamilyOptions()},
      {"journal", BitsFamilyOptions()},
  };
  rocksdb::DB* raw = nullptr;
  rocksdb::Status status =
      rocksdb::DB::Open(options, dir, families, &database->handles_, &raw);
  if (!status.ok()) {
    if (status.IsIOError() && absl::StrContains(status.ToString(), "lock")) {
      return absl::FailedPreconditionError(
          absl::StrCat("data dir ", dir, " is in use by another bloom-server process (",
                       status.ToString(), ")"));
    }
    return FromRocksDb(status, absl::StrCat("opening RocksDB in ", dir));
  }
  database->db_.reset(raw);

  std::string version;
  status = raw->Get(rocksdb::ReadOptions(), std::string(kFormatVersionKey), &version);
  if (status.IsNotFound()) {
    rocksdb::WriteBatch batch;
    batch.Put(std::string(kFormatVersionKey), absl::StrCat(kFormatVersion));
    if (absl::Status written = database->Write(batch, /*sync=*/true, "writing format version");
        !written.ok()) {
      return written;
    }
  } else if (!status.ok()) {
    return FromRocksDb(status, "reading format version");
  } else {
    uint32_t found = 0;
    if (!absl::SimpleAtoi(version, &found) || found != kFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat("data dir ", dir, " has format version '",
                                                        version, "'; this server reads ",
                                                        kFormatVersion));
    }
  }
  return database;
}

Database::~Database() { Close().IgnoreError(); }

absl::Status Database::Close() {
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
  return FromRocksDb(db_->Write(options, &batch), context);
}

std::unique_ptr<rocksdb::Iterator> Database::Scan(rocksdb::ColumnFamilyHandle* family) const {
  rocksdb::ReadOptions options;
  options.fill_cache = false;
  options.readahead_size = 4 << 20;
  return std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(options, family));
}

}  // namespace storage

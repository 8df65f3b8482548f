// WalArchive (wal_archive.h): RocksDB's log archive purged within its bounds.
#include "storage/replica/wal_archive.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "storage/db/rocksdb_status.h"

namespace storage {
namespace {

// Beside the data: when the log was last read (its modification time says it).
constexpr char kReadersFile[] = "REPLICATION_LOG_READERS";
constexpr absl::Duration kPersistEvery = absl::Minutes(1);
// After a flush, RocksDB archives the log files it freed a moment later (its purge follows the
// flush job): purged at once, then again after this.
constexpr absl::Duration kAfterFlush = absl::Milliseconds(50);

struct ArchivedFile {
  std::string path;
  uint64_t number = 0;  // RocksDB's log number: older files have smaller ones
  uint64_t bytes = 0;
  absl::Time modified;
};

}  // namespace

WalArchive::WalArchive(rocksdb::Env* env, std::string db_dir, LogRetention retention,
                       absl::Duration interval)
    : env_(env),
      db_dir_(std::move(db_dir)),
      dir_(db_dir_ + "/archive"),
      retention_(retention),
      interval_(interval),
      last_reader_micros_(absl::ToUnixMicros(absl::InfinitePast())) {
  uint64_t modified = 0;
  if (env_->GetFileModificationTime(db_dir_ + "/" + kReadersFile, &modified).ok()) {
    last_reader_micros_.store(static_cast<int64_t>(modified) * 1'000'000);
    persisted_reader_micros_ = last_reader_micros_.load();
  }
  if (interval_ > absl::ZeroDuration()) thread_ = std::thread([this] { Loop(); });
}

WalArchive::~WalArchive() {
  {
    bloomsync::BlockingLock lock(&mu_);
    stop_ = true;
  }
  stop_cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void WalArchive::Wake() {
  {
    bloomsync::BlockingLock lock(&mu_);
    woken_ = true;
  }
  stop_cv_.NotifyAll();
}

void WalArchive::Loop() {
  bloomsync::BlockingLock lock(&mu_);
  int soon = 0;  // purges still due shortly after a wake-up
  while (true) {
    const absl::Duration wait = soon > 0 ? kAfterFlush : interval_;
    stop_cv_.WaitFor(lock, absl::ToChronoMicroseconds(wait),
                     [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || woken_; });
    if (stop_) return;
    if (woken_) soon = 2;
    woken_ = false;
    if (soon > 0) --soon;
    lock.Unlock();
    absl::StatusOr<uint64_t> kept = Purge(absl::Now());
    if (!kept.ok()) {
      bloomlog::LogWarning(absl::StrCat("replication log archive: ", kept.status().ToString()));
    }
    lock.Lock();
  }
}

void WalArchive::PersistLastReader() {
  const int64_t last = last_reader_micros_.load();
  if (last - persisted_reader_micros_ < absl::ToInt64Microseconds(kPersistEvery)) return;
  std::unique_ptr<rocksdb::WritableFile> file;
  const std::string path = db_dir_ + "/" + kReadersFile;
  if (env_->NewWritableFile(path, &file, rocksdb::EnvOptions()).ok()) {
    // The content is for people; the modification time is what is read back.
    file->Append(absl::StrCat("the replication log was last read at ", last, " us\n"))
        .PermitUncheckedError();
    file->Close().PermitUncheckedError();
    persisted_reader_micros_ = last;
  }
}

absl::StatusOr<uint64_t> WalArchive::Purge(absl::Time now) {
  bloomsync::BlockingLock lock(&purge_mu_);
  PersistLastReader();
  std::vector<std::string> names;
  rocksdb::Status listed = env_->GetChildren(dir_, &names);
  if (listed.IsNotFound()) return 0;  // nothing archived yet
  if (!listed.ok()) return FromRocksDb(listed, absl::StrCat("listing ", dir_));
  std::vector<ArchivedFile> files;
  for (const std::string& name : names) {
    if (!absl::EndsWith(name, ".log")) continue;
    ArchivedFile file;
    if (!absl::SimpleAtoi(name.substr(0, name.size() - 4), &file.number)) continue;
    file.path = dir_ + "/" + name;
    uint64_t modified = 0;
    if (!env_->GetFileSize(file.path, &file.bytes).ok() ||
        !env_->GetFileModificationTime(file.path, &modified).ok()) {
      continue;  // RocksDB purged it meanwhile
    }
    file.modified = absl::FromUnixSeconds(static_cast<int64_t>(modified));
    files.push_back(std::move(file));
  }
  std::sort(files.begin(), files.end(),
            [](const ArchivedFile& a, const ArchivedFile& b) { return a.number < b.number; });
  uint64_t total = 0;
  for (const ArchivedFile& file : files) total += file.bytes;
  const bool read_lately = now - absl::FromUnixMicros(last_reader_micros_.load()) < retention_.ttl;
  for (const ArchivedFile& file : files) {  // oldest first
    const bool keep =
        read_lately && total <= retention_.size_limit_bytes && now - file.modified < retention_.ttl;
    if (keep) break;  // newer files are newer still
    rocksdb::Status deleted = env_->DeleteFile(file.path);
    if (!deleted.ok() && !deleted.IsNotFound()) {
      return FromRocksDb(deleted, absl::StrCat("deleting ", file.path));
    }
    total -= file.bytes;
  }
  return total;
}

}  // namespace storage

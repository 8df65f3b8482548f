#include "storage/db/rocksdb_status.h"

#include "absl/strings/str_cat.h"

namespace storage {

absl::Status FromRocksDb(const rocksdb::Status& status, absl::string_view context) {
  if (status.ok()) return absl::OkStatus();
  std::string message = absl::StrCat(context, ": ", status.ToString());
  if (status.IsNoSpace()) absl::StrAppend(&message, " (disk full)");
  switch (status.code()) {
    case rocksdb::Status::kCorruption:
      return absl::DataLossError(message);
    case rocksdb::Status::kIOError:
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kTryAgain:
    case rocksdb::Status::kAborted:
    case rocksdb::Status::kShutdownInProgress:
    case rocksdb::Status::kIncomplete:
      return absl::UnavailableError(message);
    case rocksdb::Status::kNotFound:
      return absl::NotFoundError(message);
    case rocksdb::Status::kInvalidArgument:
      return absl::InvalidArgumentError(message);
    case rocksdb::Status::kNotSupported:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace storage

// The one place where RocksDB statuses become absl::Status.
#ifndef STORAGE_DB_ROCKSDB_STATUS_H_
#define STORAGE_DB_ROCKSDB_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rocksdb/status.h"

namespace storage {

// Maps a RocksDB status to the closest canonical code, prefixing the message with `context`:
//   Corruption -> DATA_LOSS; IOError (including disk full), Busy, TimedOut, TryAgain, Aborted,
//   ShutdownInProgress -> UNAVAILABLE (the caller may retry once the disk or process recovers);
//   NotFound -> NOT_FOUND; InvalidArgument -> INVALID_ARGUMENT; NotSupported -> UNIMPLEMENTED;
//   anything else -> INTERNAL.
absl::Status FromRocksDb(const rocksdb::Status& status, absl::string_view context);

}  // namespace storage

#endif  // STORAGE_DB_ROCKSDB_STATUS_H_

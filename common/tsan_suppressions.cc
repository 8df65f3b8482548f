// Linked only into ThreadSanitizer builds (BLOOM_SANITIZE=thread).
//
// Debian's librocksdb is not built with TSAN, so TSAN cannot see the atomics and mutexes that
// order RocksDB's own threads:
//  - a scan racing a write shows up as memcmp/memcpy "races" called from inside librocksdb
//    (called_from_lib);
//  - background work RocksDB runs around Open and Close (a compaction copying the options'
//    db_paths, the SstFileManager's thread at shutdown; seen after range deletes and reopens)
//    shows up as races in standard library code inlined into our binary, with librocksdb
//    frames above it (race:librocksdb.so).
// Both match only reports whose stacks run inside librocksdb. The one piece of our code that
// RocksDB calls back is the logger in storage/database.cc, which only formats a line and hands
// it to the thread-safe common/log.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:librocksdb.so\n"
         "race:librocksdb.so\n";
}

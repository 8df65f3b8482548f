// Linked only into ThreadSanitizer builds (BLOOM_SANITIZE=thread).
//
// Debian's librocksdb is not built with TSAN, so TSAN cannot see the atomics that order
// RocksDB's own threads: a memtable scan racing a write, or background work around Open and
// Close (a compaction copying the options' db_paths, the SstFileManager's thread at shutdown),
// shows up as races in memcmp/memcpy or in standard library code called from librocksdb.
// race:librocksdb.so matches exactly the reports whose stacks run inside librocksdb.
//
// RocksDB's mutexes, by contrast, are pthread calls TSAN intercepts, and they are what orders
// a background flush after the Open that built its options: an earlier called_from_lib
// suppression hid them, and a flush (Close() flushes the memtables) then "raced" with Open on
// strings copied inside libstdc++, with no librocksdb frame to match. So interceptors called
// from librocksdb stay on.
//
// The one piece of our code that RocksDB calls back is the logger in storage/db/database.cc, which
// only formats a line and hands it to the thread-safe common/log.
extern "C" const char* __tsan_default_suppressions() { return "race:librocksdb.so\n"; }

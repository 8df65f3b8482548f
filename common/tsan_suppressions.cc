// Linked only into ThreadSanitizer builds (BLOOM_SANITIZE=thread).
//
// Debian's librocksdb is not built with TSAN: its memtable is synchronised with atomics TSAN
// cannot see, so a scan racing a write shows up as memcmp/memcpy "races" called from inside
// librocksdb. This suppresses exactly those interceptor reports, and nothing in our code.
extern "C" const char* __tsan_default_suppressions() { return "called_from_lib:librocksdb.so\n"; }

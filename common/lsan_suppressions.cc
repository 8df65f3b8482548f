// Linked only into AddressSanitizer builds (BLOOM_SANITIZE=address), whose LeakSanitizer
// checks every program at exit.
//
// OpenSSL keeps state per thread: the random generators (EVP_RAND_CTX) a TLS handshake draws
// from and the error queue (ERR_STATE). It frees them when the thread exits, from a
// thread-specific-data destructor. gRPC's pool threads run the handshakes and may still be
// exiting when the process does: glibc clears a thread's slot before it calls the destructor,
// so LeakSanitizer, checking at that moment, finds the state referenced from nowhere and
// reports it (SecurityTest's handshakes did, about one run in five on a loaded machine).
//
// Debian's libcrypto has no frame pointers, so the fast unwinder that ASan uses for
// allocations stops at CRYPTO_zalloc: a report names no more than the library, and the
// suppression cannot be narrower. Every allocation of ours that OpenSSL makes (service/tls.cc's
// certificates and keys) is held by a unique_ptr with OpenSSL's free function.
extern "C" const char* __lsan_default_suppressions() { return "leak:libcrypto.so\n"; }

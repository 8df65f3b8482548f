// How one page of a filter's bits is stored as a value of the `blocks` column family.
//
//   dense:  the page's 64-bit words, little-endian: exactly page_size bytes (a multiple of 64).
//   sparse: the byte 0x01, then for each nonzero word in increasing order its index in the
//           page (u16 LE) and its value (u64 LE): 1 + 10n bytes, an odd length, so a sparse
//           value is never taken for a dense one.
//
// Why: a per-user filter holds a handful of items for most of its life (capacity 1000 at 1% is
// 1,472 bytes of bits, one item sets 6 words). Written dense, every checkpoint and eviction of
// such a filter would carry 1.5 KB through the WAL, the memtable, flushes and compactions: most
// of the CPU and disk that creating millions of filters takes. A page is written sparse when that
// is under half its dense size; both forms replace the whole page, so a page can change form
// from one checkpoint to the next. Servers before this format read a sparse page as corrupt
// (DATA_LOSS for that filter), not as other bits.
//
// Thread-safety: pure functions.
#ifndef STORAGE_FORMAT_PAGE_ENCODING_H_
#define STORAGE_FORMAT_PAGE_ENCODING_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bloom/blocked_filter.h"

namespace storage {

// Page `page` of `bits` in the smaller of the two forms, into `out` (replaced). `scratch` is a
// buffer reused between calls.
void EncodePage(const bloom::BlockedBloomFilter& bits, uint64_t page, std::string& scratch,
                std::string& out);

// The same for a page given as its dense bytes (`dense`: page_size bytes, whose buffer may be
// taken over).
void EncodePageBytes(std::string& dense, std::string& out);

// ORs a stored page (either form) into page `page` of `bits`; DATA_LOSS for a value that is
// neither (wrong length, word index out of range or out of order).
absl::Status OrStoredPage(bloom::BlockedBloomFilter& bits, uint64_t page, absl::string_view value,
                          std::string& scratch);

}  // namespace storage

#endif  // STORAGE_FORMAT_PAGE_ENCODING_H_

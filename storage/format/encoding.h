// On-disk encoding of bloom-server's RocksDB data (format version 1).
//
// Column families and keys:
//   filters   name                                  -> FilterRecord (metadata, below)
//   blocks    generation:be64 sub:be32 page:be32     -> page bits (up to 16 KiB of little-endian
//                                                      words, or sparse: page_encoding.h)
//   journal   generation:be64 seq:be64               -> JournalRecord (one per Add batch)
//   default   "format_version"                       -> decimal format number
// Big-endian integers keep one filter's blocks and journal contiguous and in order, so a filter
// is deleted with two range deletions and loaded with two sequential scans.
//
// A FilterRecord is "BLMF", u16 format version, fixed-width little-endian fields, and a trailing
// XXH3-64 of everything before it. Version 2 (only for filters with a window or an idle_ttl)
// adds window, window_slices, idle_ttl, first_sub_index, last_used_micros and a slice start per
// sub-filter; a JournalRecord has a version byte and the same checksum. Version 3 (CUCKOO
// filters) is version 2 with the kind byte after the check counters; its sub-filters are the
// chain's cuckoo tables (num_blocks: buckets, hash_count: fingerprint bits, items_added: the
// copies held as of the checkpoint). A cuckoo filter's journal records hold the table changes
// of one Add or Remove (cuckoo_journal.h).
// Decoding validates lengths, ranges and the checksum and answers DATA_LOSS with the reason.
//
// Thread-safety: pure functions.
#ifndef STORAGE_FORMAT_ENCODING_H_
#define STORAGE_FORMAT_ENCODING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bloom/scalable_filter.h"

namespace storage {

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr absl::string_view kFormatVersionKey = "format_version";
// default CF: a floor for the next filter generation (recovery also takes max live + 1). Only
// servers before the generation ceiling wrote it (per creation); it is still read.
inline constexpr absl::string_view kNextGenerationKey = "next_generation";
// default CF: every generation in use is below it (FilterStore raises it, synced, before handing
// out a generation at or above it). Lets a lazy start-up skip reading every filter's record.
inline constexpr absl::string_view kGenerationCeilingKey = "generation_ceiling";

struct SubFilterRecord {
  uint64_t capacity = 0;
  double error_rate = 0;
  uint64_t num_blocks = 0;
  uint32_t hash_count = 0;
  uint64_t items_added = 0;        // as of checkpoint_seq
  int64_t slice_start_micros = 0;  // windowed filters: the slice it belongs to (window.h)
};

struct FilterRecord {
  uint64_t generation = 0;  // distinguishes successive filters of one name
  uint64_t seed = 0;
  int64_t created_at_micros = 0;
  bloom::FilterParams spec;     // normalized
  uint64_t checkpoint_seq = 0;  // journal records with seq <= this are in `blocks`
  uint64_t checks = 0;          // MightContain items checked, as of the last checkpoint
  uint64_t check_hits = 0;
  // Index of sub_filters[0]: above 0 once a windowed filter retired its oldest slices (their
  // pages were range-deleted; journal runs naming them are skipped).
  uint32_t first_sub_index = 0;
  // Filters with an idle_ttl: the last Add or MightContain, as of the last checkpoint.
  int64_t last_used_micros = 0;
  std::vector<SubFilterRecord> sub_filters;
};

std::string EncodeFilterRecord(const FilterRecord& record);
absl::StatusOr<FilterRecord> DecodeFilterRecord(absl::string_view bytes);

using Run = bloom::ScalableFilter::Run;
std::string EncodeJournalRecord(absl::Span<const Run> runs, absl::Span<const uint64_t> hashes);
// Decodes into `runs` and `hashes` (cleared first).
absl::Status DecodeJournalRecord(absl::string_view bytes, std::vector<Run>& runs,
                                 std::vector<uint64_t>& hashes);

std::string BlockKey(uint64_t generation, uint32_t sub_filter, uint32_t page);
// Smallest key of `generation` (blocks and journal alike), for range deletes and scans: its
// first kGenerationPrefixBytes bytes, which every key of that generation starts with.
inline constexpr size_t kGenerationPrefixBytes = 8;
std::string GenerationPrefix(uint64_t generation);
struct BlockKeyParts {
  uint64_t generation;
  uint32_t sub_filter;
  uint32_t page;
};
absl::StatusOr<BlockKeyParts> ParseBlockKey(absl::string_view key);

std::string JournalKey(uint64_t generation, uint64_t seq);
struct JournalKeyParts {
  uint64_t generation;
  uint64_t seq;
};
absl::StatusOr<JournalKeyParts> ParseJournalKey(absl::string_view key);

}  // namespace storage

#endif  // STORAGE_FORMAT_ENCODING_H_

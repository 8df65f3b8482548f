// A cuckoo filter's journal records: the table changes of one Add or Remove
// (bloom::CuckooChange), written to the journal family before anyone sees them (encoding.h has
// the keys; stored_filter_cuckoo.cc the write).
//
// Why values and not items: an insert moves fingerprints along a walk, so replaying an
// operation onto pages copied while writes went on would not give the same bytes. Replaying the
// values written, in order, does (cuckoo_table.h, CuckooChange).
//
// Version 3 (written): a version byte, a varint count of runs, then runs of consecutive changes
// to one table, and the XXH3-64 of everything before it:
//   run := varint table, u8 kind, varint count, payload
//   kind 0 (slots): u8 position_bits, u8 value_bits, then `count` pairs (position, value)
//     bit-packed least significant bit first, each field as wide as the run's largest needs,
//     padded to a whole byte;
//   kind 1 (stash entries): `count` x (varint position, varint value, varint bucket).
// Every add writes one slot or a few, at random positions: fixed-width packing takes about 4
// bytes per change in a 1M-item filter at 1.6% (22-bit positions, 7-bit fingerprints), where
// version 2's varints take 6 to 8, and is written in one pass without a byte loop. The WAL, the
// memtable and the flush then carry that much less.
// Version 2 (read only, from data directories and leaders written before version 3): a u32
// count of (varint table, varint position, varint value, varint stash bucket).
//
// Decoding validates lengths and ranges (positions below 2^40, fingerprints of at most 32 bits)
// and the checksum, and answers DATA_LOSS with the reason; positions are checked against their
// table when the change is applied.
//
// Thread-safety: pure functions.
#ifndef STORAGE_FORMAT_CUCKOO_JOURNAL_H_
#define STORAGE_FORMAT_CUCKOO_JOURNAL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bloom/cuckoo_table.h"
#include "bloom/filter_params.h"

namespace storage {

// The `after` values of `changes` (with the stash buckets of stash entries), in order.
std::string EncodeCuckooJournalRecord(absl::Span<const bloom::CuckooChange> changes);
// Into `changes` (cleared first): table, position, after, stash and stash_bucket.
absl::Status DecodeCuckooJournalRecord(absl::string_view bytes,
                                       std::vector<bloom::CuckooChange>& changes);
// Whether a journal record is a cuckoo filter's (by its version byte; not verified).
bool IsCuckooJournalRecord(absl::string_view bytes);

}  // namespace storage

#endif  // STORAGE_FORMAT_CUCKOO_JOURNAL_H_

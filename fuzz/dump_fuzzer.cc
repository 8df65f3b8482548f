// Fuzz target: the Import dump parser (fed in chunks of fuzzer-chosen sizes) and the metadata
// and journal record decoders (both kinds of filter, both dump versions). Nothing may crash;
// every failure must be a status.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "storage/format/cuckoo_journal.h"
#include "storage/format/dump.h"
#include "storage/format/encoding.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = data[0] % 97 + 1;  // exercise every split of the stream
  const absl::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);

  // Like the server: memory is charged before allocating, and a hostile header asking for
  // terabytes is refused here rather than by the allocator.
  uint64_t charged = 0;
  storage::DumpParser parser([&charged](uint64_t bytes, uint64_t total) {
    charged += bytes;
    if (charged > total) __builtin_trap();  // the charges add up to the total, never more
    return total <= (64u << 20) ? absl::OkStatus() : absl::ResourceExhaustedError("too big");
  });
  absl::Status status;
  for (size_t i = 0; i < input.size() && status.ok(); i += chunk) {
    status = parser.Append(input.substr(i, chunk));
  }
  absl::StatusOr<storage::DumpParser::Result> result = parser.Finish();
  if (result.ok() && result->cuckoo != nullptr) {  // a version 2 dump: a cuckoo filter
    if (result->filter != nullptr || result->cuckoo->num_tables() == 0) __builtin_trap();
    const uint64_t hash = result->cuckoo->Hash("probe");
    bool present = false;
    result->cuckoo->MightContainHashes({&hash, 1}, &present);
    result->cuckoo->CountHashes({&hash, 1});
  } else if (result.ok() && result->filter->num_sub_filters() == 0 &&
             !result->filter->spec().windowed()) {
    // Only a windowed filter whose slices all expired has no sub-filter.
    __builtin_trap();        // impossible
  } else if (result.ok()) {  // a parsed filter answers queries
    const uint64_t hash = result->filter->Hash("probe");
    bool present = false;
    result->filter->MightContainMany({&hash, 1}, &present);
  }

  storage::DecodeFilterRecord(input).status().IgnoreError();
  std::vector<storage::Run> runs;
  std::vector<uint64_t> hashes;
  storage::DecodeJournalRecord(input, runs, hashes).IgnoreError();
  std::vector<bloom::CuckooChange> changes;
  storage::DecodeCuckooJournalRecord(input, changes).IgnoreError();
  // The cuckoo journal decoder again past its checksum, which random bytes never match: a
  // record it accepts must come back the same through the encoder.
  std::string sealed(input);
  const uint64_t checksum = XXH3_64bits(sealed.data(), sealed.size());
  sealed.append(reinterpret_cast<const char*>(&checksum), sizeof(checksum));
  if (storage::DecodeCuckooJournalRecord(sealed, changes).ok() && !changes.empty()) {
    std::vector<bloom::CuckooChange> again;
    if (!storage::DecodeCuckooJournalRecord(storage::EncodeCuckooJournalRecord(changes), again)
             .ok() ||
        again.size() != changes.size()) {
      __builtin_trap();
    }
    for (size_t i = 0; i < again.size(); ++i) {
      if (again[i].table != changes[i].table || again[i].position != changes[i].position ||
          again[i].after != changes[i].after || again[i].stash != changes[i].stash ||
          (changes[i].stash && again[i].stash_bucket != changes[i].stash_bucket)) {
        __builtin_trap();
      }
    }
  }
  storage::ParseBlockKey(input).status().IgnoreError();
  storage::ParseJournalKey(input).status().IgnoreError();
  return 0;
}

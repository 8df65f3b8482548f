// The Export/Import dump of one filter: self-describing, versioned and checksummed.
//
//   "BLMD"  u16 version  u32 header length  header  bits...  u64 XXH3-64 of all before it
//
// The header is a FilterRecord (encoding.h: spec, seed, creation time, counters, and every
// sub-filter's shape, with its own checksum); the bits follow sub-filter by sub-filter, each
// num_blocks * 64 bytes of little-endian words. Version 2 holds a CUCKOO filter: its header is
// a version 3 record, and its tables' bytes (bloom/cuckoo_table.h: the bit-packed buckets and
// the stash) follow table by table. Version 1 dumps (Bloom filters) are written and read as
// before. A dump is streamed in chunks of any size.
//
// Thread-safety: DumpParser is not thread-safe (one import stream owns it).
#ifndef STORAGE_FORMAT_DUMP_H_
#define STORAGE_FORMAT_DUMP_H_

#include <xxhash.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bloom/cuckoo_filter.h"
#include "bloom/scalable_filter.h"
#include "storage/format/encoding.h"

namespace storage {

inline constexpr size_t kMaxDumpChunkBytes = 1 << 20;

// Produces the dump of `filter` (described by `record`, whose sub-filter list must match it)
// chunk by chunk, as a stream's reader asks for them.
//
// Thread-safety: not thread-safe (one export stream owns it); reads the filter's bits, which
// may be added to meanwhile (an add racing the export may or may not be in the dump).
class DumpWriter {
 public:
  // `filter` must outlive the writer, and its sub-filters listed in `record` too (see
  // StoredFilter::PinChain); sub-filters opened after the record are not dumped.
  DumpWriter(const FilterRecord& record, const bloom::ScalableFilter& filter);
  // A CUCKOO filter's dump, from a copy of it (CuckooFilter::Clone: adds move fingerprints
  // between pages, so a dump read while they go on could miss one).
  DumpWriter(const FilterRecord& record, std::unique_ptr<bloom::CuckooFilter> snapshot);
  ~DumpWriter();
  DumpWriter(const DumpWriter&) = delete;
  DumpWriter& operator=(const DumpWriter&) = delete;

  // Replaces `chunk` with the next chunk (1 to kMaxDumpChunkBytes bytes); false, with `chunk`
  // empty, once the whole dump was produced.
  bool Next(std::string& chunk);

 private:
  // The next pages of the cuckoo snapshot, into `chunk`; true once every table is written.
  bool NextCuckooPages(std::string& chunk);

  const std::string header_;
  const uint16_t version_;  // the filter kind's dump version
  const bloom::SubFilter* sub_ = nullptr;
  size_t subs_left_ = 0;  // of the record's sub-filters, sub_ included
  const std::unique_ptr<bloom::CuckooFilter> cuckoo_;
  int tables_ = 0;  // of cuckoo_
  int table_ = 0;
  uint64_t page_ = 0;
  bool header_written_ = false;
  bool finished_ = false;
  XXH3_state_t* const hash_;
};

// Streams the dump of `filter` (described by `record`, whose sub-filter list must match it) to
// `sink` in chunks of at most kMaxDumpChunkBytes. Stops early with the sink's error.
absl::Status WriteDump(const FilterRecord& record, const bloom::ScalableFilter& filter,
                       const std::function<absl::Status(absl::string_view)>& sink);
absl::Status WriteDump(const FilterRecord& record, std::unique_ptr<bloom::CuckooFilter> snapshot,
                       const std::function<absl::Status(absl::string_view)>& sink);

// Parses a dump as it arrives. Errors: INVALID_ARGUMENT for data that is not a dump of a
// version this server reads, or truncated or overlong; DATA_LOSS when a checksum fails;
// RESOURCE_EXHAUSTED when `charge_memory` refuses.
//
// Memory is charged as the bits arrive, not all at the header: a client that sends a header
// and then trickles (or nothing) holds almost no budget, and cached filters in use are not
// evicted for bytes that have not come. `charge_memory(bytes, total)` is called with bytes 0
// once the header is known (`total` is the bits' size: may a filter that large be imported at
// all?), then in steps of kChargeStepBytes (or a page, if larger) as the pages arrive, each
// before the page it covers, and with any remainder after the last page; the charges add up to
// `total`. Large filters' bits are mapped zero pages
// (bloom/blocked_filter.cc), so what is charged tracks what is resident.
class DumpParser {
 public:
  using ChargeMemory = std::function<absl::Status(uint64_t bytes, uint64_t total)>;
  // `clock` ages a windowed filter's slices; it must outlive the parser's filter.
  explicit DumpParser(ChargeMemory charge_memory,
                      const bloomtime::Clock* clock = bloomtime::Clock::Real());
  ~DumpParser();
  DumpParser(const DumpParser&) = delete;
  DumpParser& operator=(const DumpParser&) = delete;

  absl::Status Append(absl::string_view data);

  struct Result {
    FilterRecord record;                            // generation and checkpoint_seq are meaningless
    std::unique_ptr<bloom::ScalableFilter> filter;  // a BLOOM filter's; or
    std::unique_ptr<bloom::CuckooFilter> cuckoo;    // a CUCKOO filter's
  };
  // The filter, once every byte and the checksum arrived.
  absl::StatusOr<Result> Finish();
  // The dump's record, once its header arrived (for DumpHeaderReader); empty before.
  const absl::optional<FilterRecord>& header() const { return header_; }

 private:
  enum class Stage { kPreamble, kHeader, kBits, kChecksum, kDone };
  absl::Status ConsumeBits(absl::string_view& data);
  absl::Status StartBits();

  absl::Status ChargeRest();
  // The current sub-filter's (or table's) pages, the size of `page` of it, and storing it.
  uint64_t NumPages() const;
  size_t PageSize(uint64_t page) const;
  absl::Status StorePage(uint64_t page, absl::string_view data);

  ChargeMemory charge_memory_;
  uint64_t total_bytes_ = 0;    // the bits' size, from the header
  uint64_t charged_bytes_ = 0;  // of it, charged so far
  uint64_t bits_received_ = 0;  // of it, in pages complete
  // A charge is an atomic update and, on refusal, a message: one per 16 KiB page would be
  // thousands for a large filter.
  static constexpr uint64_t kChargeStepBytes = 1 << 20;
  const bloomtime::Clock* const clock_;
  XXH3_state_t* hash_;
  Stage stage_ = Stage::kPreamble;
  std::string pending_;  // bytes of the current preamble, header, page or checksum
  uint32_t header_length_ = 0;
  FilterRecord record_;
  absl::optional<FilterRecord> header_;
  uint16_t version_ = 0;
  std::unique_ptr<bloom::ScalableFilter> filter_;
  std::unique_ptr<bloom::CuckooFilter> cuckoo_;
  int sub_ = 0;
  uint64_t page_ = 0;
  absl::Status error_;  // sticky: once failed, every call answers it
};

// A dump's record (spec, seed, shapes) from its first bytes, without its bits: what a filter made
// like one that another server holds needs (a sharded deployment's Reserve `like` of another
// group's filter). Feed it chunks until record() is set; the rest of the dump is not needed.
// Thread-safety: not thread-safe.
class DumpHeaderReader {
 public:
  DumpHeaderReader();
  // OK while the header is incomplete or once it is read; the dump's error if it is bad.
  absl::Status Append(absl::string_view data);
  const absl::optional<FilterRecord>& record() const { return parser_.header(); }

 private:
  DumpParser parser_;
};

}  // namespace storage

#endif  // STORAGE_FORMAT_DUMP_H_

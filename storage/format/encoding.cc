#include "storage/format/encoding.h"

#include <xxhash.h>

#include <bit>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "bloom/cuckoo_table.h"
#include "storage/filter/filter_kind.h"

namespace storage {
namespace {

static_assert(std::endian::native == std::endian::little, "fixed-width fields are little-endian");

constexpr absl::string_view kFilterMagic = "BLMF";
constexpr uint8_t kJournalVersion = 1;
// A filter record cannot hold more sub-filters than a chain can have: one chain, or for a
// windowed filter one per unexpired slice (at most kMaxWindowSlices + 2 of them).
constexpr uint32_t kMaxSubFilterRecords = bloom::kMaxSubFilters;
constexpr uint32_t kMaxWindowedSubFilterRecords =
    bloom::kMaxSubFilters * (bloom::kMaxWindowSlices + 2);
// Version 2 records add the window, idle expiry and retired-slice fields (EncodeFilterRecord
// writes it only for filters that use them, so other records stay readable by older servers).
constexpr uint16_t kWindowedRecordVersion = 2;
// Version 3: version 2 and the filter's kind (only CUCKOO filters need it).
constexpr uint16_t kKindRecordVersion = 3;

// Records of BLOOM filters, the first kind, leave their kind out (older servers read them).
bool HasKindField(const FilterRecord& r) { return r.spec.kind != bloom::FilterKind::kBloom; }

bool NeedsVersion2(const FilterRecord& r) {
  return r.spec.windowed() || r.spec.idle_ttl != absl::ZeroDuration() || r.first_sub_index != 0 ||
         HasKindField(r);
}

class Writer {
 public:
  template <typename T>
  void Fixed(T value) {
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void Bytes(absl::string_view bytes) { out_.append(bytes.data(), bytes.size()); }
  void BigEndian(uint64_t value, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out_.push_back(static_cast<char>(value >> (8 * i)));
  }
  // Appends XXH3-64 of everything written so far.
  std::string FinishWithChecksum() {
    Fixed<uint64_t>(XXH3_64bits(out_.data(), out_.size()));
    return std::move(out_);
  }
  std::string Finish() { return std::move(out_); }
  void Reserve(size_t n) { out_.reserve(n); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  template <typename T>
  bool Fixed(T& value) {
    if (in_.size() < sizeof(T)) return false;
    std::memcpy(&value, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool Bytes(size_t n, absl::string_view& out) {
    if (in_.size() < n) return false;
    out = in_.substr(0, n);
    in_.remove_prefix(n);
    return true;
  }
  bool BigEndian(int bytes, uint64_t& value) {
    if (in_.size() < static_cast<size_t>(bytes)) return false;
    value = 0;
    for (int i = 0; i < bytes; ++i) value = (value << 8) | static_cast<uint8_t>(in_[i]);
    in_.remove_prefix(bytes);
    return true;
  }
  [[nodiscard]] size_t Remaining() const { return in_.size(); }

 private:
  absl::string_view in_;
};

// Splits off and verifies the trailing checksum; returns the payload.
absl::StatusOr<absl::string_view> VerifyChecksum(absl::string_view bytes, absl::string_view what) {
  if (bytes.size() < sizeof(uint64_t)) {
    return absl::DataLossError(absl::StrCat(what, " is truncated (", bytes.size(), " bytes)"));
  }
  const absl::string_view payload = bytes.substr(0, bytes.size() - sizeof(uint64_t));
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + payload.size(), sizeof(stored));
  if (stored != XXH3_64bits(payload.data(), payload.size())) {
    return absl::DataLossError(absl::StrCat(what, " checksum mismatch"));
  }
  return payload;
}

}  // namespace

std::string EncodeFilterRecord(const FilterRecord& r) {
  Writer w;
  const bool v2 = NeedsVersion2(r);
  w.Bytes(kFilterMagic);
  w.Fixed<uint16_t>(HasKindField(r) ? kKindRecordVersion
                    : v2            ? kWindowedRecordVersion
                                    : kFormatVersion);
  w.Fixed(r.generation);
  w.Fixed(r.seed);
  w.Fixed(r.created_at_micros);
  w.Fixed(r.spec.capacity);
  w.Fixed(r.spec.error_rate);
  w.Fixed(r.spec.expansion);
  w.Fixed<uint8_t>(r.spec.non_scaling ? 1 : 0);
  w.Fixed(r.checkpoint_seq);
  w.Fixed(r.checks);
  w.Fixed(r.check_hits);
  if (HasKindField(r)) w.Fixed(static_cast<uint8_t>(r.spec.kind));
  if (v2) {
    w.Fixed<int64_t>(absl::ToInt64Microseconds(r.spec.window));
    w.Fixed(r.spec.window_slices);
    w.Fixed<int64_t>(absl::ToInt64Microseconds(r.spec.idle_ttl));
    w.Fixed(r.first_sub_index);
    w.Fixed(r.last_used_micros);
  }
  w.Fixed(static_cast<uint32_t>(r.sub_filters.size()));
  for (const SubFilterRecord& s : r.sub_filters) {
    w.Fixed(s.capacity);
    w.Fixed(s.error_rate);
    w.Fixed(s.num_blocks);
    w.Fixed(s.hash_count);
    w.Fixed(s.items_added);
    if (v2) w.Fixed(s.slice_start_micros);
  }
  return w.FinishWithChecksum();
}

absl::StatusOr<FilterRecord> DecodeFilterRecord(absl::string_view bytes) {
  absl::StatusOr<absl::string_view> payload = VerifyChecksum(bytes, "filter metadata");
  if (!payload.ok()) return payload.status();
  Reader in(*payload);
  absl::string_view magic;
  uint16_t version = 0;
  if (!in.Bytes(kFilterMagic.size(), magic) || magic != kFilterMagic || !in.Fixed(version)) {
    return absl::DataLossError("filter metadata has no BLMF header");
  }
  if (version != kFormatVersion && version != kWindowedRecordVersion &&
      version != kKindRecordVersion) {
    return absl::DataLossError(absl::StrCat("filter metadata has format version ", version,
                                            "; this server reads versions ", kFormatVersion, " to ",
                                            kKindRecordVersion));
  }
  const bool v2 = version >= kWindowedRecordVersion;
  FilterRecord r;
  uint8_t non_scaling = 0;
  uint32_t subs = 0;
  if (!in.Fixed(r.generation) || !in.Fixed(r.seed) || !in.Fixed(r.created_at_micros) ||
      !in.Fixed(r.spec.capacity) || !in.Fixed(r.spec.error_rate) || !in.Fixed(r.spec.expansion) ||
      !in.Fixed(non_scaling) || !in.Fixed(r.checkpoint_seq) || !in.Fixed(r.checks) ||
      !in.Fixed(r.check_hits)) {
    return absl::DataLossError("filter metadata is truncated");
  }
  if (version == kKindRecordVersion) {
    uint8_t kind = 0;
    if (!in.Fixed(kind) || kind != static_cast<uint8_t>(bloom::FilterKind::kCuckoo)) {
      return absl::DataLossError("filter metadata holds an unknown filter kind");
    }
    r.spec.kind = bloom::FilterKind::kCuckoo;
  }
  if (v2) {
    int64_t window_micros = 0, idle_ttl_micros = 0;
    if (!in.Fixed(window_micros) || !in.Fixed(r.spec.window_slices) || !in.Fixed(idle_ttl_micros) ||
        !in.Fixed(r.first_sub_index) || !in.Fixed(r.last_used_micros)) {
      return absl::DataLossError("filter metadata is truncated in its window fields");
    }
    r.spec.window = absl::Microseconds(window_micros);
    r.spec.idle_ttl = absl::Microseconds(idle_ttl_micros);
  }
  if (!in.Fixed(subs)) return absl::DataLossError("filter metadata is truncated");
  r.spec.non_scaling = non_scaling != 0;
  if (absl::StatusOr<bloom::FilterParams> spec = bloom::NormalizeSpec(r.spec);
      !spec.ok() || !(*spec == r.spec)) {
    return absl::DataLossError("filter metadata holds an invalid spec");
  }
  // Only a windowed filter may have retired every sub-filter (or many at once).
  const bool windowed = r.spec.windowed();
  if ((subs == 0 && !windowed) ||
      subs > (windowed ? kMaxWindowedSubFilterRecords : kMaxSubFilterRecords) ||
      (!windowed && r.first_sub_index != 0) ||
      r.first_sub_index + uint64_t{subs} > uint64_t{std::numeric_limits<int32_t>::max()}) {
    return absl::DataLossError(absl::StrCat("filter metadata lists ", subs,
                                            " sub-filters from index ", r.first_sub_index));
  }
  r.sub_filters.resize(subs);
  int64_t previous_slice = std::numeric_limits<int64_t>::min();
  for (SubFilterRecord& s : r.sub_filters) {
    if (!in.Fixed(s.capacity) || !in.Fixed(s.error_rate) || !in.Fixed(s.num_blocks) ||
        !in.Fixed(s.hash_count) || !in.Fixed(s.items_added) ||
        (v2 && !in.Fixed(s.slice_start_micros))) {
      return absl::DataLossError("filter metadata is truncated in its sub-filter list");
    }
    if (s.slice_start_micros < previous_slice || (!windowed && s.slice_start_micros != 0)) {
      return absl::DataLossError("filter metadata lists slices out of order");
    }
    previous_slice = s.slice_start_micros;
    if (!FilterKind::Of(r.spec).ValidLayout(s)) {
      return absl::DataLossError("filter metadata holds an invalid sub-filter layout");
    }
  }
  if (in.Remaining() != 0) return absl::DataLossError("filter metadata has trailing bytes");
  return r;
}

std::string EncodeJournalRecord(absl::Span<const Run> runs, absl::Span<const uint64_t> hashes) {
  Writer w;
  w.Reserve(1 + 4 + runs.size() * 12 + hashes.size() * 8 + 8);
  w.Fixed<uint8_t>(kJournalVersion);
  w.Fixed(static_cast<uint32_t>(runs.size()));
  for (const Run& run : runs) {
    w.Fixed(static_cast<uint32_t>(run.sub_filter));
    w.Fixed(run.count);
  }
  w.Bytes(absl::string_view(reinterpret_cast<const char*>(hashes.data()), hashes.size() * 8));
  return w.FinishWithChecksum();
}

absl::Status DecodeJournalRecord(absl::string_view bytes, std::vector<Run>& runs,
                                 std::vector<uint64_t>& hashes) {
  runs.clear();
  hashes.clear();
  absl::StatusOr<absl::string_view> payload = VerifyChecksum(bytes, "journal record");
  if (!payload.ok()) return payload.status();
  Reader in(*payload);
  uint8_t version = 0;
  uint32_t num_runs = 0;
  if (!in.Fixed(version) || version != kJournalVersion || !in.Fixed(num_runs) ||
      num_runs > bloom::kMaxSubFilters) {
    return absl::DataLossError("journal record has a bad header");
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < num_runs; ++i) {
    uint32_t sub = 0;
    uint64_t count = 0;
    // Windowed filters keep counting sub-filter indexes past kMaxSubFilters.
    if (!in.Fixed(sub) || !in.Fixed(count) ||
        sub > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      return absl::DataLossError("journal record has a bad run");
    }
    runs.push_back({static_cast<int>(sub), count});
    total += count;
  }
  if (in.Remaining() != total * 8) {
    return absl::DataLossError(
        absl::StrCat("journal record holds ", in.Remaining(), " hash bytes for ", total, " items"));
  }
  hashes.resize(total);
  absl::string_view raw;
  in.Bytes(total * 8, raw);
  std::memcpy(hashes.data(), raw.data(), raw.size());
  return absl::OkStatus();
}

std::string GenerationPrefix(uint64_t generation) {
  Writer w;
  w.BigEndian(generation, kGenerationPrefixBytes);
  return w.Finish();
}

std::string BlockKey(uint64_t generation, uint32_t sub_filter, uint32_t page) {
  Writer w;
  w.BigEndian(generation, 8);
  w.BigEndian(sub_filter, 4);
  w.BigEndian(page, 4);
  return w.Finish();
}

absl::StatusOr<BlockKeyParts> ParseBlockKey(absl::string_view key) {
  Reader in(key);
  uint64_t generation, sub, page;
  if (key.size() != 16 || !in.BigEndian(8, generation) || !in.BigEndian(4, sub) ||
      !in.BigEndian(4, page)) {
    return absl::DataLossError(absl::StrCat("bad block key of ", key.size(), " bytes"));
  }
  return BlockKeyParts{generation, static_cast<uint32_t>(sub), static_cast<uint32_t>(page)};
}

std::string JournalKey(uint64_t generation, uint64_t seq) {
  Writer w;
  w.BigEndian(generation, 8);
  w.BigEndian(seq, 8);
  return w.Finish();
}

absl::StatusOr<JournalKeyParts> ParseJournalKey(absl::string_view key) {
  Reader in(key);
  uint64_t generation, seq;
  if (key.size() != 16 || !in.BigEndian(8, generation) || !in.BigEndian(8, seq)) {
    return absl::DataLossError(absl::StrCat("bad journal key of ", key.size(), " bytes"));
  }
  return JournalKeyParts{generation, seq};
}

}  // namespace storage

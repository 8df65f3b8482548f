#include "storage/format/dump.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "storage/filter/stored_filter.h"

namespace storage {
namespace {

constexpr absl::string_view kDumpMagic = "BLMD";
constexpr size_t kPreambleBytes = 4 + 2 + 4;
// A FilterRecord with the maximum number of sub-filters is far below this.
constexpr uint32_t kMaxHeaderBytes = 64 << 10;

// The version a dump of `record`'s filter carries: its kind's (filter_kind.h).
uint16_t DumpVersionOf(const FilterRecord& record) {
  return FilterKind::Of(record.spec).dump_version();
}

// Whether this server reads dumps of `version`: those of its filter kinds.
bool KnownDumpVersion(uint16_t version) {
  for (const bloom::FilterKind kind : {bloom::FilterKind::kBloom, bloom::FilterKind::kCuckoo}) {
    if (FilterKind::Of(kind).dump_version() == version) return true;
  }
  return false;
}

template <typename T>
void AppendFixed(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

DumpWriter::DumpWriter(const FilterRecord& record, const bloom::ScalableFilter& filter)
    : header_(EncodeFilterRecord(record)),
      version_(DumpVersionOf(record)),
      sub_(record.sub_filters.empty() ? nullptr : filter.sub_filter(record.first_sub_index)),
      subs_left_(sub_ == nullptr ? 0 : record.sub_filters.size()),
      hash_(XXH3_createState()) {
  XXH3_64bits_reset(hash_);
}

DumpWriter::DumpWriter(const FilterRecord& record, std::unique_ptr<bloom::CuckooFilter> snapshot)
    : header_(EncodeFilterRecord(record)),
      version_(DumpVersionOf(record)),
      cuckoo_(std::move(snapshot)),
      tables_(static_cast<int>(record.sub_filters.size())),
      hash_(XXH3_createState()) {
  XXH3_64bits_reset(hash_);
}

DumpWriter::~DumpWriter() { XXH3_freeState(hash_); }

bool DumpWriter::NextCuckooPages(std::string& chunk) {
  for (; table_ < tables_; ++table_, page_ = 0) {
    for (; page_ < cuckoo_->NumPages(table_); ++page_) {
      std::string page = cuckoo_->ReadPage(table_, page_);
      if (chunk.size() + page.size() > kMaxDumpChunkBytes) return false;
      chunk += page;
    }
  }
  return true;
}

bool DumpWriter::Next(std::string& chunk) {
  chunk.clear();
  if (finished_) return false;
  if (!header_written_) {
    chunk.append(kDumpMagic.data(), kDumpMagic.size());
    AppendFixed<uint16_t>(chunk, version_);
    AppendFixed<uint32_t>(chunk, static_cast<uint32_t>(header_.size()));
    chunk += header_;
    header_written_ = true;
  }
  // Whole pages while they fit (a page is at most 16 KiB; a chunk at most 1 MiB).
  while (sub_ != nullptr) {
    const bloom::BlockedBloomFilter& bits = sub_->bits();
    if (page_ >= bits.num_pages()) {
      sub_ = --subs_left_ == 0 ? nullptr : sub_->next();
      page_ = 0;
      continue;
    }
    const uint64_t size = bits.page_size(page_);
    if (chunk.size() + size > kMaxDumpChunkBytes) break;
    const size_t at = chunk.size();
    chunk.resize(at + size);
    bits.ReadPage(page_, chunk.data() + at);
    ++page_;
  }
  const bool all_pages = cuckoo_ != nullptr ? NextCuckooPages(chunk) : sub_ == nullptr;
  XXH3_64bits_update(hash_, chunk.data(), chunk.size());
  if (all_pages && chunk.size() + sizeof(uint64_t) <= kMaxDumpChunkBytes) {
    // The checksum covers every byte before it, this chunk's included.
    AppendFixed<uint64_t>(chunk, XXH3_64bits_digest(hash_));
    finished_ = true;
  }
  return true;
}

absl::Status WriteDump(const FilterRecord& record, const bloom::ScalableFilter& filter,
                       const std::function<absl::Status(absl::string_view)>& sink) {
  DumpWriter writer(record, filter);
  std::string chunk;
  chunk.reserve(kMaxDumpChunkBytes);
  while (writer.Next(chunk)) {
    if (absl::Status status = sink(chunk); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status WriteDump(const FilterRecord& record, std::unique_ptr<bloom::CuckooFilter> snapshot,
                       const std::function<absl::Status(absl::string_view)>& sink) {
  DumpWriter writer(record, std::move(snapshot));
  std::string chunk;
  chunk.reserve(kMaxDumpChunkBytes);
  while (writer.Next(chunk)) {
    if (absl::Status status = sink(chunk); !status.ok()) return status;
  }
  return absl::OkStatus();
}

DumpParser::DumpParser(ChargeMemory charge_memory, const bloomtime::Clock* clock)
    : charge_memory_(std::move(charge_memory)), clock_(clock), hash_(XXH3_createState()) {
  XXH3_64bits_reset(hash_);
}

DumpParser::~DumpParser() { XXH3_freeState(hash_); }

absl::Status DumpParser::Append(absl::string_view data) {
  while (error_.ok() && !data.empty()) {
    // Takes up to `want` bytes into pending_; true once it holds them all.
    auto gather = [&](size_t want) {
      const size_t take = std::min(want - pending_.size(), data.size());
      pending_.append(data.data(), take);
      if (stage_ != Stage::kChecksum) XXH3_64bits_update(hash_, data.data(), take);
      data.remove_prefix(take);
      return pending_.size() == want;
    };
    switch (stage_) {
      case Stage::kPreamble: {
        if (!gather(kPreambleBytes)) break;
        uint16_t& version = version_;
        std::memcpy(&version, pending_.data() + 4, 2);
        std::memcpy(&header_length_, pending_.data() + 6, 4);
        if (absl::string_view(pending_).substr(0, 4) != kDumpMagic) {
          error_ = absl::InvalidArgumentError("not a bloom-server dump (bad magic bytes)");
        } else if (!KnownDumpVersion(version)) {
          error_ = absl::InvalidArgumentError(
              absl::StrCat("dump format version ", version, " is not supported (this server reads ",
                           FilterKind::Of(bloom::FilterKind::kBloom).dump_version(), " and ",
                           FilterKind::Of(bloom::FilterKind::kCuckoo).dump_version(), ")"));
        } else if (header_length_ == 0 || header_length_ > kMaxHeaderBytes) {
          error_ = absl::InvalidArgumentError(
              absl::StrCat("dump header length ", header_length_, " is invalid"));
        }
        pending_.clear();
        stage_ = Stage::kHeader;
        break;
      }
      case Stage::kHeader: {
        if (!gather(header_length_)) break;
        absl::StatusOr<FilterRecord> record = DecodeFilterRecord(pending_);
        pending_.clear();
        if (!record.ok()) {
          error_ = absl::DataLossError(absl::StrCat("dump header: ", record.status().message()));
          break;
        }
        record_ = *std::move(record);
        header_ = record_;
        if (const FilterKind& kind = FilterKind::Of(record_.spec);
            kind.dump_version() != version_) {
          error_ = absl::InvalidArgumentError(
              absl::StrCat("a version ", version_, " dump cannot hold a ", kind.name(),
                           " filter, which its header describes (its dumps are version ",
                           kind.dump_version(), ")"));
          break;
        }
        error_ = StartBits();
        break;
      }
      case Stage::kBits:
        error_ = ConsumeBits(data);
        break;
      case Stage::kChecksum: {
        if (!gather(sizeof(uint64_t))) break;
        uint64_t stored;
        std::memcpy(&stored, pending_.data(), sizeof(stored));
        if (stored != XXH3_64bits_digest(hash_)) {
          error_ = absl::DataLossError("dump checksum mismatch: the dump is corrupt");
        }
        stage_ = Stage::kDone;
        break;
      }
      case Stage::kDone:
        error_ = absl::InvalidArgumentError(
            absl::StrCat("dump has ", data.size(), " bytes after its checksum"));
        break;
    }
  }
  return error_;
}

absl::Status DumpParser::StartBits() {
  total_bytes_ = RecordBitsBytes(record_);
  if (absl::Status admitted = charge_memory_(0, total_bytes_); !admitted.ok()) return admitted;
  absl::StatusOr<BuiltFilter> built =
      FilterKind::Of(record_.spec).Build(record_, clock_, /*drop_expired=*/false);
  // A header that describes no filter its kind can build is the dump's fault, not the disk's.
  if (absl::IsDataLoss(built.status())) {
    return absl::InvalidArgumentError(built.status().message());
  }
  if (!built.ok()) return built.status();
  filter_ = std::move(built->chain);
  cuckoo_ = std::move(built->cuckoo);
  sub_ = 0;
  page_ = 0;
  // A windowed filter whose slices all expired has no bits.
  if (!record_.sub_filters.empty()) {
    stage_ = Stage::kBits;
    return absl::OkStatus();
  }
  stage_ = Stage::kChecksum;
  return ChargeRest();
}

absl::Status DumpParser::ChargeRest() {
  if (charged_bytes_ >= total_bytes_) return absl::OkStatus();
  const uint64_t rest = total_bytes_ - charged_bytes_;
  charged_bytes_ = total_bytes_;
  return charge_memory_(rest, total_bytes_);
}

uint64_t DumpParser::NumPages() const {
  if (cuckoo_ != nullptr) return cuckoo_->NumPages(sub_);
  return filter_->sub_filter(static_cast<int>(record_.first_sub_index) + sub_)->bits().num_pages();
}

size_t DumpParser::PageSize(uint64_t page) const {
  if (cuckoo_ != nullptr) {
    // Cannot fail: the table exists, so its spec gives it.
    const uint64_t bytes = cuckoo_->LayoutOf(sub_)->bytes();
    return static_cast<size_t>(std::min<uint64_t>(bloom::CuckooTable::kPageBytes,
                                                  bytes - page * bloom::CuckooTable::kPageBytes));
  }
  return filter_->sub_filter(static_cast<int>(record_.first_sub_index) + sub_)
      ->bits()
      .page_size(page);
}

absl::Status DumpParser::StorePage(uint64_t page, absl::string_view data) {
  if (cuckoo_ != nullptr) return cuckoo_->LoadPage(sub_, page, data);
  return filter_->sub_filter(static_cast<int>(record_.first_sub_index) + sub_)
      ->bits()
      .OrPage(page, data);
}

absl::Status DumpParser::ConsumeBits(absl::string_view& data) {
  const size_t want = PageSize(page_);
  if (pending_.empty() && charged_bytes_ < total_bytes_ &&
      charged_bytes_ < bits_received_ + want) {  // a page begins uncharged
    const uint64_t step = std::min<uint64_t>(std::max<uint64_t>(want, kChargeStepBytes),
                                             total_bytes_ - charged_bytes_);
    charged_bytes_ += step;
    if (absl::Status charged = charge_memory_(step, total_bytes_); !charged.ok()) return charged;
  }
  const size_t take = std::min(want - pending_.size(), data.size());
  XXH3_64bits_update(hash_, data.data(), take);
  pending_.append(data.data(), take);
  data.remove_prefix(take);
  if (pending_.size() < want) return absl::OkStatus();
  if (absl::Status s = StorePage(page_, pending_); !s.ok()) return s;
  bits_received_ += want;
  pending_.clear();
  if (++page_ == NumPages()) {
    page_ = 0;
    if (++sub_ == static_cast<int>(record_.sub_filters.size())) {
      stage_ = Stage::kChecksum;
      return ChargeRest();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DumpParser::Result> DumpParser::Finish() {
  if (!error_.ok()) return error_;
  if (stage_ != Stage::kDone) {
    return absl::InvalidArgumentError("dump is truncated: the stream ended before its checksum");
  }
  return Result{std::move(record_), std::move(filter_), std::move(cuckoo_)};
}

DumpHeaderReader::DumpHeaderReader()
    // The header read, the parser asks to charge the bits: refused, as they are not wanted.
    : parser_([](uint64_t, uint64_t) { return absl::CancelledError("only the header is read"); }) {}

absl::Status DumpHeaderReader::Append(absl::string_view data) {
  if (record().has_value()) return absl::OkStatus();
  absl::Status appended = parser_.Append(data);
  return record().has_value() ? absl::OkStatus() : appended;
}

}  // namespace storage

#include "storage/format/page_encoding.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace storage {
namespace {

constexpr char kSparseMarker = '\x01';
constexpr size_t kSparseEntryBytes = 2 + 8;  // u16 word index, u64 word

uint64_t LoadWord(const char* at) {
  uint64_t word;
  std::memcpy(&word, at, 8);  // little-endian host (static_assert in blocked_filter.cc)
  return word;
}

}  // namespace

void EncodePage(const bloom::BlockedBloomFilter& bits, uint64_t page, std::string& scratch,
                std::string& out) {
  scratch.resize(bits.page_size(page));
  bits.ReadPage(page, scratch.data());
  EncodePageBytes(scratch, out);
}

void EncodePageBytes(std::string& dense, std::string& out) {
  const size_t size = dense.size();
  const size_t words = size / 8;
  // Sparse only while under half the dense size: count nonzero words up to that bound.
  const size_t max_sparse_words = (size / 2 - 1) / kSparseEntryBytes;
  size_t nonzero = 0;
  for (size_t i = 0; i < words && nonzero <= max_sparse_words; ++i) {
    nonzero += LoadWord(dense.data() + i * 8) != 0;
  }
  if (nonzero > max_sparse_words || words > 0xffff + 1) {
    out.swap(dense);
    return;
  }
  out.clear();
  out.reserve(1 + nonzero * kSparseEntryBytes);
  out.push_back(kSparseMarker);
  for (size_t i = 0; i < words; ++i) {
    const uint64_t word = LoadWord(dense.data() + i * 8);
    if (word == 0) continue;
    const char index[2] = {static_cast<char>(i & 0xff), static_cast<char>(i >> 8)};
    out.append(index, 2);
    out.append(dense.data() + i * 8, 8);
  }
}

absl::Status OrStoredPage(bloom::BlockedBloomFilter& bits, uint64_t page, absl::string_view value,
                          std::string& scratch) {
  if (page >= bits.num_pages()) {
    return absl::DataLossError(
        absl::StrCat("page ", page, " does not fit a filter of ", bits.num_pages(), " pages"));
  }
  const size_t size = bits.page_size(page);
  if (value.size() == size) return bits.OrPage(page, value);
  if (value.size() % 2 == 0 || value[0] != kSparseMarker ||
      (value.size() - 1) % kSparseEntryBytes != 0) {
    return absl::DataLossError(absl::StrCat("page ", page, " of ", value.size(),
                                            " bytes is neither ", size,
                                            " bytes of bits nor a sparse page"));
  }
  scratch.assign(size, '\0');
  int64_t previous = -1;
  for (size_t at = 1; at < value.size(); at += kSparseEntryBytes) {
    const size_t index = static_cast<uint8_t>(value[at]) |
                         static_cast<size_t>(static_cast<uint8_t>(value[at + 1])) << 8;
    if (index * 8 >= size || static_cast<int64_t>(index) <= previous) {
      return absl::DataLossError(absl::StrCat("sparse page ", page, " names word ", index,
                                              " out of range or out of order"));
    }
    previous = static_cast<int64_t>(index);
    std::memcpy(scratch.data() + index * 8, value.data() + at + 2, 8);
  }
  return bits.OrPage(page, scratch);
}

}  // namespace storage

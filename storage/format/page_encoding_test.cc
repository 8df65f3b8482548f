#include "storage/format/page_encoding.h"

#include <memory>
#include <random>
#include <string>

#include "bloom/blocked_filter.h"
#include "bloom/sizing.h"
#include "gtest/gtest.h"

namespace storage {
namespace {

std::unique_ptr<bloom::BlockedBloomFilter> NewBits(uint64_t capacity) {
  return *bloom::BlockedBloomFilter::Create(*bloom::ChooseLayout(capacity, 0.01));
}

std::string Page(const bloom::BlockedBloomFilter& bits, uint64_t page) {
  std::string bytes(bits.page_size(page), '\0');
  bits.ReadPage(page, bytes.data());
  return bytes;
}

// Every page of filters from empty to full goes through either form and comes back bit for bit;
// the sparse form is the one written while it is under half the dense size.
TEST(PageEncodingTest, RoundTripsAtEveryFillAndPicksTheSmallerForm) {
  std::mt19937_64 random(11);
  int sparse_pages = 0;
  int dense_pages = 0;
  // 1000: one short page (1,472 bytes); 30000: three pages, the last one short.
  for (uint64_t capacity : {uint64_t{1000}, uint64_t{30000}}) {
    for (uint64_t items : {uint64_t{0}, uint64_t{1}, uint64_t{5}, capacity / 20, capacity}) {
      auto bits = NewBits(capacity);
      for (uint64_t i = 0; i < items; ++i) bits->Add(random());
      std::string scratch;
      std::string encoded;
      auto copy = NewBits(capacity);
      for (uint64_t page = 0; page < bits->num_pages(); ++page) {
        EncodePage(*bits, page, scratch, encoded);
        const size_t dense_size = bits->page_size(page);
        if (encoded.size() == dense_size) {
          ++dense_pages;
        } else {
          ++sparse_pages;
          EXPECT_LT(encoded.size(), dense_size / 2) << capacity << " " << items << " " << page;
          EXPECT_EQ(encoded.size() % 2, 1u);
        }
        if (items <= 1) {
          EXPECT_LE(encoded.size(), 1u + bits->layout().hash_count * 10) << "k words at most";
        }
        if (items == capacity) {
          EXPECT_EQ(encoded.size(), dense_size) << "a full page is dense";
        }
        ASSERT_TRUE(OrStoredPage(*copy, page, encoded, scratch).ok());
        EXPECT_EQ(Page(*copy, page), Page(*bits, page)) << capacity << " " << items << " " << page;
      }
      EXPECT_EQ(copy->set_bits(), bits->set_bits());
    }
  }
  EXPECT_GT(sparse_pages, 0);
  EXPECT_GT(dense_pages, 0);
}

// A page stored dense by an older server and one stored sparse read the same; a later
// checkpoint may store a page in the other form.
TEST(PageEncodingTest, DenseAndSparseFormsOfOnePageAgree) {
  auto bits = NewBits(1000);
  bits->Add(0x1234567890abcdefULL);
  bits->Add(0xfedcba0987654321ULL);
  std::string scratch;
  std::string sparse;
  EncodePage(*bits, 0, scratch, sparse);
  ASSERT_LT(sparse.size(), bits->page_size(0));
  auto from_dense = NewBits(1000);
  auto from_sparse = NewBits(1000);
  ASSERT_TRUE(OrStoredPage(*from_dense, 0, Page(*bits, 0), scratch).ok());
  ASSERT_TRUE(OrStoredPage(*from_sparse, 0, sparse, scratch).ok());
  EXPECT_EQ(Page(*from_dense, 0), Page(*from_sparse, 0));
  EXPECT_TRUE(from_sparse->MightContain(0x1234567890abcdefULL));
  EXPECT_TRUE(from_sparse->MightContain(0xfedcba0987654321ULL));
}

TEST(PageEncodingTest, DamagedValuesAreDataLoss) {
  auto bits = NewBits(1000);
  std::string scratch;
  auto expect_data_loss = [&](const std::string& value, uint64_t page = 0) {
    const absl::Status status = OrStoredPage(*bits, page, value, scratch);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  };
  std::string word(8, '\x01');
  const size_t words = bits->page_size(0) / 8;
  auto index = [](size_t i) {
    return std::string{static_cast<char>(i & 0xff), static_cast<char>(i >> 8)};
  };
  expect_data_loss(std::string(64, '\0'));  // even, not the page size
  expect_data_loss(std::string("\x02", 1) + std::string("\x00\x00", 2) + word);  // marker
  expect_data_loss(std::string("\x01\x00", 2) + word);                           // truncated entry
  expect_data_loss("\x01" + index(words) + word);  // one past the last word
  expect_data_loss(std::string("\x01\x05\x00", 3) + word + std::string("\x05\x00", 2) + word);
  expect_data_loss(std::string("\x01\x05\x00", 3) + word + std::string("\x04\x00", 2) + word);
  expect_data_loss(std::string("\x01\x00\x00", 3) + word, /*page=*/1);  // no page 1
  EXPECT_EQ(bits->set_bits(), 0u) << "nothing of a damaged value is applied";
  // The well-formed ones: the empty sparse page, and word 5 and the last word.
  EXPECT_TRUE(OrStoredPage(*bits, 0, std::string("\x01", 1), scratch).ok());
  ASSERT_TRUE(
      OrStoredPage(*bits, 0, "\x01" + index(5) + word + index(words - 1) + word, scratch).ok());
  EXPECT_EQ(bits->set_bits(), 16u);
}

}  // namespace
}  // namespace storage

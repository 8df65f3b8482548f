#include "storage/format/encoding.h"

#include "gtest/gtest.h"

namespace storage {
namespace {

FilterRecord SampleRecord() {
  FilterRecord r;
  r.generation = 7;
  r.seed = 0xdeadbeefcafef00dULL;
  r.created_at_micros = 1'700'000'000'000'000;
  r.spec = {1000, 0.01, 2, false};
  r.checkpoint_seq = 42;
  r.checks = 10;
  r.check_hits = 3;
  r.sub_filters = {{1000, 0.005, 19, 7, 900}, {2000, 0.0025, 40, 8, 12}};
  return r;
}

TEST(FilterRecordTest, RoundTrips) {
  const FilterRecord in = SampleRecord();
  absl::StatusOr<FilterRecord> out = DecodeFilterRecord(EncodeFilterRecord(in));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->generation, in.generation);
  EXPECT_EQ(out->seed, in.seed);
  EXPECT_EQ(out->created_at_micros, in.created_at_micros);
  EXPECT_EQ(out->spec, in.spec);
  EXPECT_EQ(out->checkpoint_seq, in.checkpoint_seq);
  EXPECT_EQ(out->checks, in.checks);
  EXPECT_EQ(out->check_hits, in.check_hits);
  ASSERT_EQ(out->sub_filters.size(), 2u);
  EXPECT_EQ(out->sub_filters[1].num_blocks, 40u);
  EXPECT_EQ(out->sub_filters[1].hash_count, 8u);
  EXPECT_EQ(out->sub_filters[0].items_added, 900u);
  EXPECT_DOUBLE_EQ(out->sub_filters[1].error_rate, 0.0025);
}

TEST(FilterRecordTest, EveryTruncationAndBitFlipIsDataLoss) {
  const std::string bytes = EncodeFilterRecord(SampleRecord());
  for (size_t len = 0; len < bytes.size(); ++len) {
    EXPECT_EQ(DecodeFilterRecord(bytes.substr(0, len)).status().code(), absl::StatusCode::kDataLoss)
        << len;
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] ^= 0x10;
    EXPECT_EQ(DecodeFilterRecord(flipped).status().code(), absl::StatusCode::kDataLoss) << i;
  }
}

TEST(JournalRecordTest, RoundTripsAndRejectsDamage) {
  const std::vector<storage::Run> runs = {{0, 2}, {1, 1}};
  const std::vector<uint64_t> hashes = {1, 2, 0xffffffffffffffffULL};
  const std::string bytes = EncodeJournalRecord(runs, hashes);
  EXPECT_EQ(bytes.size(), 1 + 4 + 2 * 12 + 3 * 8 + 8u);
  std::vector<storage::Run> runs_out;
  std::vector<uint64_t> hashes_out;
  ASSERT_TRUE(DecodeJournalRecord(bytes, runs_out, hashes_out).ok());
  EXPECT_EQ(hashes_out, hashes);
  ASSERT_EQ(runs_out.size(), 2u);
  EXPECT_EQ(runs_out[1].sub_filter, 1);
  EXPECT_EQ(runs_out[0].count, 2u);
  for (size_t len = 0; len < bytes.size(); ++len) {
    EXPECT_FALSE(DecodeJournalRecord(bytes.substr(0, len), runs_out, hashes_out).ok()) << len;
  }
}

TEST(KeysTest, SortByGenerationThenPosition) {
  EXPECT_LT(BlockKey(1, 0, 5), BlockKey(1, 1, 0));
  EXPECT_LT(BlockKey(1, 9, 9), BlockKey(2, 0, 0));
  EXPECT_LT(BlockKey(255, 0, 0), BlockKey(256, 0, 0));  // big-endian, not little
  EXPECT_LE(GenerationPrefix(3), BlockKey(3, 0, 0));
  EXPECT_LT(BlockKey(3, 0xffffffff, 0xffffffff), GenerationPrefix(4));
  EXPECT_LT(JournalKey(3, 0xffffffffffffffffULL), GenerationPrefix(4));
  absl::StatusOr<BlockKeyParts> block = ParseBlockKey(BlockKey(9, 2, 300));
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(block->generation, 9u);
  EXPECT_EQ(block->sub_filter, 2u);
  EXPECT_EQ(block->page, 300u);
  absl::StatusOr<JournalKeyParts> journal = ParseJournalKey(JournalKey(9, 1ULL << 40));
  ASSERT_TRUE(journal.ok());
  EXPECT_EQ(journal->seq, 1ULL << 40);
  EXPECT_FALSE(ParseBlockKey("short").ok());
  EXPECT_FALSE(ParseJournalKey("short").ok());
}

}  // namespace
}  // namespace storage

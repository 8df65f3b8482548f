#include <xxhash.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/format/cuckoo_journal.h"

namespace storage {
namespace {

using bloom::CuckooChange;

std::string Seal(std::string payload) {
  const uint64_t checksum = XXH3_64bits(payload.data(), payload.size());
  payload.append(reinterpret_cast<const char*>(&checksum), sizeof(checksum));
  return payload;
}

void PutVarint(std::string& out, uint64_t value) {
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7f) | 0x80));
  out.push_back(static_cast<char>(value));
}

void ExpectSameChanges(const std::vector<CuckooChange>& decoded,
                       const std::vector<CuckooChange>& written) {
  ASSERT_EQ(decoded.size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(decoded[i].table, written[i].table);
    EXPECT_EQ(decoded[i].position, written[i].position);
    EXPECT_EQ(decoded[i].after, written[i].after);
    EXPECT_EQ(decoded[i].stash, written[i].stash);
    EXPECT_EQ(decoded[i].stash_bucket, written[i].stash ? written[i].stash_bucket : 0);
  }
}

TEST(CuckooJournalEncodingTest, EveryChangeComesBackInItsOrder) {
  std::mt19937_64 random(7);
  std::vector<CuckooChange> written;
  for (int i = 0; i < 5000; ++i) {
    CuckooChange change;
    change.table = static_cast<uint32_t>(i / 1000);  // runs of one table, as adds make them
    // Table 3 has the widest positions and fingerprints: 39 + 32 bits, packed as two fields.
    const int position_bits = change.table == 3 ? 39 : 10 + 4 * static_cast<int>(change.table);
    const int value_bits = change.table == 3 ? 32 : 7 + static_cast<int>(change.table);
    change.position = random() >> (64 - position_bits);
    change.after = static_cast<uint32_t>(random() >> (64 - value_bits));
    change.before = 1;                  // not journalled
    change.stash_bucket = random();     // journalled for stash entries only
    change.stash = random() % 97 == 0;  // a few stash entries amid the slots
    written.push_back(change);
  }
  std::vector<CuckooChange> decoded;
  ASSERT_TRUE(DecodeCuckooJournalRecord(EncodeCuckooJournalRecord(written), decoded).ok());
  ExpectSameChanges(decoded, written);
}

TEST(CuckooJournalEncodingTest, AChangeToAMillionItemFilterTakesAboutFourBytes) {
  // A 1M-item filter at 1.6%: 4.2M slots (22-bit positions), 7-bit fingerprints.
  std::mt19937_64 random(11);
  std::vector<CuckooChange> written(1200);
  for (CuckooChange& change : written) {
    change.position = random() % (uint64_t{1} << 22);
    change.after = static_cast<uint32_t>(random() % 127 + 1);
  }
  const std::string record = EncodeCuckooJournalRecord(written);
  EXPECT_LE(record.size(), written.size() * 29 / 8 + 24);
  std::vector<CuckooChange> decoded;
  ASSERT_TRUE(DecodeCuckooJournalRecord(record, decoded).ok());
  ExpectSameChanges(decoded, written);
}

TEST(CuckooJournalEncodingTest, RecordsOfTheVarintVersionStillDecode) {
  std::string payload(1, '\2');
  const uint32_t count = 2;
  payload.append(reinterpret_cast<const char*>(&count), sizeof(count));
  for (uint64_t value : {0, 1234567, 513, 0}) PutVarint(payload, value);  // table 0, a slot
  for (uint64_t value : {1, 40, 77, 300}) PutVarint(payload, value);      // table 1, the stash
  const std::string record = Seal(payload);
  EXPECT_TRUE(IsCuckooJournalRecord(record));
  std::vector<CuckooChange> decoded;
  ASSERT_TRUE(DecodeCuckooJournalRecord(record, decoded).ok());
  ASSERT_EQ(decoded.size(), 2u);
  EXPECT_EQ(decoded[0].position, 1234567u);
  EXPECT_EQ(decoded[0].after, 513u);
  EXPECT_EQ(decoded[1].table, 1u);
  EXPECT_EQ(decoded[1].position, 40u);
  EXPECT_EQ(decoded[1].after, 77u);
  EXPECT_EQ(decoded[1].stash_bucket, 300u);

  std::string too_far(1, '\2');
  const uint32_t one = 1;
  too_far.append(reinterpret_cast<const char*>(&one), sizeof(one));
  for (uint64_t value : {uint64_t{0}, uint64_t{1} << 40, uint64_t{5}, uint64_t{0}}) {
    PutVarint(too_far, value);
  }
  EXPECT_EQ(DecodeCuckooJournalRecord(Seal(too_far), decoded).code(), absl::StatusCode::kDataLoss);
}

TEST(CuckooJournalEncodingTest, BloomJournalRecordsAreNotCuckooRecords) {
  EXPECT_TRUE(IsCuckooJournalRecord(EncodeCuckooJournalRecord({})));
  EXPECT_FALSE(IsCuckooJournalRecord(std::string(1, '\1')));
  EXPECT_FALSE(IsCuckooJournalRecord(""));
}

TEST(CuckooJournalEncodingTest, DamagedRecordsAreDataLoss) {
  std::vector<CuckooChange> written(10);
  for (size_t i = 0; i < written.size(); ++i) written[i].position = i * 1000;
  const std::string good = EncodeCuckooJournalRecord(written);
  std::vector<CuckooChange> decoded;
  auto code_of = [&decoded](const std::string& record) {
    const absl::StatusCode code = DecodeCuckooJournalRecord(record, decoded).code();
    EXPECT_TRUE(decoded.empty()) << "a refused record leaves no changes";
    return code;
  };
  std::string flipped = good;
  flipped[5] ^= 1;
  EXPECT_EQ(code_of(flipped), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code_of(good.substr(0, 6)), absl::StatusCode::kDataLoss);

  // Past the checksum: version 3, one run of table 0, then what follows.
  auto run = [](absl::string_view rest) {
    return Seal(absl::StrCat(absl::string_view("\3\1\0", 3), rest));
  };
  EXPECT_EQ(code_of(run(std::string("\0\1\0\7\xff", 5))), absl::StatusCode::kDataLoss)
      << "0-bit positions";
  EXPECT_EQ(code_of(run(std::string("\0\1\7\41\xff\xff\xff\xff\xff", 9))),
            absl::StatusCode::kDataLoss)
      << "33-bit values";
  EXPECT_EQ(code_of(run(std::string("\0\x7f\7\7\xff", 5))), absl::StatusCode::kDataLoss)
      << "127 changes in 1 byte";
  EXPECT_EQ(code_of(run(std::string("\2\1\1\1\1", 5))), absl::StatusCode::kDataLoss)
      << "a run of an unknown kind";
  EXPECT_EQ(code_of(run(std::string("\0\1\7\7\xff\0\0", 7))), absl::StatusCode::kDataLoss)
      << "a trailing byte";
  EXPECT_EQ(code_of(run(std::string("\0\1\51\7\0\0\0\0\0\0", 10))), absl::StatusCode::kDataLoss)
      << "41-bit positions";
  EXPECT_EQ(code_of(Seal(std::string("\4\0", 2))), absl::StatusCode::kDataLoss)
      << "an unknown version";
  EXPECT_EQ(code_of(Seal(std::string("\3\1\x80\x80\x80\x80\x01\0\1\7\7\xff", 12))),
            absl::StatusCode::kDataLoss)
      << "a table past the chain";

  // And the smallest valid run: one change, position 3 and value 2, of 7 bits each,
  // least significant bit first.
  ASSERT_TRUE(DecodeCuckooJournalRecord(run(std::string("\0\1\7\7\x03\x01", 6)), decoded).ok());
  ASSERT_EQ(decoded.size(), 1u);
  EXPECT_EQ(decoded[0].position, 3u);
  EXPECT_EQ(decoded[0].after, 2u);
}

}  // namespace
}  // namespace storage

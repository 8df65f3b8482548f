// The column families' key orders as the storage layer reads them: the memtables of the journal
// and of the pages are hashed by filter generation (database.cc), so a scan of one generation and a
// full scan must both still see exactly the right records, in order, from memtables and from SST
// files alike.
#include "storage/db/database.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/format/encoding.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

// More generations than the hashed memtables have buckets, so buckets hold several.
constexpr uint64_t kGenerations = 300'000;
// Every kBusyEvery-th generation has kBusyRecords records, the others one, and one hot
// generation many: more than a bucket keeps as a linked list (database.cc), so its bucket
// becomes a skip list, as a busy filter's does. A generation has as many pages as records.
constexpr uint64_t kBusyEvery = 1'000;
constexpr uint64_t kBusyRecords = 5;
constexpr uint64_t kHotGeneration = 4'321;
constexpr uint64_t kHotRecords = 1'000;

uint64_t RecordsOf(uint64_t generation) {
  if (generation == kHotGeneration) return kHotRecords;
  return generation % kBusyEvery == 0 ? kBusyRecords : 1;
}

std::string ValueOf(uint64_t generation, uint64_t seq) {
  return absl::StrCat(generation, "/", seq);
}

std::unique_ptr<Database> OpenOrDie(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(dir);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(*db) : nullptr;
}

// Writes the journal records and pages of every generation (seq and page counting down, so a
// bucket's inserts are not in key order): page p holds ValueOf(generation, p + 1).
void WriteRecords(Database& db) {
  rocksdb::WriteBatch batch;
  for (uint64_t generation = 0; generation < kGenerations; ++generation) {
    for (uint64_t seq = RecordsOf(generation); seq >= 1; --seq) {
      batch.Put(db.journal(), JournalKey(generation, seq), ValueOf(generation, seq));
      batch.Put(db.blocks(), BlockKey(generation, 0, static_cast<uint32_t>(seq - 1)),
                ValueOf(generation, seq));
    }
    if (batch.Count() >= 10'000) {
      ASSERT_OK(db.Write(batch, /*sync=*/false, "test"));
      batch.Clear();
    }
  }
  ASSERT_OK(db.Write(batch, /*sync=*/false, "test"));
}

// What GenerationScan finds for `generation` in `family`, as "generation/seq" read from each
// key by `parse` (which answers {generation, seq}), each checked against its value.
template <typename Parse>
std::vector<std::string> ScanOf(const Database& db, rocksdb::ColumnFamilyHandle* family,
                                uint64_t generation, Parse parse) {
  std::vector<std::string> found;
  GenerationScan it(db, family, generation);
  for (; it->Valid(); it->Next()) {
    absl::StatusOr<std::pair<uint64_t, uint64_t>> key = parse(it->key().ToString());
    EXPECT_TRUE(key.ok()) << key.status();
    if (!key.ok()) break;
    EXPECT_EQ(it->value().ToString(), ValueOf(key->first, key->second));
    found.push_back(ValueOf(key->first, key->second));
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return found;
}
std::vector<std::string> JournalOf(const Database& db, uint64_t generation) {
  return ScanOf(db, db.journal(), generation,
                [](const std::string& key) -> absl::StatusOr<std::pair<uint64_t, uint64_t>> {
                  absl::StatusOr<JournalKeyParts> parts = ParseJournalKey(key);
                  if (!parts.ok()) return parts.status();
                  return std::make_pair(parts->generation, parts->seq);
                });
}
// A page's seq is its number + 1.
std::vector<std::string> PagesOf(const Database& db, uint64_t generation) {
  return ScanOf(db, db.blocks(), generation,
                [](const std::string& key) -> absl::StatusOr<std::pair<uint64_t, uint64_t>> {
                  absl::StatusOr<BlockKeyParts> parts = ParseBlockKey(key);
                  if (!parts.ok()) return parts.status();
                  return std::make_pair(parts->generation, uint64_t{parts->page} + 1);
                });
}

// The keys of a full scan of `family`, checking that they ascend.
uint64_t CountInOrder(const Database& db, rocksdb::ColumnFamilyHandle* family) {
  std::unique_ptr<rocksdb::Iterator> it = db.Scan(family);
  uint64_t records = 0;
  std::string previous;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string key = it->key().ToString();
    EXPECT_LT(previous, key);
    previous = key;
    ++records;
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return records;
}

std::vector<std::string> Expected(uint64_t generation) {
  std::vector<std::string> expected;
  for (uint64_t seq = 1; seq <= RecordsOf(generation); ++seq) {
    expected.push_back(ValueOf(generation, seq));
  }
  return expected;
}

// Checks a sample of generations (every busy one, and a stride of the others) one by one, and
// the whole journal in one full scan. `deleted`: a generation whose records were range-deleted.
void ExpectRecords(const Database& db, uint64_t deleted) {
  for (uint64_t generation = 0; generation < kGenerations; generation += 997) {
    for (const uint64_t g : {generation, generation / kBusyEvery * kBusyEvery, kHotGeneration}) {
      if (g == deleted) {
        EXPECT_TRUE(JournalOf(db, g).empty());
        EXPECT_TRUE(PagesOf(db, g).empty());
      } else {
        EXPECT_EQ(JournalOf(db, g), Expected(g)) << "generation " << g;
        EXPECT_EQ(PagesOf(db, g), Expected(g)) << "generation " << g;
      }
    }
  }
  uint64_t written = 0;
  for (uint64_t generation = 0; generation < kGenerations; ++generation) {
    written += RecordsOf(generation);
  }
  EXPECT_EQ(CountInOrder(db, db.journal()), written - RecordsOf(deleted));
  EXPECT_EQ(CountInOrder(db, db.blocks()), written - RecordsOf(deleted));
}

TEST(DatabaseTest, ScansOfOneGenerationAndFullScansSeeExactlyTheirRecordsInOrder) {
  bloomtest::TempDir dir;
  std::unique_ptr<Database> db = OpenOrDie(dir.path());
  ASSERT_NE(db, nullptr);
  WriteRecords(*db);
  // A range delete of one busy generation, as Delete and checkpoints write them.
  constexpr uint64_t kDeleted = 7 * kBusyEvery;
  rocksdb::WriteBatch batch;
  for (rocksdb::ColumnFamilyHandle* family : {db->journal(), db->blocks()}) {
    batch.DeleteRange(family, GenerationPrefix(kDeleted), GenerationPrefix(kDeleted + 1));
  }
  ASSERT_OK(db->Write(batch, /*sync=*/false, "test"));

  // The records are about 42 MB of memtable; the hashed memtables' buckets (database.cc: 2 MB
  // of pointers each, and a small header per bucket of several records) must stay a few MB on
  // top, below the 64 MB at which memtables flush (256K buckets as skip lists added 55 MB).
  EXPECT_LT(db->Figures().memtable_bytes, 52u << 20);
  // From the memtables.
  ExpectRecords(*db, kDeleted);
  // From SST files: Close() flushes the memtables.
  ASSERT_OK(db->Close());
  db = OpenOrDie(dir.path());
  ASSERT_NE(db, nullptr);
  ExpectRecords(*db, kDeleted);
}

}  // namespace
}  // namespace storage

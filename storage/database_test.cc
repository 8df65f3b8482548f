// The column families' key orders as the storage layer reads them: the journal's memtable is
// hashed by filter generation (database.cc), so a scan of one generation and a full scan must
// both still see exactly the right records, in order, from memtables and from SST files alike.
#include "storage/database.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing.h"
#include "storage/encoding.h"

namespace storage {
namespace {

// More generations than the journal memtable has buckets, so buckets hold several.
constexpr uint64_t kGenerations = 300'000;
// Every kBusyEvery-th generation has kBusyRecords records, the others one, and one hot
// generation many: more than a journal bucket keeps as a linked list (database.cc), so its
// bucket becomes a skip list, as a busy filter's does.
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

// Writes the journal records of every generation (seq counting down, so a bucket's inserts
// are not in key order) and one block per generation.
void WriteRecords(Database& db) {
  rocksdb::WriteBatch batch;
  for (uint64_t generation = 0; generation < kGenerations; ++generation) {
    for (uint64_t seq = RecordsOf(generation); seq >= 1; --seq) {
      batch.Put(db.journal(), JournalKey(generation, seq), ValueOf(generation, seq));
    }
    batch.Put(db.blocks(), BlockKey(generation, 0, 0), ValueOf(generation, 0));
    if (batch.Count() >= 10'000) {
      ASSERT_OK(db.Write(batch, /*sync=*/false, "test"));
      batch.Clear();
    }
  }
  ASSERT_OK(db.Write(batch, /*sync=*/false, "test"));
}

// The journal records GenerationScan finds for `generation`, as "generation/seq".
std::vector<std::string> JournalOf(const Database& db, uint64_t generation) {
  std::vector<std::string> found;
  GenerationScan it(db, db.journal(), generation);
  for (; it->Valid(); it->Next()) {
    absl::StatusOr<JournalKeyParts> key = ParseJournalKey(it->key().ToString());
    EXPECT_TRUE(key.ok()) << key.status();
    if (!key.ok()) break;
    EXPECT_EQ(it->value().ToString(), ValueOf(key->generation, key->seq));
    found.push_back(ValueOf(key->generation, key->seq));
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return found;
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
      } else {
        EXPECT_EQ(JournalOf(db, g), Expected(g)) << "generation " << g;
      }
    }
  }
  {
    GenerationScan blocks(db, db.blocks(), 12'345);
    ASSERT_TRUE(blocks->Valid());
    EXPECT_EQ(blocks->value().ToString(), ValueOf(12'345, 0));
    blocks->Next();
    EXPECT_FALSE(blocks->Valid());
  }
  std::unique_ptr<rocksdb::Iterator> it = db.Scan(db.journal());
  uint64_t records = 0;
  std::string previous;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string key = it->key().ToString();
    EXPECT_LT(previous, key);
    previous = key;
    ++records;
  }
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
  uint64_t written = 0;
  for (uint64_t generation = 0; generation < kGenerations; ++generation) {
    written += RecordsOf(generation);
  }
  EXPECT_EQ(records, written - RecordsOf(deleted));
}

TEST(DatabaseTest, ScansOfOneGenerationAndFullScansSeeExactlyTheirRecordsInOrder) {
  bloomtest::TempDir dir;
  std::unique_ptr<Database> db = OpenOrDie(dir.path());
  ASSERT_NE(db, nullptr);
  WriteRecords(*db);
  // A range delete of one busy generation, as Delete and checkpoints write them.
  constexpr uint64_t kDeleted = 7 * kBusyEvery;
  rocksdb::WriteBatch batch;
  batch.DeleteRange(db->journal(), GenerationPrefix(kDeleted), GenerationPrefix(kDeleted + 1));
  ASSERT_OK(db->Write(batch, /*sync=*/false, "test"));

  // The records are about 31 MB of memtable in RocksDB's default skip lists; the journal's
  // bucket heads (database.cc) must stay a few MB on top, far from the 64 MB at which
  // memtables flush (256K buckets took it to 87 MB).
  EXPECT_LT(db->Figures().memtable_bytes, 40u << 20);
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

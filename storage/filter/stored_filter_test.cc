// One StoredFilter over a real RocksDB, without a FilterStore: an add is journalled before its
// bits show, a checkpoint writes the record and trims the journal, a creation deferred to the
// first write is written by it, eviction refuses later adds with the evicted error, and Delete
// leaves nothing behind.
#include "storage/filter/stored_filter.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rocksdb/write_batch.h"
#include "storage/db/database.h"
#include "storage/format/filter_records.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

class StoredFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Database>> db = Database::Open(dir_.path());
    ASSERT_OK(db.status());
    db_ = *std::move(db);
    context_.db = db_.get();
    context_.budget = &budget_;
    context_.slices_retired = &slices_retired_;
  }

  // A new filter of `capacity` at 1%, charged to the budget; its record written unless
  // `defer_creation`.
  std::shared_ptr<StoredFilter> Make(const std::string& name, uint64_t capacity,
                                     bool defer_creation = false) {
    FilterRecord record;
    record.generation = next_generation_++;
    record.seed = 42;
    record.spec = {capacity, 0.01, 2, false};
    const bloom::SubFilterShape first = *bloom::SubFilterShapeFor(record.spec, 0);
    record.sub_filters.push_back(
        {first.capacity, first.error_rate, first.layout.num_blocks, first.layout.hash_count, 0, 0});
    absl::StatusOr<std::unique_ptr<bloom::ScalableFilter>> built =
        StoredFilter::BuildFilter(record);
    EXPECT_OK(built.status());
    const uint64_t bytes = ResidentCharge(RecordBitsBytes(record), 1);
    EXPECT_OK(budget_.ChargeCached(bytes, 0, "test"));
    auto filter = std::make_shared<StoredFilter>(name, record, *std::move(built), &context_, bytes);
    if (defer_creation) {
      filter->DeferCreation();
    } else {
      rocksdb::WriteBatch batch;
      batch.Put(db_->filters(), name, EncodeFilterRecord(record));
      EXPECT_OK(db_->Write(batch, false, "test"));
    }
    return filter;
  }

  // Adds `items` the way an OperationBatch does: prepare, one write, finish. Returns the
  // added flags, or the error.
  absl::StatusOr<std::vector<bool>> Add(StoredFilter& filter,
                                        const std::vector<std::string>& items) {
    std::vector<uint64_t> hashes;
    for (const std::string& item : items) hashes.push_back(filter.filter()->Hash(item));
    std::unique_ptr<bool[]> added(new bool[items.size()]);
    GroupedAdd grouped;
    rocksdb::WriteBatch batch;
    filter.LockForGroup();
    absl::Status status = filter.Add(hashes, added.get(), false, batch, grouped);
    if (status.ok() && grouped.needs_write) {
      status = db_->Write(batch, false, "test");
      filter.FinishGroupAdd(grouped, status.ok());
    }
    filter.UnlockForGroup(grouped.exclusive);
    if (!status.ok()) return status;
    return std::vector<bool>(added.get(), added.get() + items.size());
  }

  bool Contains(StoredFilter& filter, const std::string& item) {
    const uint64_t hash = filter.filter()->Hash(item);
    bool present = false;
    EXPECT_OK(filter.MightContain({&hash, 1}, &present));
    return present;
  }

  size_t JournalRecords(uint64_t generation) {
    size_t records = 0;
    for (GenerationScan it(*db_, db_->journal(), generation); it->Valid(); it->Next()) ++records;
    return records;
  }

  bloomtest::TempDir dir_;
  std::unique_ptr<Database> db_;
  MemoryBudget budget_{0};
  std::atomic<uint64_t> slices_retired_{0};
  StoreContext context_;
  uint64_t next_generation_ = 1;
};

TEST_F(StoredFilterTest, AnAddIsJournalledAndACheckpointTrimsIt) {
  std::shared_ptr<StoredFilter> filter = Make("f", 100'000);
  absl::StatusOr<std::vector<bool>> added = Add(*filter, {"a", "b", "a"});
  ASSERT_OK(added.status());
  EXPECT_EQ(*added, (std::vector<bool>{true, true, false}));
  EXPECT_TRUE(Contains(*filter, "a"));
  EXPECT_FALSE(Contains(*filter, "never"));
  EXPECT_TRUE(filter->HasUnpersistedChanges());
  EXPECT_GT(filter->journal_bytes(), 0u);
  EXPECT_EQ(JournalRecords(filter->generation()), 1u);

  ASSERT_OK(filter->Checkpoint(/*sync=*/false));
  EXPECT_FALSE(filter->HasUnpersistedChanges());
  EXPECT_EQ(filter->journal_bytes(), 0u);
  EXPECT_EQ(JournalRecords(filter->generation()), 0u);
  // The record now counts the items and covers the journal.
  absl::StatusOr<absl::optional<StoredRecord>> found = ReadFilterRecord(*db_, "f");
  ASSERT_OK(found.status());
  ASSERT_TRUE(found->has_value());
  ASSERT_OK((*found)->record.status());
  EXPECT_EQ((*found)->record->sub_filters[0].items_added, 2u);
  EXPECT_GE((*found)->record->checkpoint_seq, 1u);
  ASSERT_OK(filter->Checkpoint(false));  // nothing changed: a no-op
}

TEST_F(StoredFilterTest, ACheckpointIsDueAfterTheIntervalOrForALargeJournal) {
  std::shared_ptr<StoredFilter> filter = Make("f", 1000);
  const absl::Time now = absl::Now();
  EXPECT_FALSE(filter->CheckpointDue(now + absl::Hours(1), absl::Seconds(30)));  // no changes
  ASSERT_OK(Add(*filter, {"x"}).status());
  EXPECT_FALSE(filter->CheckpointDue(now, absl::Hours(1)));
  EXPECT_TRUE(filter->CheckpointDue(now + absl::Hours(2), absl::Hours(1)));
  EXPECT_FALSE(filter->JournalOverdue());  // a few bytes: never overdue
}

TEST_F(StoredFilterTest, ADeferredCreationIsWrittenByTheFirstWrite) {
  std::shared_ptr<StoredFilter> filter = Make("new", 1000, /*defer_creation=*/true);
  absl::StatusOr<absl::optional<StoredRecord>> before = ReadFilterRecord(*db_, "new");
  ASSERT_OK(before.status());
  EXPECT_FALSE(before->has_value());  // nothing written yet: a crash now leaves nothing
  ASSERT_OK(Add(*filter, {"first"}).status());
  absl::StatusOr<absl::optional<StoredRecord>> after = ReadFilterRecord(*db_, "new");
  ASSERT_OK(after.status());
  ASSERT_TRUE(after->has_value());
  EXPECT_OK((*after)->record.status());

  std::shared_ptr<StoredFilter> reserved = Make("reserved", 1000, true);
  ASSERT_OK(reserved->EnsurePersisted(false));  // what Reserve does before it answers
  absl::StatusOr<absl::optional<StoredRecord>> persisted = ReadFilterRecord(*db_, "reserved");
  ASSERT_OK(persisted.status());
  EXPECT_TRUE(persisted->has_value());
}

TEST_F(StoredFilterTest, AnEvictedFilterRefusesAddsAndStillAnswersChecks) {
  std::shared_ptr<StoredFilter> filter = Make("f", 1000);
  ASSERT_OK(Add(*filter, {"kept"}).status());
  ASSERT_OK(filter->Evict(false));
  EXPECT_TRUE(filter->evicted());
  EXPECT_EQ(JournalRecords(filter->generation()), 0u);  // checkpointed on the way out
  const absl::StatusOr<std::vector<bool>> refused = Add(*filter, {"late"});
  EXPECT_TRUE(StoredFilter::IsEvicted(refused.status())) << refused.status();
  EXPECT_TRUE(Contains(*filter, "kept"));
}

TEST_F(StoredFilterTest, DeleteLeavesNothingBehind) {
  std::shared_ptr<StoredFilter> filter = Make("f", 1000);
  ASSERT_OK(Add(*filter, {"a"}).status());
  const uint64_t generation = filter->generation();
  ASSERT_OK(filter->Delete(false));
  EXPECT_EQ(filter->Usable().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<absl::optional<StoredRecord>> found = ReadFilterRecord(*db_, "f");
  ASSERT_OK(found.status());
  EXPECT_FALSE(found->has_value());
  EXPECT_EQ(JournalRecords(generation), 0u);
  EXPECT_EQ(Add(*filter, {"b"}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoredFilterTest, AnUnreadableFilterAnswersDataLossAndCanBeDeleted) {
  StoredFilter broken("broken", absl::OkStatus(), &context_, /*generation=*/77);
  broken.MarkUnreadable(absl::DataLossError("bad checksum"));
  EXPECT_EQ(broken.Usable().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(broken.usable());
  EXPECT_EQ(broken.filter(), nullptr);
  EXPECT_OK(broken.Delete(false));
  EXPECT_EQ(broken.Usable().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace storage

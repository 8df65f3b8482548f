// Paced checkpoints (write_pacer.h) through the store: a large filter's checkpoint written in
// paced batches persists every page, and whoever waits for it (a Delete, Close) is not held
// to its pace.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/testing.h"
#include "gtest/gtest.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"

namespace storage {
namespace {

using bloomtest::Items;
using bloomtest::Views;

// A filter of about 4.8 MB of bits with every page changed: several paced batches.
constexpr uint64_t kCapacity = 4'000'000;
constexpr int kItems = 400'000;

class PacedCheckpointTest : public ::testing::Test {
 protected:
  void Open(uint64_t bytes_per_second) {
    store_.reset();
    StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = false;  // the tests run the checkpointer's passes
    options.checkpoint_write_bytes_per_second = bytes_per_second;
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
  }

  void FillBigFilter() {
    ASSERT_OK(store_->Reserve("big", {kCapacity, 0.01}).status());
    ASSERT_OK(store_->Add("big", Views(items_), nullptr).status());
    ASSERT_GT(store_->Figures().journal_pending_bytes, 0u);
  }

  // The checkpointer's pass, late enough for every changed filter to be due.
  bool Pass() { return store_->RunCheckpointPass(absl::Now() + absl::Hours(1)); }

  void ExpectAllPresent() {
    absl::StatusOr<std::vector<bool>> present = store_->MightContain("big", Views(items_));
    ASSERT_OK(present.status());
    for (size_t i = 0; i < items_.size(); ++i) {
      ASSERT_TRUE((*present)[i]) << "false negative for " << items_[i];
    }
  }

  const std::vector<std::string> items_ = Items("k", 0, kItems);
  bloomtest::TempDir dir_;
  std::unique_ptr<FilterStore> store_;
};

TEST_F(PacedCheckpointTest, PacedCheckpointPersistsEveryPage) {
  Open(64 << 20);
  FillBigFilter();
  ASSERT_TRUE(Pass());
  const StoreFigures figures = store_->Figures();
  EXPECT_EQ(figures.checkpoints, 1u);
  EXPECT_EQ(figures.journal_pending_bytes, 0u);  // the checkpoint covered every add
  // Reopened with pacing off and the checkpoint's pages alone to read: every item is there.
  ASSERT_OK(store_->Close());
  Open(0);
  ExpectAllPresent();
}

TEST_F(PacedCheckpointTest, DeleteDoesNotWaitForThePace) {
  Open(1024);  // 1 KiB/s: the checkpoint's second batch would wait about 17 minutes
  FillBigFilter();
  std::thread pass([&] { EXPECT_TRUE(Pass()); });
  absl::SleepFor(absl::Milliseconds(100));  // the pass is (most likely) waiting on its pace
  EXPECT_OK(store_->Delete("big"));         // returns once the checkpoint hurried to its end
  pass.join();
  EXPECT_EQ(store_->Stats("big").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PacedCheckpointTest, CloseEndsThePaceAndKeepsEveryItem) {
  Open(1024);
  FillBigFilter();
  std::thread pass([&] { Pass(); });
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_OK(store_->Close());  // the paced checkpoint finishes at once, then Close's own
  pass.join();
  Open(0);
  ExpectAllPresent();
}

}  // namespace
}  // namespace storage

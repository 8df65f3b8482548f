// Paced checkpoints (write_pacer.h) through the store: a large filter's checkpoint written in
// paced batches persists every page, and whoever waits for it (a Delete, Close) is not held
// to its pace.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloomtest::Items;
using bloomtest::Views;

// A filter of about 4.8 MB of bits with every page changed: several paced batches.
constexpr uint64_t kCapacity = 4'000'000;
constexpr int kItems = 400'000;

class PacedCheckpointTest : public ::testing::Test {
 protected:
  // `wait_clock`: what the pacer waits on (the real clock: paced batches go at their rate).
  void Open(uint64_t bytes_per_second,
            const bloomtime::Clock* wait_clock = bloomtime::Clock::Real()) {
    store_.reset();
    StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = false;  // the tests run the checkpointer's passes
    options.checkpoint_write_bytes_per_second = bytes_per_second;
    options.wait_clock = wait_clock;
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
  // A clock for the pacer that nothing moves: a paced pass waits on it until it is rushed.
  bloomtime::ManualClock wait_clock_;
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
  Open(1024, &wait_clock_);  // 1 KiB/s: the second batch would wait about 17 minutes
  FillBigFilter();
  std::thread pass([&] { EXPECT_TRUE(Pass()); });
  // The pass waits for its pace, and without a Rush would wait as long as the clock stands.
  ASSERT_TRUE(bloomtest::WaitFor([&] { return wait_clock_.waiters() == 1; }));
  EXPECT_OK(store_->Delete("big"));  // returns once the checkpoint hurried to its end
  pass.join();
  EXPECT_EQ(store_->Stats("big").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PacedCheckpointTest, CloseEndsThePaceAndKeepsEveryItem) {
  Open(1024, &wait_clock_);
  FillBigFilter();
  std::thread pass([&] { Pass(); });
  ASSERT_TRUE(bloomtest::WaitFor([&] { return wait_clock_.waiters() == 1; }));
  ASSERT_OK(store_->Close());  // the paced checkpoint finishes at once, then Close's own
  pass.join();
  Open(0);
  ExpectAllPresent();
}

}  // namespace
}  // namespace storage

// StoreOptions::may_acknowledge: the fence a primary elected through etcd puts before every
// acknowledgement.
#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "storage/filter_store.h"
#include "storage/filter_store_fixture.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloomtest::Views;

class AckFenceTest : public FilterStoreTest {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.background_checkpoints = false;
    options.may_acknowledge = [this] {
      ++asked_;
      return held_.load();
    };
    Open(options);
  }
  // Closing the store still asks the fence (for the writes it flushes): close it while the
  // fence's members live, not in ~FilterStoreTest after they are gone.
  void TearDown() override { store_.reset(); }

  std::atomic<bool> held_{true};
  std::atomic<int> asked_{0};
};

TEST_F(AckFenceTest, WritesAreAcknowledgedOnlyWhileTheFenceHolds) {
  const std::vector<std::string> items = {"a", "b"};
  ASSERT_OK(store_->Reserve("f", {1000, 0.01}).status());
  ASSERT_OK(store_->Add("f", Views(items), nullptr).status());
  EXPECT_GT(asked_.load(), 0);

  held_ = false;
  const std::vector<std::string> more = {"c"};
  absl::Status add = store_->Add("f", Views(more), nullptr).status();
  EXPECT_TRUE(absl::IsUnavailable(add)) << add;
  EXPECT_NE(add.message().find("no longer sure it is the primary"), absl::string_view::npos);
  EXPECT_NE(add.message().find("not applied"), absl::string_view::npos);
  EXPECT_TRUE(absl::IsUnavailable(store_->Reserve("g", {1000, 0.01}).status()));
  // Refused before anything changed: this pod holds no write the next primary may lack.
  absl::StatusOr<FilterInfo> info = store_->Stats("f");
  ASSERT_OK(info.status());
  EXPECT_EQ(info->stats.items_added, items.size());
  EXPECT_TRUE(absl::IsNotFound(store_->Stats("g").status()));
  EXPECT_TRUE(absl::IsUnavailable(store_->Delete("f")));
  EXPECT_OK(store_->Stats("f").status());
  // Reads go on.
  EXPECT_OK(store_->MightContain("f", Views(items)).status());

  held_ = true;
  EXPECT_OK(store_->Add("f", Views(more), nullptr).status());
}

TEST_F(AckFenceTest, AFencedPrimaryWritesNothingMoreNotEvenItsCheckpointAtClose) {
  const std::vector<std::string> items = {"kept-1", "kept-2"};
  ASSERT_OK(store_->Reserve("f", {1000, 0.01}).status());
  ASSERT_OK(store_->Add("f", Views(items), nullptr).status());
  held_ = false;
  const uint64_t fenced_at = store_->LatestSequence();
  const std::vector<std::string> refused = {"refused"};
  EXPECT_TRUE(absl::IsUnavailable(store_->Add("f", Views(refused), nullptr).status()));
  ASSERT_OK(store_->Close());
  // Its log is a prefix of what the next primary holds: a follower again, it tails on.
  StoreOptions as_follower;
  as_follower.replica = true;  // which writes nothing
  Open(as_follower);
  EXPECT_EQ(store_->LatestSequence(), fenced_at);
  ExpectAllPresent("f", items);
}

TEST_F(AckFenceTest, DeferredAddsAskTheFenceWhenTheyAreAnswered) {
  // With a fence, adds with defer_sync wait for WhenDurable even without --sync or acks.
  EXPECT_TRUE(store_->syncs_adds());
  const std::vector<std::string> items = {"x"};
  ASSERT_OK(store_->Reserve("f", {1000, 0.01}).status());
  ASSERT_OK(store_->Add("f", Views(items), nullptr, /*defer_sync=*/true).status());

  absl::Status answered;
  absl::Notification done;
  held_ = false;
  store_->WhenDurable([&](const absl::Status& status) {
    answered = status;
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(absl::IsUnavailable(answered)) << answered;

  held_ = true;
  absl::Notification again;
  store_->WhenDurable([&](const absl::Status& status) {
    answered = status;
    again.Notify();
  });
  ASSERT_TRUE(again.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_OK(answered);
}

TEST_F(FilterStoreTest, WithoutAFenceDeferredAddsNeedNoWait) { EXPECT_FALSE(store_->syncs_adds()); }

}  // namespace
}  // namespace storage

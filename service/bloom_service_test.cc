// BloomService's handlers called concurrently without the gRPC transport: validation and
// status codes, and (under ThreadSanitizer, which cannot see into Debian's uninstrumented
// gRPC) the synchronisation of everything below the transport.
#include "service/bloom_service.h"

#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace service {
namespace {

class BloomServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::StoreOptions options;
    options.data_dir = dir_.path();
    options.checkpoint_interval = absl::Milliseconds(20);
    absl::StatusOr<std::unique_ptr<storage::FilterStore>> store =
        storage::FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
    service_ = std::make_unique<BloomService>(store_.get(), ServiceLimits{100, 64});
  }

  bloomtest::TempDir dir_;
  std::unique_ptr<storage::FilterStore> store_;
  std::unique_ptr<BloomService> service_;
};

TEST_F(BloomServiceTest, LimitsAndCodes) {
  bloom::v1::ReserveRequest reserve;
  reserve.set_name("f");
  bloom::v1::ReserveResponse reserved;
  EXPECT_EQ(service_->HandleReserve(reserve, &reserved).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // no spec
  reserve.mutable_spec()->set_capacity(100);
  reserve.mutable_spec()->set_error_rate(0.01);
  ASSERT_TRUE(service_->HandleReserve(reserve, &reserved).ok());
  EXPECT_TRUE(reserved.created());

  bloom::v1::AddRequest add;
  add.set_name("f");
  bloom::v1::AddResponse added;
  EXPECT_EQ(service_->HandleAdd(add, &added).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (int i = 0; i < 101; ++i) add.add_items(absl::StrCat(i));
  grpc::Status too_many = service_->HandleAdd(add, &added);
  EXPECT_EQ(too_many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(too_many.error_message().find("1 to 100"), std::string::npos);
  add.clear_items();
  add.add_raw_items(std::string(65, 'x'));
  EXPECT_NE(service_->HandleAdd(add, &added).error_message().find("raw_items[0]"),
            std::string::npos);

  bloom::v1::ListRequest list;
  list.set_page_size(5000);  // coerced to the maximum, not an error
  bloom::v1::ListResponse listed;
  EXPECT_TRUE(service_->HandleList(list, &listed).ok());
  EXPECT_EQ(listed.filters_size(), 1);
  EXPECT_GT(listed.filters(0).capacity(), 0U);
  list.set_names_only(true);
  listed.Clear();
  ASSERT_TRUE(service_->HandleList(list, &listed).ok());
  ASSERT_EQ(listed.filters_size(), 1);
  EXPECT_EQ(listed.filters(0).name(), "f");
  EXPECT_EQ(listed.filters(0).capacity(), 0U);
  // Slots exist only in a sharded deployment.
  list.mutable_slots()->set_last(10);
  const grpc::Status by_slot = service_->HandleList(list, &listed);
  EXPECT_EQ(by_slot.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(by_slot.error_message().find("not sharded"), std::string::npos);
}

TEST_F(BloomServiceTest, ConcurrentHandlersOnSharedFilters) {
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 400; ++i) {
        // "keep*" filters are never deleted, so what was added to them must stay present;
        // "churn" is deleted and re-created all the time.
        const std::string name = rng() % 3 == 0 ? "churn" : absl::StrCat("keep", rng() % 2);
        switch (rng() % 6) {
          case 0: {
            bloom::v1::ReserveRequest r;
            r.set_name(name);
            r.mutable_spec()->set_capacity(50);
            r.mutable_spec()->set_error_rate(0.01);
            bloom::v1::ReserveResponse response;
            service_->HandleReserve(r, &response);
            break;
          }
          case 1:
          case 2: {
            bloom::v1::AddRequest r;
            r.set_name(name);
            for (int k = 0; k < 20; ++k) r.add_items(absl::StrCat(t, "-", i, "-", k));
            r.mutable_create_if_missing()->set_capacity(50);  // grows sub-filters
            r.mutable_create_if_missing()->set_error_rate(0.01);
            bloom::v1::AddResponse response;
            grpc::Status status = service_->HandleAdd(r, &response);
            if (status.ok()) {
              bloom::v1::MightContainRequest check;
              check.set_name(name);
              check.mutable_items()->CopyFrom(r.items());
              bloom::v1::MightContainResponse present;
              const grpc::Status checked = service_->HandleMightContain(check, &present);
              if (name != "churn") {
                EXPECT_TRUE(checked.ok()) << checked.error_message();
                for (bool p : present.present()) EXPECT_TRUE(p) << "false negative in " << name;
              }
            }
            break;
          }
          case 3: {
            bloom::v1::DeleteRequest r;
            r.set_name("churn");
            service_->HandleDelete(r);
            break;
          }
          case 4: {
            bloom::v1::StatsRequest r;
            r.set_name(name);
            bloom::v1::StatsResponse response;
            service_->HandleStats(r, &response);
            break;
          }
          case 5: {
            bloom::v1::ListRequest r;
            bloom::v1::ListResponse response;
            EXPECT_TRUE(service_->HandleList(r, &response).ok());
            break;
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_OK(store_->Close());
}

// Windows and idle expiry through the API's messages: Duration fields in, Timestamps out,
// field-named validation; a ManualClock moves time.
class WindowedServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::StoreOptions options;
    options.data_dir = dir_.path();
    options.background_checkpoints = false;
    options.clock = &clock_;
    absl::StatusOr<std::unique_ptr<storage::FilterStore>> store =
        storage::FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
    service_ = std::make_unique<BloomService>(store_.get(), ServiceLimits{100, 64});
  }

  bool Present(const std::string& name, const std::string& item) {
    bloom::v1::MightContainRequest request;
    request.set_name(name);
    request.add_items(item);
    bloom::v1::MightContainResponse response;
    const grpc::Status status = service_->HandleMightContain(request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return status.ok() && response.present(0);
  }

  bloomtest::TempDir dir_;
  bloomtime::ManualClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<storage::FilterStore> store_;
  std::unique_ptr<BloomService> service_;
};

TEST_F(WindowedServiceTest, AWindowedFilterForgetsAndReportsItsWindow) {
  bloom::v1::ReserveRequest reserve;
  reserve.set_name("seen");
  reserve.mutable_spec()->set_capacity(1000);
  reserve.mutable_spec()->set_error_rate(0.01);
  reserve.mutable_spec()->mutable_window()->set_seconds(7 * 24 * 3600);
  reserve.mutable_spec()->mutable_idle_ttl()->set_seconds(30 * 24 * 3600);
  bloom::v1::ReserveResponse reserved;
  ASSERT_TRUE(service_->HandleReserve(reserve, &reserved).ok());
  EXPECT_EQ(reserved.stats().spec().window_slices(), 8u);  // the default, as stored
  EXPECT_EQ(reserved.stats().spec().window().seconds(), 7 * 24 * 3600);
  EXPECT_EQ(reserved.stats().expires_at().seconds(), 1'800'000'000 + 30 * 24 * 3600);
  EXPECT_EQ(reserved.stats().window_start().seconds(), 1'800'000'000 - 7 * 24 * 3600);
  ASSERT_EQ(reserved.stats().sub_filter_stats_size(), 1);
  EXPECT_TRUE(reserved.stats().sub_filter_stats(0).has_slice_start());
  // Reserve again with the default spelled out: the same spec.
  reserve.mutable_spec()->set_window_slices(8);
  ASSERT_TRUE(service_->HandleReserve(reserve, &reserved).ok());
  EXPECT_FALSE(reserved.created());

  bloom::v1::AddRequest add;
  add.set_name("seen");
  add.add_items("url-1");
  bloom::v1::AddResponse added;
  ASSERT_TRUE(service_->HandleAdd(add, &added).ok());
  clock_.Advance(absl::Hours(24 * 7));
  EXPECT_TRUE(Present("seen", "url-1"));
  clock_.Advance(absl::Hours(24) + absl::Seconds(1));  // past window * (1 + 1/8)
  EXPECT_FALSE(Present("seen", "url-1"));
}

TEST_F(WindowedServiceTest, BadDurationsAreRefusedNamingTheField) {
  struct Case {
    const char* field;
    std::function<void(bloom::v1::FilterSpec*)> set;
  };
  const Case cases[] = {
      {"window", [](bloom::v1::FilterSpec* s) { s->mutable_window()->set_nanos(500'000'000); }},
      {"window", [](bloom::v1::FilterSpec* s) { s->mutable_window()->set_seconds(-60); }},
      {"window",
       [](bloom::v1::FilterSpec* s) { s->mutable_window()->set_seconds(int64_t{1} << 40); }},
      {"window_slices",
       [](bloom::v1::FilterSpec* s) {
         s->mutable_window()->set_seconds(60);
         s->set_window_slices(65);
       }},
      {"window_slices", [](bloom::v1::FilterSpec* s) { s->set_window_slices(4); }},
      {"idle_ttl", [](bloom::v1::FilterSpec* s) { s->mutable_idle_ttl()->set_nanos(1000); }},
  };
  for (const Case& c : cases) {
    bloom::v1::ReserveRequest reserve;
    reserve.set_name("f");
    reserve.mutable_spec()->set_capacity(100);
    reserve.mutable_spec()->set_error_rate(0.01);
    c.set(reserve.mutable_spec());
    bloom::v1::ReserveResponse reserved;
    const grpc::Status status = service_->HandleReserve(reserve, &reserved);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_NE(status.error_message().find(absl::StrCat("spec.", c.field)), std::string::npos)
        << status.error_message();

    bloom::v1::AddRequest add;
    add.set_name("g");
    add.add_items("x");
    *add.mutable_create_if_missing() = reserve.spec();
    bloom::v1::AddResponse added;
    const grpc::Status add_status = service_->HandleAdd(add, &added);
    EXPECT_EQ(add_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_NE(add_status.error_message().find(absl::StrCat("create_if_missing.", c.field)),
              std::string::npos)
        << add_status.error_message();
  }
}

}  // namespace
}  // namespace service

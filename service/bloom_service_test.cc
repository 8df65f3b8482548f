// BloomService's handlers called concurrently without the gRPC transport: validation and
// status codes, and (under ThreadSanitizer, which cannot see into Debian's uninstrumented
// gRPC) the synchronisation of everything below the transport.
#include "service/bloom_service.h"

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace service

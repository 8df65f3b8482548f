// The RPC table's rows are in the order of Rpc and consistent with one another.
#include "common/rpcs.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace rpcs {
namespace {

TEST(RpcsTest, EveryRpcHasItsOwnRowInOrder) {
  ASSERT_EQ(All().size(), kNumRpcs);
  for (size_t i = 0; i < kNumRpcs; ++i) {
    EXPECT_EQ(static_cast<size_t>(All()[i].rpc), i) << All()[i].label;
    EXPECT_EQ(&Info(static_cast<Rpc>(i)), &All()[i]);
  }
}

TEST(RpcsTest, LabelsAndPathsAreUniqueAndPathsFindTheirRow) {
  std::set<std::string> labels;
  std::set<std::string> paths;
  for (const RpcInfo& info : All()) {
    EXPECT_TRUE(labels.insert(info.label).second) << info.label;
    if (info.path == nullptr) {
      // Only operations inside a stream have no path of their own.
      EXPECT_EQ(info.forwarding, Forwarding::kNotACall) << info.label;
      continue;
    }
    EXPECT_TRUE(paths.insert(info.path).second) << info.path;
    EXPECT_EQ(FindByPath(info.path), &info) << info.path;
  }
  EXPECT_EQ(FindByPath("/bloom.v1.BloomFilterService/Nope"), nullptr);
  EXPECT_EQ(FindByPath("/grpc.health.v1.Health/"), nullptr);
}

TEST(RpcsTest, WritesAreForwardedAndOnlyHealthAndReflectionMayGoWithoutAToken) {
  for (const RpcInfo& info : All()) {
    if (info.access == Access::kWrite && info.path != nullptr) {
      EXPECT_TRUE(info.forwarding == Forwarding::kAlways ||
                  info.forwarding == Forwarding::kWholeStream)
          << info.label << ": a follower must not take a write itself";
    }
    const bool bloom = info.path != nullptr &&
                       std::string(info.path).rfind("/bloom.v1.BloomFilterService/", 0) == 0;
    if (bloom || info.path == nullptr) {
      EXPECT_EQ(info.tokenless, Tokenless::kNever) << info.label;
      EXPECT_TRUE(info.measured) << info.label;
    } else {
      EXPECT_NE(info.tokenless, Tokenless::kNever) << info.label;
      EXPECT_FALSE(info.measured) << info.label;
    }
  }
  EXPECT_EQ(Info(Rpc::kAdd).access, Access::kWrite);
  EXPECT_EQ(Info(Rpc::kPipeline).access, Access::kRead);
  EXPECT_EQ(Info(Rpc::kPipelineAdd).access, Access::kWrite);
  EXPECT_EQ(Info(Rpc::kPipelineRemove).access, Access::kWrite);
  EXPECT_EQ(Info(Rpc::kMightContain).forwarding, Forwarding::kUnlessApplied);
}

}  // namespace
}  // namespace rpcs

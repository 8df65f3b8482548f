#include "bloom/blocked_filter.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "bloom/hash.h"
#include "bloom/scalable_filter.h"
#include "bloom/testing.h"
#include "gtest/gtest.h"

namespace bloom {
namespace {

std::unique_ptr<BlockedBloomFilter> MakeFilter(uint64_t capacity, double p) {
  absl::StatusOr<BlockedLayout> layout = ChooseLayout(capacity, p);
  EXPECT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<std::unique_ptr<BlockedBloomFilter>> filter = BlockedBloomFilter::Create(*layout);
  EXPECT_TRUE(filter.ok()) << filter.status();
  return *std::move(filter);
}

TEST(BlockedBloomFilterTest, RejectsInvalidLayouts) {
  EXPECT_FALSE(BlockedBloomFilter::Create({0, 7}).ok());
  EXPECT_FALSE(BlockedBloomFilter::Create({10, 0}).ok());
  EXPECT_FALSE(BlockedBloomFilter::Create({10, kMaxHashCount + 1}).ok());
}

TEST(BlockedBloomFilterTest, AddReportsNewOnlyOnce) {
  auto filter = MakeFilter(1000, 0.01);
  const uint64_t h = HashItem("hello", 42);
  EXPECT_FALSE(filter->MightContain(h));
  EXPECT_TRUE(filter->Add(h));
  EXPECT_FALSE(filter->Add(h));
  EXPECT_TRUE(filter->MightContain(h));
}

TEST(BlockedBloomFilterTest, NoFalseNegatives) {
  absl::BitGen gen;
  auto filter = MakeFilter(200'000, 0.001);
  const std::vector<uint64_t> hashes = RandomHashes(200'000, gen);
  filter->AddMany(absl::MakeSpan(hashes).subspan(0, 100'000));
  for (size_t i = 100'000; i < hashes.size(); ++i) filter->Add(hashes[i]);
  std::vector<char> present(hashes.size(), 0);
  filter->MightContainMany(hashes, reinterpret_cast<bool*>(present.data()));
  for (size_t i = 0; i < hashes.size(); ++i) {
    ASSERT_TRUE(present[i]) << i;
    ASSERT_TRUE(filter->MightContain(hashes[i])) << i;
  }
}

// MightContainMany (AVX2 where the CPU has it) answers exactly as MightContain, item by item,
// on a filter filled past capacity so that absent items hit partly set blocks; answers given
// before the call are kept.
TEST(BlockedBloomFilterTest, BatchedQueriesAnswerAsSingleOnes) {
  absl::BitGen gen;
  auto filter = MakeFilter(20'000, 0.01);
  filter->AddMany(RandomHashes(60'000, gen));
  const std::vector<uint64_t> probes = RandomHashes(100'000, gen);
  std::vector<char> present(probes.size(), 0);
  for (size_t i = 0; i < present.size(); i += 97) present[i] = 1;  // answered earlier
  filter->MightContainMany(probes, reinterpret_cast<bool*>(present.data()));
  size_t hits = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    const bool expected = i % 97 == 0 || filter->MightContain(probes[i]);
    ASSERT_EQ(present[i] != 0, expected) << i;
    hits += expected;
  }
  // At 3x capacity both answers occur often: the comparison covered both.
  EXPECT_GT(hits, probes.size() / 10);
  EXPECT_LT(hits, probes.size() * 9 / 10);
}

// Fill to capacity with real item strings, probe 1,000,000 absent items: the measured FPR must
// be at most p plus three standard deviations of the binomial estimate.
class FalsePositiveRateTest : public ::testing::TestWithParam<double> {};

TEST_P(FalsePositiveRateTest, MeasuredRateAtCapacityIsWithinTarget) {
  const double p = GetParam();
  const uint64_t capacity = 1'000'000;
  const uint64_t seed = 0x5eed;
  auto filter = MakeFilter(capacity, p);
  for (uint64_t i = 0; i < capacity; ++i)
    filter->Add(HashItem("member:" + std::to_string(i), seed));
  const int probes = 1'000'000;
  int false_positives = 0;
  for (int i = 0; i < probes; ++i) {
    false_positives += filter->MightContain(HashItem("absent:" + std::to_string(i), seed));
  }
  const double measured = static_cast<double>(false_positives) / probes;
  const double tolerance = 3 * std::sqrt(p * (1 - p) / probes);
  RecordProperty("measured_fpr", std::to_string(measured));
  EXPECT_LE(measured, p + tolerance) << "measured " << measured << " for p=" << p;
  // The estimate from the bits agrees with the measurement.
  EXPECT_NEAR(filter->EstimatedFalsePositiveRate(), measured, 0.15 * p + tolerance);
  // The layout is not wasteful either: the measured rate is above half the target.
  EXPECT_GT(measured, p / 2);
}

// 1e-4 needs k = 12: bit positions from two 64-bit draws.
INSTANTIATE_TEST_SUITE_P(Rates, FalsePositiveRateTest, ::testing::Values(0.01, 0.001, 0.0001));

TEST(BlockedBloomFilterTest, CardinalityEstimateIsClose) {
  absl::BitGen gen;
  auto filter = MakeFilter(100'000, 0.01);
  const std::vector<uint64_t> hashes = RandomHashes(80'000, gen);
  filter->AddMany(hashes);
  const double estimate = EstimateCardinality(filter->CountSetBits(), filter->layout());
  EXPECT_NEAR(estimate, 80'000, 80'000 * 0.03);
}

// Stats read set_bits() in O(1) instead of scanning: it must equal a scan after adds racing
// on the same blocks (each bit counted once) and after pages are ORed in, some twice.
TEST(BlockedBloomFilterTest, SetBitCountIsKeptExactlyUnderRacingAddsAndLoads) {
  auto filter = MakeFilter(20'000, 0.01);
  EXPECT_EQ(filter->set_bits(), 0u);
  EXPECT_EQ(filter->EstimatedFalsePositiveRate(), 0);
  absl::BitGen gen;
  const std::vector<uint64_t> shared = RandomHashes(15'000, gen);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Every thread adds the same items, half one by one and half batched, in different orders.
      std::vector<uint64_t> mine = shared;
      if (t % 2 == 1) std::reverse(mine.begin(), mine.end());
      const size_t half = mine.size() / 2;
      for (size_t i = 0; i < half; ++i) filter->Add(mine[i]);
      filter->AddMany(absl::MakeConstSpan(mine).subspan(half));
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(filter->set_bits(), filter->CountSetBits());

  auto copy = MakeFilter(20'000, 0.01);
  copy->AddMany(RandomHashes(5'000, gen));
  for (int round = 0; round < 2; ++round) {
    for (uint64_t page = 0; page < filter->num_pages(); ++page) {
      std::string bytes(filter->page_size(page), '\0');
      filter->ReadPage(page, bytes.data());
      ASSERT_TRUE(copy->OrPage(page, bytes).ok());
    }
  }
  EXPECT_EQ(copy->set_bits(), copy->CountSetBits());
  EXPECT_GT(copy->set_bits(), filter->set_bits());
}

TEST(BlockedBloomFilterTest, PagesRoundTripAndTrackDirt) {
  absl::BitGen gen;
  auto source = MakeFilter(50'000, 0.01);  // ~60 KB: several pages, the last one short
  ASSERT_GT(source->num_pages(), 2u);
  EXPECT_TRUE(source->TakeDirtyPages().empty());
  const std::vector<uint64_t> hashes = RandomHashes(50'000, gen);
  source->AddMany(hashes);
  const std::vector<uint64_t> dirty = source->TakeDirtyPages();
  EXPECT_EQ(dirty.size(), source->num_pages());
  EXPECT_TRUE(source->TakeDirtyPages().empty());

  auto copy = MakeFilter(50'000, 0.01);
  for (uint64_t page = 0; page < source->num_pages(); ++page) {
    std::string bytes(source->page_size(page), '\0');
    source->ReadPage(page, bytes.data());
    ASSERT_TRUE(copy->OrPage(page, bytes).ok());
  }
  EXPECT_EQ(copy->CountSetBits(), source->CountSetBits());
  for (uint64_t h : hashes) ASSERT_TRUE(copy->MightContain(h));
  // Both counts against std::popcount over the persisted bytes.
  uint64_t counted = 0;
  for (uint64_t page = 0; page < source->num_pages(); ++page) {
    std::string bytes(source->page_size(page), '\0');
    source->ReadPage(page, bytes.data());
    for (size_t i = 0; i < bytes.size(); i += 8) {
      uint64_t word;
      std::memcpy(&word, bytes.data() + i, 8);
      counted += std::popcount(word);
    }
  }
  EXPECT_EQ(source->CountSetBits(), counted);
  EXPECT_EQ(source->set_bits(), counted);

  EXPECT_FALSE(copy->OrPage(0, "short").ok());
  EXPECT_FALSE(copy->OrPage(copy->num_pages(), std::string(16384, '\0')).ok());

  // Re-adding present items dirties nothing; one new item dirties exactly its page.
  source->AddMany(hashes);
  EXPECT_TRUE(source->TakeDirtyPages().empty());
}

// Every way the bits are held (a slab slot; a malloc block with the dirty-page word in the
// object, or behind the bits; mapped) keeps the companion room its owner asked for apart from
// the bits, and dirties exactly the pages whose bits it set.
TEST(BlockedBloomFilterTest, CompanionRoomIsApartAndEveryStorageTracksItsPages) {
  absl::BitGen gen;
  // 23 blocks: a slab slot; 2,000 (8 pages) and 20,000 (79 pages, more than the object's
  // dirty word holds): malloc blocks; 40,000 (2.5 MB): mapped.
  for (uint64_t num_blocks : {23, 2'000, 20'000, 40'000}) {
    for (size_t companion : {0, 8, 40, 48, 192}) {
      SCOPED_TRACE(testing::Message() << num_blocks << " blocks, companion " << companion);
      absl::StatusOr<std::unique_ptr<BlockedBloomFilter>> created =
          BlockedBloomFilter::Create({num_blocks, 7}, companion);
      ASSERT_TRUE(created.ok()) << created.status();
      BlockedBloomFilter& filter = **created;
      EXPECT_EQ(filter.layout(), (BlockedLayout{num_blocks, 7}));
      const bool mapped = num_blocks == 40'000;
      ASSERT_EQ(filter.companion_bytes(), mapped ? 0 : companion);
      ASSERT_EQ(filter.companion() == nullptr, mapped || companion == 0);
      if (filter.companion() != nullptr) std::memset(filter.companion(), 0xab, companion);
      EXPECT_EQ(filter.CountSetBits(), 0u);

      const std::vector<uint64_t> hashes = RandomHashes(num_blocks / 10 + 1, gen);
      filter.AddMany(absl::MakeSpan(hashes).subspan(1));
      filter.Add(hashes[0]);
      std::vector<uint64_t> with_bits;
      for (uint64_t page = 0; page < filter.num_pages(); ++page) {
        std::string bytes(filter.page_size(page), '\0');
        filter.ReadPage(page, bytes.data());
        if (bytes.find_first_not_of('\0') != std::string::npos) with_bits.push_back(page);
      }
      EXPECT_EQ(filter.TakeDirtyPages(), with_bits);
      EXPECT_EQ(filter.set_bits(), filter.CountSetBits());
      for (uint64_t h : hashes) ASSERT_TRUE(filter.MightContain(h));
      if (filter.companion() != nullptr) {
        const auto* room = static_cast<const unsigned char*>(filter.companion());
        EXPECT_TRUE(std::all_of(room, room + companion, [](unsigned char c) { return c == 0xab; }));
      }
    }
  }
  for (size_t bad : {size_t{7}, BlockedBloomFilter::kMaxCompanionBytes + 8}) {
    EXPECT_EQ(BlockedBloomFilter::Create({23, 7}, bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(BlockedBloomFilterTest, ConcurrentAddersAndReadersSeeNoFalseNegatives) {
  auto filter = MakeFilter(400'000, 0.01);
  constexpr int kThreads = 4;
  std::vector<std::vector<uint64_t>> per_thread(kThreads);
  absl::BitGen gen;
  for (auto& hashes : per_thread) hashes = RandomHashes(100'000, gen);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t h : per_thread[t]) {
        filter->Add(h);
        // Our own add is visible at once, whatever the other threads do.
        if (!filter->MightContain(h)) ADD_FAILURE() << "false negative right after add";
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& hashes : per_thread) {
    for (uint64_t h : hashes) ASSERT_TRUE(filter->MightContain(h));
  }
}

}  // namespace
}  // namespace bloom

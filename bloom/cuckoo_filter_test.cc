// Tests of the cuckoo filter: sizing, measured false-positive rates, Remove and Count, growth,
// all-or-nothing adds, pages, and determinism (cuckoo_table.h, cuckoo_filter.h).
#include "bloom/cuckoo_filter.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bloom/hash.h"
#include "gtest/gtest.h"
#include "tests/support/items.h"

namespace bloom {
namespace {

using bloomtest::Items;
using bloomtest::Views;

FilterParams Spec(uint64_t capacity, double error_rate, bool non_scaling) {
  FilterParams spec{.capacity = capacity, .error_rate = error_rate, .non_scaling = non_scaling};
  absl::StatusOr<FilterParams> normalized = NormalizeSpec(spec);
  EXPECT_TRUE(normalized.ok()) << normalized.status();
  return *normalized;
}

// Adds `items` in batches of 1,000.
void AddAll(CuckooFilter& filter, const std::vector<std::string>& items) {
  for (size_t begin = 0; begin < items.size(); begin += 1000) {
    const size_t end = std::min(items.size(), begin + 1000);
    std::vector<absl::string_view> batch(items.begin() + begin, items.begin() + end);
    ASSERT_TRUE(filter.Add(batch).ok()) << "batch at " << begin;
  }
}

double MeasuredFalsePositiveRate(const CuckooFilter& filter, int absent) {
  const std::vector<std::string> probes = Items("absent-", 0, absent);
  const std::vector<bool> present = filter.MightContain(Views(probes));
  return static_cast<double>(std::count(present.begin(), present.end(), true)) / absent;
}

TEST(CuckooLayoutTest, TakesTheFewestFingerprintBitsThatMeetTheRate) {
  for (double rate : {0.1, 0.03, 0.01, 0.001, 1e-4, 1e-6}) {
    absl::StatusOr<CuckooLayout> layout = ChooseCuckooLayout(1'000'000, rate);
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_LE(CuckooFalsePositiveRate(kCuckooMaxLoad, layout->fingerprint_bits), rate) << rate;
    if (layout->fingerprint_bits > kMinFingerprintBits) {
      EXPECT_GT(CuckooFalsePositiveRate(kCuckooMaxLoad, layout->fingerprint_bits - 1), rate)
          << rate;
    }
    // Room for the capacity at kCuckooMaxLoad, and one bucket more (cuckoo_table.cc).
    EXPECT_GE((layout->slots() - kCuckooBucketSlots) * kCuckooMaxLoad, 1'000'000.0 - 1e-6);
    EXPECT_LT((layout->slots() - uint64_t{2} * kCuckooBucketSlots) * kCuckooMaxLoad, 1'000'000.0);
  }
  // Fewer bits per item than a Bloom filter below 3% (Fan et al.).
  absl::StatusOr<CuckooLayout> one_percent = ChooseCuckooLayout(1'000'000, 0.01);
  ASSERT_TRUE(one_percent.ok());
  EXPECT_EQ(one_percent->fingerprint_bits, 10u);
}

TEST(CuckooLayoutTest, RefusesWhatItCannotBuild) {
  EXPECT_EQ(ChooseCuckooLayout(0, 0.01).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseCuckooLayout(10, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseCuckooLayout(10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseCuckooLayout(10, 1e-12).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ChooseCuckooLayout(uint64_t{1} << 62, 0.01).status().code(),
            absl::StatusCode::kResourceExhausted);
  FilterParams windowed = Spec(1000, 0.01, false);
  windowed.window = absl::Hours(1);
  EXPECT_EQ(CuckooFilter::Create(windowed, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

// The bar: at full capacity, over 1M absent items, the measured rate is at most the
// target. Non-scaling filters are the tight case (one table at the whole error rate); scalable
// ones give their first table half of it.
TEST(CuckooFilterTest, MeasuredFalsePositiveRateAtFullCapacityMeetsTheTarget) {
  for (double rate : {0.001, 0.01, 0.03}) {
    for (bool non_scaling : {true, false}) {
      constexpr uint64_t kCapacity = 200'000;
      absl::StatusOr<std::unique_ptr<CuckooFilter>> filter =
          CuckooFilter::Create(Spec(kCapacity, rate, non_scaling), 42);
      ASSERT_TRUE(filter.ok()) << filter.status();
      AddAll(**filter, Items("item-", 0, kCapacity));
      EXPECT_EQ((*filter)->num_tables(), 1);
      const double measured = MeasuredFalsePositiveRate(**filter, 1'000'000);
      EXPECT_LE(measured, rate) << "rate " << rate << " non_scaling " << non_scaling;
      EXPECT_GT(measured, rate / 8) << "fingerprints far larger than the rate needs";
      EXPECT_LE((*filter)->Stats().estimated_error_rate, rate);
    }
  }
}

TEST(CuckooFilterTest, NoFalseNegativesAcrossGrowth) {
  absl::StatusOr<std::unique_ptr<CuckooFilter>> filter =
      CuckooFilter::Create(Spec(1000, 0.01, false), 7);
  ASSERT_TRUE(filter.ok());
  const std::vector<std::string> items = Items("grow-", 0, 100'000);
  AddAll(**filter, items);
  EXPECT_GE((*filter)->num_tables(), 6);  // 1000 * (1 + 2 + ... + 2^6) > 100,000
  for (bool present : (*filter)->MightContain(Views(items))) ASSERT_TRUE(present);
  const CuckooFilterStats stats = (*filter)->Stats();
  EXPECT_EQ(stats.items, items.size());
  EXPECT_LE(stats.estimated_error_rate, 0.01);
  EXPECT_LE(MeasuredFalsePositiveRate(**filter, 200'000), 0.01);
  // Each table's fingerprints are one bit longer than the one before: half the error rate.
  for (size_t t = 1; t < stats.tables.size(); ++t) {
    EXPECT_EQ(stats.tables[t].fingerprint_bits, stats.tables[t - 1].fingerprint_bits + 1);
    EXPECT_LE(stats.tables[t].items, stats.tables[t].capacity);
  }
}

TEST(CuckooFilterTest, RemovedItemsReadAbsentAndKeptItemsPresent) {
  constexpr int kItems = 100'000;
  absl::StatusOr<std::unique_ptr<CuckooFilter>> filter =
      CuckooFilter::Create(Spec(kItems, 0.01, false), 99);
  ASSERT_TRUE(filter.ok());
  const std::vector<std::string> kept = Items("kept-", 0, kItems / 2);
  const std::vector<std::string> gone = Items("gone-", 0, kItems / 2);
  AddAll(**filter, kept);
  AddAll(**filter, gone);
  for (bool removed : (*filter)->Remove(Views(gone))) ASSERT_TRUE(removed);
  for (bool present : (*filter)->MightContain(Views(kept))) ASSERT_TRUE(present);
  const std::vector<bool> still = (*filter)->MightContain(Views(gone));
  const double collisions =
      static_cast<double>(std::count(still.begin(), still.end(), true)) / gone.size();
  EXPECT_LE(collisions, 0.01);  // another item's fingerprint in the same buckets
  EXPECT_EQ((*filter)->Stats().items, kept.size());
}

TEST(CuckooFilterTest, CountsCopiesAndRemoveTakesOneAtATime) {
  absl::StatusOr<std::unique_ptr<CuckooFilter>> filter =
      CuckooFilter::Create(Spec(1000, 0.001, false), 5);
  ASSERT_TRUE(filter.ok());
  const std::vector<absl::string_view> thrice = {"a", "a", "a", "b"};
  ASSERT_TRUE((*filter)->Add(thrice).ok());
  const std::vector<absl::string_view> asked = {"a", "b", "never"};
  EXPECT_EQ((*filter)->Count(asked), (std::vector<uint32_t>{3, 1, 0}));
  EXPECT_EQ((*filter)->Remove({"a", "b", "b"}), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((*filter)->Count(asked), (std::vector<uint32_t>{2, 0, 0}));
  EXPECT_EQ((*filter)->MightContain(asked), (std::vector<bool>{true, false, false}));
  // More copies than two buckets hold go to the next table.
  std::vector<absl::string_view> many(20, "c");
  ASSERT_TRUE((*filter)->Add(many).ok());
  EXPECT_EQ((*filter)->Count({"c"})[0], 20u);
  EXPECT_GE((*filter)->num_tables(), 2);
}

TEST(CuckooFilterTest, OneBatchRemovesCopiesFromEveryTableAndNoMoreThanItHas) {
  // A batch is removed table by table (newest first): each of its items still takes one copy,
  // wherever that copy is, and an item asked for more often than it has copies answers false
  // for the rest.
  absl::StatusOr<std::unique_ptr<CuckooFilter>> filter =
      CuckooFilter::Create(Spec(1000, 1e-6, false), 11);
  ASSERT_TRUE(filter.ok());
  ASSERT_TRUE((*filter)->Add({"early"}).ok());  // table 0
  AddAll(**filter, Items("fill-", 0, 3000));    // the chain grows
  ASSERT_GE((*filter)->num_tables(), 2);
  ASSERT_TRUE((*filter)->Add({"early", "late"}).ok());  // the newest table
  EXPECT_EQ((*filter)->Count({"early"})[0], 2u);
  const std::vector<absl::string_view> batch = {"early", "late", "early", "early", "never"};
  EXPECT_EQ((*filter)->Remove(batch), (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ((*filter)->Count({"early", "late"}), (std::vector<uint32_t>{0, 0}));
  // Every other item kept its copy.
  const std::vector<std::string> kept = Items("fill-", 0, 3000);
  const std::vector<bool> present = (*filter)->MightContain(Views(kept));
  EXPECT_EQ(std::count(present.begin(), present.end(), false), 0);
}

TEST(CuckooFilterTest, AFullNonScalingFilterRefusesTheWholeBatchAndChangesNothing) {
  absl::StatusOr<std::unique_ptr<CuckooFilter>> filter =
      CuckooFilter::Create(Spec(1000, 0.01, true), 11);
  ASSERT_TRUE(filter.ok());
  AddAll(**filter, Items("fill-", 0, 995));
  const std::vector<std::string> probes = Items("probe-", 0, 20'000);
  const std::vector<bool> before = (*filter)->MightContain(Views(probes));
  const std::vector<std::string> overflow = Items("over-", 0, 10);
  absl::Status added = (*filter)->Add(Views(overflow));
  EXPECT_EQ(added.code(), absl::StatusCode::kResourceExhausted) << added;
  EXPECT_NE(added.message().find("none of the batch"), std::string::npos) << added;
  EXPECT_EQ((*filter)->Stats().items, 995u);
  EXPECT_EQ((*filter)->num_tables(), 1);
  EXPECT_EQ((*filter)->MightContain(Views(probes)), before);
  // Five fit exactly.
  const std::vector<std::string> last = Items("last-", 0, 5);
  EXPECT_TRUE((*filter)->Add(Views(last)).ok());
  EXPECT_EQ((*filter)->Add({"one-more"}).code(), absl::StatusCode::kResourceExhausted);
}

// A table sized for `capacity` at kCuckooMaxLoad takes `capacity` items, small or large.
TEST(CuckooFilterTest, EveryNonScalingFilterHoldsItsCapacity) {
  std::vector<uint64_t> capacities;
  for (uint64_t c = 1; c <= 1000; ++c) capacities.push_back(c);
  for (uint64_t c : {1'000, 4'096, 10'007, 65'536, 250'000}) capacities.push_back(c);
  for (uint64_t capacity : capacities) {
    for (uint64_t seed : {1, 2, 3, 4}) {
      absl::StatusOr<std::unique_ptr<CuckooFilter>> filter =
          CuckooFilter::Create(Spec(capacity, 0.01, true), seed);
      ASSERT_TRUE(filter.ok());
      const std::vector<std::string> items =
          Items(absl::StrCat("c", capacity, "-"), 0, static_cast<int>(capacity));
      ASSERT_TRUE((*filter)->Add(Views(items)).ok()) << "capacity " << capacity << " seed " << seed;
    }
  }
}

TEST(CuckooFilterTest, SameSeedAndInsertsGiveTheSameBytesAnotherSeedOthers) {
  auto build = [](uint64_t seed) {
    std::unique_ptr<CuckooFilter> filter = *CuckooFilter::Create(Spec(10'000, 0.01, false), seed);
    const std::vector<std::string> items = Items("same-", 0, 9'000);
    EXPECT_TRUE(filter->Add(Views(items)).ok());
    EXPECT_EQ(filter->Remove({"same-17", "same-4000"}), (std::vector<bool>{true, true}));
    std::string bytes;
    filter->ForEachTable([&](int, const CuckooTable& table) {
      for (uint64_t page = 0; page < table.num_pages(); ++page) bytes += table.ReadPage(page);
    });
    return bytes;
  };
  const std::string first = build(1234);
  EXPECT_EQ(first, build(1234));
  EXPECT_NE(first, build(1235));
}

TEST(CuckooTableTest, PagesRoundTripWithTheirOccupancyAndReportWhatChanged) {
  absl::StatusOr<CuckooLayout> layout = ChooseCuckooLayout(60'000, 0.001);
  ASSERT_TRUE(layout.ok());
  std::unique_ptr<CuckooTable> table = *CuckooTable::Create(*layout, 77);
  ASSERT_GT(table->num_pages(), 3u);
  for (int i = 0; i < 50'000; ++i) {
    ASSERT_TRUE(table->Insert(table->ProbeFor(HashItem(absl::StrCat("p", i), 3))));
  }
  std::vector<uint64_t> dirty = table->TakeDirtyPages();
  EXPECT_EQ(dirty.size(), table->num_pages());
  EXPECT_TRUE(table->TakeDirtyPages().empty());
  ASSERT_TRUE(table->Remove(table->ProbeFor(HashItem("p7", 3))));
  dirty = table->TakeDirtyPages();
  EXPECT_GE(dirty.size(), 1u);
  EXPECT_LE(dirty.size(), 2u);  // a fingerprint can straddle two pages

  std::unique_ptr<CuckooTable> copy = *CuckooTable::Create(*layout, 77);
  for (uint64_t page = 0; page < table->num_pages(); ++page) {
    ASSERT_TRUE(copy->LoadPage(page, table->ReadPage(page)).ok());
  }
  EXPECT_EQ(copy->occupied(), 49'999u);
  for (int i = 0; i < 50'000; ++i) {
    const CuckooTable::Probe probe = copy->ProbeFor(HashItem(absl::StrCat("p", i), 3));
    EXPECT_EQ(copy->Count(probe), table->Count(probe));
  }
  // Loading over a page recounts what it replaced.
  ASSERT_TRUE(copy->LoadPage(0, std::string(table->ReadPage(0).size(), '\0')).ok());
  EXPECT_LT(copy->occupied(), 49'999u);
  EXPECT_EQ(copy->LoadPage(table->num_pages(), "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(copy->LoadPage(0, "short").code(), absl::StatusCode::kInvalidArgument);
}

// One bucket: every item's pair is (0, 0), so the fifth copy finds no walk and goes to the stash,
// which answers, counts, removes and persists like a bucket.
TEST(CuckooTableTest, TheStashTakesWhatNoWalkPlacesAndPersistsWithThePages) {
  const CuckooLayout layout{.num_buckets = 1, .fingerprint_bits = 16};
  std::unique_ptr<CuckooTable> table = *CuckooTable::Create(layout, 5);
  std::vector<CuckooTable::Probe> probes;
  probes.reserve(kCuckooBucketSlots + kStashEntries + 1);
  for (int i = 0; i < kCuckooBucketSlots + kStashEntries + 1; ++i) {
    probes.push_back(table->ProbeFor(HashItem(absl::StrCat("s", i), 1)));
  }
  for (int i = 0; i < kCuckooBucketSlots + kStashEntries; ++i) {
    ASSERT_TRUE(table->Insert(probes[i])) << i;
  }
  EXPECT_FALSE(table->Insert(probes.back()));  // bucket and stash full
  EXPECT_EQ(table->occupied(), static_cast<uint64_t>(kCuckooBucketSlots + kStashEntries));
  for (int i = 0; i < kCuckooBucketSlots + kStashEntries; ++i) {
    EXPECT_TRUE(table->Contains(probes[i])) << i;
  }
  std::unique_ptr<CuckooTable> copy = *CuckooTable::Create(layout, 5);
  ASSERT_TRUE(copy->LoadPage(0, table->ReadPage(0)).ok());
  EXPECT_EQ(copy->occupied(), table->occupied());
  const CuckooTable::Probe& stashed = probes[kCuckooBucketSlots + kStashEntries - 1];
  EXPECT_GE(copy->Count(stashed), 1);
  EXPECT_TRUE(copy->Remove(stashed));
  EXPECT_TRUE(copy->Insert(probes.back()));  // the freed room takes the one refused
  EXPECT_TRUE(copy->Contains(probes.back()));
}

// The alternate bucket depends on the table's key (from the filter's seed): knowing an item's
// fingerprint and first bucket does not tell an attacker where its copy may move.
TEST(CuckooTableTest, TheAlternateBucketIsKeyed) {
  const CuckooLayout layout{.num_buckets = 1 << 16, .fingerprint_bits = 12};
  std::unique_ptr<CuckooTable> one = *CuckooTable::Create(layout, 1);
  std::unique_ptr<CuckooTable> other = *CuckooTable::Create(layout, 2);
  int same = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t hash = HashItem(absl::StrCat("k", i), 9);
    const CuckooTable::Probe a = one->ProbeFor(hash), b = other->ProbeFor(hash);
    ASSERT_EQ(a.bucket1, b.bucket1);
    ASSERT_EQ(a.fingerprint, b.fingerprint);
    same += a.bucket2 == b.bucket2;
  }
  EXPECT_LT(same, 5);
}

// Contains and FreeSlot read a bucket as one word for fingerprints of up to 14 bits (every
// width up to 32 is built: the word's lane masks must not shift past 64 bits); Count
// reads slot by slot. They agree on every probe, full table or not, at every width.
TEST(CuckooTableTest, TheWordWideBucketReadAgreesWithSlotBySlot) {
  for (uint32_t bits = kMinFingerprintBits; bits <= kMaxFingerprintBits; ++bits) {
    SCOPED_TRACE(absl::StrCat(bits, "-bit fingerprints"));
    absl::StatusOr<std::unique_ptr<CuckooTable>> table =
        CuckooTable::Create({.num_buckets = 257, .fingerprint_bits = bits}, bits);
    ASSERT_TRUE(table.ok());
    int inserted = 0;
    for (uint64_t i = 0; i < 2000 && (*table)->load() < 0.97; ++i) {
      inserted += (*table)->Insert((*table)->ProbeFor(HashItem(absl::StrCat("x", i), bits)));
    }
    EXPECT_GT(inserted, 900);  // a walk fills buckets: every slot pattern occurs
    for (uint64_t i = 0; i < 20'000; ++i) {
      const CuckooTable::Probe probe =
          (*table)->ProbeFor(HashItem(absl::StrCat(i % 2 ? "x" : "y", i / 2), bits));
      ASSERT_EQ((*table)->Contains(probe), (*table)->Count(probe) > 0) << i;
    }
  }
}

}  // namespace
}  // namespace bloom

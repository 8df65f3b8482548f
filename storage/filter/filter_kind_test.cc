// FilterKind (filter_kind.h): for every kind, what its records say agrees with what it builds
// from them, and the kinds are told apart by what the store asks of them.
#include "storage/filter/filter_kind.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "storage/format/encoding.h"
#include "storage/memory/resident_charge.h"

namespace storage {
namespace {

constexpr bloom::FilterKind kKinds[] = {bloom::FilterKind::kBloom, bloom::FilterKind::kCuckoo};

// A normalized spec of `kind` for `capacity` items at 1%.
bloom::FilterParams SpecOf(bloom::FilterKind kind, uint64_t capacity) {
  bloom::FilterParams spec;
  spec.capacity = capacity;
  spec.error_rate = 0.01;
  spec.kind = kind;
  absl::StatusOr<bloom::FilterParams> normalized = bloom::NormalizeSpec(spec);
  EXPECT_TRUE(normalized.ok()) << normalized.status();
  return *normalized;
}

// The record of a new filter of `spec` with `tables` sub-filters, as the store writes it.
FilterRecord NewRecord(const bloom::FilterParams& spec, int tables) {
  const FilterKind& kind = FilterKind::Of(spec);
  FilterRecord record;
  record.generation = 7;
  record.seed = 42;
  record.spec = spec;
  for (int i = 0; i < tables; ++i) {
    absl::StatusOr<SubFilterRecord> sub = kind.NewSubFilterRecord(spec, i, absl::Now());
    EXPECT_TRUE(sub.ok()) << sub.status();
    record.sub_filters.push_back(*sub);
  }
  return record;
}

TEST(FilterKindTest, EachKindAnswersForItsOwnSpec) {
  EXPECT_EQ(FilterKind::Of(bloom::FilterKind::kBloom).name(), "BLOOM");
  EXPECT_EQ(FilterKind::Of(bloom::FilterKind::kCuckoo).name(), "CUCKOO");
  EXPECT_EQ(&FilterKind::Of(SpecOf(bloom::FilterKind::kCuckoo, 100)),
            &FilterKind::Of(bloom::FilterKind::kCuckoo));
  // Merge ORs Bloom bits; a cuckoo filter is copied to be exported.
  EXPECT_TRUE(FilterKind::Of(bloom::FilterKind::kBloom).mergeable());
  EXPECT_FALSE(FilterKind::Of(bloom::FilterKind::kCuckoo).mergeable());
  EXPECT_FALSE(FilterKind::Of(bloom::FilterKind::kBloom).exports_a_copy());
  EXPECT_TRUE(FilterKind::Of(bloom::FilterKind::kCuckoo).exports_a_copy());
  // A dump says which kind it holds by its version alone.
  EXPECT_NE(FilterKind::Of(bloom::FilterKind::kBloom).dump_version(),
            FilterKind::Of(bloom::FilterKind::kCuckoo).dump_version());
}

TEST(FilterKindTest, ANewRecordIsValidAndBuildsWhatItsBytesSay) {
  for (const bloom::FilterKind kind_id : kKinds) {
    const FilterKind& kind = FilterKind::Of(kind_id);
    for (const uint64_t capacity : {uint64_t{1}, uint64_t{1000}, uint64_t{1'000'000}}) {
      SCOPED_TRACE(std::string(kind.name()) + " of capacity " + std::to_string(capacity));
      const FilterRecord record = NewRecord(SpecOf(kind_id, capacity), 3);
      for (const SubFilterRecord& sub : record.sub_filters) EXPECT_TRUE(kind.ValidLayout(sub));
      // It survives its encoding (which checks the layouts with ValidLayout).
      absl::StatusOr<FilterRecord> decoded = DecodeFilterRecord(EncodeFilterRecord(record));
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(decoded->spec.kind, kind_id);

      absl::StatusOr<BuiltFilter> built = kind.Build(record, bloomtime::Clock::Real(), false);
      ASSERT_TRUE(built.ok()) << built.status();
      EXPECT_EQ(built->chain != nullptr, kind_id == bloom::FilterKind::kBloom);
      EXPECT_EQ(built->cuckoo != nullptr, kind_id == bloom::FilterKind::kCuckoo);
      // The budget charges a cold filter from its record what the built one is charged.
      EXPECT_EQ(RecordCharge(record), built->charge());
      EXPECT_GT(kind.BitsBytes(record), 0u);

      // A record with no items is expected empty, whatever its size.
      const bloom::ScalableFilterStats expected = kind.ExpectedStats(record, absl::Now());
      EXPECT_EQ(expected.items_added, 0u);
      EXPECT_EQ(expected.sub_filters.size(), 3u);
      // Its bits' bytes; the charge may round a cuckoo table up to the budget's unit.
      EXPECT_GT(expected.size_bytes, 0u);
      EXPECT_LE(expected.size_bytes, kind.BitsBytes(record));
      if (kind_id == bloom::FilterKind::kBloom) {
        EXPECT_EQ(expected.size_bytes, kind.BitsBytes(record));
      }
    }
  }
}

// A record's counts are not checked against its capacity (a merge sums its sources', and an
// imported dump's header says what it likes): any count gives stats, at once.
TEST(FilterKindTest, ARecordClaimingAnyCountIsExpectedFull) {
  for (const bloom::FilterKind kind_id : kKinds) {
    const FilterKind& kind = FilterKind::Of(kind_id);
    FilterRecord record = NewRecord(SpecOf(kind_id, 1000), 1);
    record.sub_filters[0].items_added = uint64_t{1} << 60;
    const bloom::ScalableFilterStats stats = kind.ExpectedStats(record, absl::Now());
    EXPECT_EQ(stats.items_added, uint64_t{1} << 60) << kind.name();
    // A Bloom filter that full answers "maybe" to everything; a cuckoo table holds at most its
    // slots, whose fingerprints bound the rate.
    if (kind_id == bloom::FilterKind::kBloom) {
      EXPECT_EQ(stats.estimated_error_rate, 1.0);
    }
    EXPECT_GT(stats.estimated_error_rate, 0.0) << kind.name();
    EXPECT_LE(stats.estimated_error_rate, 1.0) << kind.name();
  }
}

TEST(FilterKindTest, NeitherKindAcceptsTheOthersLayoutsAtTheirLimits) {
  // A cuckoo table's fingerprint bits and a Bloom sub-filter's hash count share a field: a
  // record of one kind that holds a value only the other allows is corrupt.
  SubFilterRecord huge_fingerprints;
  huge_fingerprints.num_blocks = 16;
  huge_fingerprints.hash_count = bloom::kMaxFingerprintBits;
  SubFilterRecord too_many_hashes = huge_fingerprints;
  too_many_hashes.hash_count = bloom::kMaxHashCount + 1;
  EXPECT_FALSE(FilterKind::Of(bloom::FilterKind::kBloom).ValidLayout(too_many_hashes));
  SubFilterRecord tiny_fingerprints = huge_fingerprints;
  tiny_fingerprints.hash_count = bloom::kMinFingerprintBits - 1;
  EXPECT_FALSE(FilterKind::Of(bloom::FilterKind::kCuckoo).ValidLayout(tiny_fingerprints));
  SubFilterRecord no_blocks;
  for (const bloom::FilterKind kind : kKinds) {
    EXPECT_FALSE(FilterKind::Of(kind).ValidLayout(no_blocks));
  }
}

}  // namespace
}  // namespace storage

// Export and Import (filter_transfer.h): an identical filter under a new name, an import
// charged as its bits arrive, and dumps that are bad in every way create nothing.
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bloom/window.h"
#include "gtest/gtest.h"
#include "rocksdb/write_batch.h"
#include "storage/filter_store_fixture.h"
#include "storage/format/encoding.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

using bloom::FilterParams;
using bloomtest::Items;
using bloomtest::Views;

using FilterTransferTest = FilterStoreTest;

std::string ExportAll(FilterStore& store, absl::string_view name, int* chunks = nullptr) {
  std::string dump;
  int n = 0;
  absl::Status s = store.Export(name, [&](absl::string_view chunk) {
    EXPECT_LE(chunk.size(), kMaxDumpChunkBytes);
    dump.append(chunk.data(), chunk.size());
    ++n;
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  if (chunks != nullptr) *chunks = n;
  return dump;
}

// Feeds `dump` in chunks of `chunk` bytes and commits.
absl::StatusOr<FilterInfo> ImportAll(FilterStore& store, absl::string_view name,
                                     absl::string_view dump, size_t chunk = 4096) {
  absl::StatusOr<std::unique_ptr<PendingImport>> import = store.BeginImport(name);
  if (!import.ok()) return import.status();
  for (size_t i = 0; i < dump.size(); i += chunk) {
    if (absl::Status s = (*import)->Append(dump.substr(i, chunk)); !s.ok()) return s;
  }
  return store.CommitImport(**import);
}

TEST_F(FilterTransferTest, ExportImportRecreatesAnIdenticalFilter) {
  ASSERT_OK(store_->Reserve("src", {200'000, 0.01, 3, false}).status());
  const std::vector<std::string> items = Items("e", 0, 1'000'000);  // 3 sub-filters, 3 MB
  ASSERT_OK(store_->Add("src", Views(items), nullptr).status());
  int chunks = 0;
  const std::string dump = ExportAll(*store_, "src", &chunks);
  EXPECT_GT(chunks, 1);
  absl::StatusOr<FilterInfo> imported = ImportAll(*store_, "copy", dump, 100'000);
  ASSERT_OK(imported.status());
  absl::StatusOr<FilterInfo> source = store_->Stats("src");
  EXPECT_EQ(imported->spec, source->spec);
  EXPECT_EQ(imported->stats.items_added, source->stats.items_added);
  EXPECT_EQ(imported->stats.fill_ratio, source->stats.fill_ratio);
  EXPECT_EQ(imported->stats.sub_filters.size(), source->stats.sub_filters.size());
  // Identical answers, false positives included (same seed, same bits).
  const std::vector<std::string> probe = Items("probe", 0, 20'000);
  EXPECT_EQ(*store_->MightContain("copy", Views(probe)),
            *store_->MightContain("src", Views(probe)));
  ExpectAllPresent("copy", items);
  // It is a real, persistent filter of its own.
  ASSERT_OK(store_->Delete("src"));
  ASSERT_OK(store_->Close());
  Open();
  ExpectAllPresent("copy", items);
  EXPECT_EQ(store_->Stats("copy")->stats.items_added, imported->stats.items_added);
}

// An import charges its memory as the bits arrive (DumpParser): a client that sends the header
// and then trickles or stalls holds almost none of the budget; a finished import holds the
// filter's charge, like any filter; an abandoned one returns what it held.
TEST_F(FilterTransferTest, AnImportIsChargedAsItsBitsArrive) {
  ASSERT_OK(store_->Reserve("src", {5'000'000, 0.01, 0, true}).status());  // 6 MB of bits
  const std::string dump = ExportAll(*store_, "src");
  const uint64_t before = store_->memory_used();
  {
    absl::StatusOr<std::unique_ptr<PendingImport>> import = store_->BeginImport("copy");
    ASSERT_OK(import.status());
    ASSERT_OK((*import)->Append(dump.substr(0, 4096)));  // the header and a little of the bits
    EXPECT_LE(store_->memory_used(), before + (2u << 20));
    ASSERT_OK((*import)->Append(dump.substr(4096, dump.size() / 2 - 4096)));
    EXPECT_GE(store_->memory_used(), before + dump.size() / 2 - 8192);
    EXPECT_LE(store_->memory_used(), before + dump.size() / 2 + (2u << 20));
  }
  EXPECT_EQ(store_->memory_used(), before);  // abandoned: released
  ASSERT_OK(ImportAll(*store_, "copy", dump, 100'000).status());
  // The copy is charged as its source is (bar the source's per-filter bookkeeping).
  EXPECT_GE(store_->memory_used(), 2 * before - 1024);
  EXPECT_LE(store_->memory_used(), 2 * before);
}

TEST_F(FilterTransferTest, BadDumpsCreateNothing) {
  ASSERT_OK(store_->Reserve("src", {1000, 0.01}).status());
  ASSERT_OK(store_->Add("src", Views(Items("d", 0, 500)), nullptr).status());
  const std::string dump = ExportAll(*store_, "src");
  std::string flipped_bits = dump;
  flipped_bits[dump.size() / 2] ^= 1;
  std::string flipped_header = dump;
  flipped_header[20] ^= 1;
  struct Case {
    std::string name, dump;
    absl::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"truncated", dump.substr(0, dump.size() - 1), absl::StatusCode::kInvalidArgument},
      {"header-only", dump.substr(0, 30), absl::StatusCode::kInvalidArgument},
      {"empty", "", absl::StatusCode::kInvalidArgument},
      {"foreign", "GIF89a and then some bytes that are not a dump",
       absl::StatusCode::kInvalidArgument},
      {"bits-flipped", flipped_bits, absl::StatusCode::kDataLoss},
      {"header-flipped", flipped_header, absl::StatusCode::kDataLoss},
      {"trailing", dump + "x", absl::StatusCode::kInvalidArgument},
  };
  const uint64_t memory = store_->memory_used();
  for (const Case& c : cases) {
    EXPECT_EQ(ImportAll(*store_, c.name, c.dump).status().code(), c.code) << c.name;
    EXPECT_EQ(store_->Stats(c.name).status().code(), absl::StatusCode::kNotFound) << c.name;
  }
  EXPECT_EQ(store_->memory_used(), memory);  // failed imports gave their memory back
  EXPECT_EQ(ImportAll(*store_, "src", dump).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ImportAll(*store_, "bad name", dump).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK(store_->Close());
  Open();
  EXPECT_EQ(store_->num_filters(), 1u);
}

// A dump whose header lists more sub-filters in one time slice than a slice can grow (only a
// corrupt or hand-made dump can) is refused as INVALID_ARGUMENT naming the slice position,
// before any bits are read, and creates nothing.
TEST_F(FilterTransferTest, ADumpWithASliceOfTooManySubFiltersIsRefused) {
  ASSERT_OK(store_->Reserve("src", {1000, 0.01}).status());
  const std::string real = ExportAll(*store_, "src");
  absl::StatusOr<bloom::FilterParams> spec =
      bloom::NormalizeSpec({.capacity = 1000, .error_rate = 0.01, .window = absl::Hours(1)});
  ASSERT_OK(spec.status());
  absl::StatusOr<bloom::SubFilterShape> shape = bloom::SubFilterShapeFor(*spec, 0);
  ASSERT_OK(shape.status());
  FilterRecord record;
  record.generation = 1;
  record.seed = 7;
  record.created_at_micros = absl::ToUnixMicros(absl::Now());
  record.spec = *spec;
  const int64_t slice = bloom::SliceStartMicros(*spec, absl::Now());
  record.sub_filters.assign(bloom::kMaxSubFilters + 1,
                            SubFilterRecord{.capacity = shape->capacity,
                                            .error_rate = shape->error_rate,
                                            .num_blocks = shape->layout.num_blocks,
                                            .hash_count = shape->layout.hash_count,
                                            .slice_start_micros = slice});
  const std::string header = EncodeFilterRecord(record);
  const auto header_length = static_cast<uint32_t>(header.size());
  // A real dump's magic bytes and format version, then this header (the bits never come).
  std::string dump = real.substr(0, 6);
  dump.append(reinterpret_cast<const char*>(&header_length), sizeof(header_length));
  dump += header;
  const uint64_t memory = store_->memory_used();
  const absl::Status refused = ImportAll(*store_, "crafted", dump).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "position 64 of its time slice")) << refused;
  EXPECT_EQ(store_->Stats("crafted").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->memory_used(), memory);
}

}  // namespace
}  // namespace storage

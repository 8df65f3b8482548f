// The five clients (C++, Python, Go, Node.js, Java) add and check the same items in one filter
// and must agree on every answer: an item is its bytes, whatever the language.
//
// Each language adds its own fifth of the items (text, UTF-8, and binary with NUL, 0xff and
// newlines), some through its pipelined mode (one concurrent call per item, coalesced); then
// each checks every item plus never-added probes, unary and pipelined. Every added item must
// read present in every language, and all answers, false positives included, must be equal.
// The other languages run their `polyglot` programs (client/*/polyglot*), items in hex.
#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/support/polyglot_command.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace {

using bloomtest::PolyglotCommand;

using bloomtest::RunCommand;
using Items = std::vector<std::string>;

constexpr char kFilter[] = "polyglot:seen";

Items LanguageItems(const std::string& language, std::mt19937_64& random) {
  Items items;
  for (int i = 0; i < 100; ++i) items.push_back(absl::StrCat(language, "-user-", i));
  for (int i = 0; i < 50; ++i) items.push_back(absl::StrCat("ünïcødé-", language, "-ß-東京-", i));
  for (int i = 0; i < 50; ++i) {
    std::string binary = absl::StrCat(language, std::string(1, '\0'), "\xff\n\r", i);
    for (int j = 0; j < 12; ++j) binary.push_back(static_cast<char>(random() & 0xff));
    items.push_back(binary);
  }
  return items;
}

class PolyglotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = bloomtest::ServerProcess::Start(data_.path());
    ASSERT_NE(server_, nullptr);
    bloomclient::ClientOptions options;
    client_ = bloomclient::BloomClient::Connect(server_->target(), options);
  }

  // Runs `language`'s polyglot program in `mode` over `items`; returns its lines.
  std::vector<std::string> RunLines(const std::string& language, const std::string& mode,
                                    const std::string& filter, const Items& items) {
    const std::string input = absl::StrCat(files_.path(), "/", language, "-", mode, ".hex");
    {
      std::ofstream out(input);
      for (const std::string& item : items) out << absl::BytesToHexString(item) << "\n";
    }
    bloomtest::CommandResult result = RunCommand(absl::StrCat(
        PolyglotCommand(language), " ", server_->target(), " ", filter, " ", mode, " < ", input));
    EXPECT_EQ(result.exit_code, 0) << language << " " << mode << ": " << result.out;
    std::vector<std::string> lines = absl::StrSplit(result.out, '\n', absl::SkipEmpty());
    EXPECT_EQ(lines.size(), items.size()) << language << " " << mode << ": " << result.out;
    return lines;
  }

  // Runs `language`'s polyglot program in `mode` over `items`; returns its answers.
  std::vector<bool> Run(const std::string& language, const std::string& mode, const Items& items) {
    const std::string input = absl::StrCat(files_.path(), "/", language, "-", mode, ".hex");
    {
      std::ofstream out(input);
      for (const std::string& item : items) out << absl::BytesToHexString(item) << "\n";
    }
    bloomtest::CommandResult result = RunCommand(absl::StrCat(
        PolyglotCommand(language), " ", server_->target(), " ", kFilter, " ", mode, " < ", input));
    EXPECT_EQ(result.exit_code, 0) << language << " " << mode << ": " << result.out;
    std::vector<bool> answers;
    for (absl::string_view line : absl::StrSplit(result.out, '\n', absl::SkipEmpty())) {
      EXPECT_TRUE(line == "1" || line == "0") << language << " printed: " << line;
      answers.push_back(line == "1");
    }
    EXPECT_EQ(answers.size(), items.size()) << language << " " << mode << ": " << result.out;
    return answers;
  }

  bloomtest::TempDir data_, files_;
  std::unique_ptr<bloomtest::ServerProcess> server_;
  std::unique_ptr<bloomclient::BloomClient> client_;
};

TEST_F(PolyglotTest, FiveClientsAgreeOnEveryItem) {
  std::mt19937_64 random(20261122);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(10'000);
  spec.set_error_rate(0.001);  // the polyglot programs create the filter with this spec too

  Items all;
  uint64_t new_items = 0;
  for (const std::string language : {"cpp", "go", "node", "python", "java"}) {
    Items items = LanguageItems(language, random);
    std::vector<bool> added;
    if (language == "cpp") {
      absl::StatusOr<std::vector<bool>> result = client_->Add(kFilter, items, &spec);
      ASSERT_TRUE(result.ok()) << result.status();
      added = *result;
    } else {
      // Go, Python and Java add one concurrent call per item (coalesced); Node.js one batch.
      added = Run(language, language == "node" ? "add" : "add-pipelined", items);
    }
    ASSERT_EQ(added.size(), items.size()) << language;
    int not_new = 0;
    for (bool was_new : added) not_new += was_new ? 0 : 1;
    new_items += added.size() - not_new;
    // Fresh items read as new, but for false positives (0.1%: a handful at most).
    EXPECT_LE(not_new, 3) << language << "'s fresh items read as already added";
    all.insert(all.end(), items.begin(), items.end());
  }
  const size_t added_count = all.size();
  for (int i = 0; i < 2000; ++i) all.push_back(absl::StrCat("never-added-", i));

  absl::StatusOr<std::vector<bool>> cpp = client_->MightContain(kFilter, all);
  ASSERT_TRUE(cpp.ok()) << cpp.status();
  for (size_t i = 0; i < added_count; ++i) {
    ASSERT_TRUE((*cpp)[i]) << "an added item reads absent in C++: " << absl::CHexEscape(all[i]);
  }
  for (const std::string language : {"go", "node", "python", "java"}) {
    for (const std::string mode : {"check", "check-pipelined"}) {
      std::vector<bool> answers = Run(language, mode, all);
      ASSERT_EQ(answers.size(), all.size());
      for (size_t i = 0; i < all.size(); ++i) {
        ASSERT_EQ(answers[i], (*cpp)[i])
            << language << " " << mode << " and C++ disagree on " << absl::CHexEscape(all[i]);
      }
    }
  }
  absl::StatusOr<bloom::v1::FilterStats> stats = client_->Stats(kFilter);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->items_added(), new_items);
}

// A CUCKOO filter through the five clients: each adds its items (the filter made by whichever
// comes first), removes a fifth of its own, and then every language counts every item, added,
// removed and never added, and all must agree with C++. The filter does not grow (capacity
// 10,000 for 800 items), so removing added items is exact: removed items count 0 but for
// false positives, kept ones 1.
TEST_F(PolyglotTest, FiveClientsAgreeOnACuckooFilter) {
  constexpr char kCuckoo[] = "polyglot:cuckoo";
  std::mt19937_64 random(20261127);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(10'000);
  spec.set_error_rate(0.001);
  spec.set_kind(bloom::v1::FILTER_KIND_CUCKOO);
  Items all, removed;
  for (const std::string language : {"cpp", "go", "node", "python", "java"}) {
    Items items = LanguageItems(language, random);
    Items gone(items.begin(), items.begin() + 40);
    if (language == "cpp") {
      ASSERT_OK(client_->Add(kCuckoo, items, &spec).status());
      absl::StatusOr<std::vector<bool>> result = client_->Remove(kCuckoo, gone);
      ASSERT_OK(result.status());
      EXPECT_EQ(std::count(result->begin(), result->end(), true), 40);
    } else {
      for (const std::string& line : RunLines(language, "cuckoo-add", kCuckoo, items)) {
        EXPECT_EQ(line, "1") << language << ": every add of a cuckoo filter adds a copy";
      }
      for (const std::string& line : RunLines(language, "remove", kCuckoo, gone)) {
        EXPECT_EQ(line, "1") << language << ": an added item is removed";
      }
    }
    all.insert(all.end(), items.begin() + 40, items.end());
    removed.insert(removed.end(), gone.begin(), gone.end());
  }
  const size_t kept = all.size();
  all.insert(all.end(), removed.begin(), removed.end());
  for (int i = 0; i < 1000; ++i) all.push_back(absl::StrCat("never-added-", i));

  absl::StatusOr<std::vector<uint32_t>> cpp = client_->Count(kCuckoo, all);
  ASSERT_OK(cpp.status());
  int false_positives = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i < kept) {
      ASSERT_GE((*cpp)[i], 1u) << "a kept item reads absent: " << absl::CHexEscape(all[i]);
    } else {
      false_positives += (*cpp)[i] > 0 ? 1 : 0;
    }
  }
  EXPECT_LE(false_positives, 10) << "0.1% of 1,160 removed and never-added items";
  for (const std::string language : {"go", "node", "python", "java"}) {
    const std::vector<std::string> counts = RunLines(language, "count", kCuckoo, all);
    ASSERT_EQ(counts.size(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(counts[i], absl::StrCat((*cpp)[i]))
          << language << " and C++ disagree on " << absl::CHexEscape(all[i]);
    }
  }
  absl::StatusOr<bloom::v1::FilterStats> stats = client_->Stats(kCuckoo);
  ASSERT_OK(stats.status());
  EXPECT_EQ(stats->items_added(), kept);
  EXPECT_EQ(stats->spec().kind(), bloom::v1::FILTER_KIND_CUCKOO);
}

}  // namespace

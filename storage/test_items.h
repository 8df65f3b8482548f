// Test helper for the storage tests: numbered items and views of them.
#ifndef STORAGE_TEST_ITEMS_H_
#define STORAGE_TEST_ITEMS_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace storage::test_items {

// "<prefix><begin>" ... "<prefix><end - 1>".
inline std::vector<std::string> Items(absl::string_view prefix, int begin, int end) {
  std::vector<std::string> items;
  for (int i = begin; i < end; ++i) items.push_back(absl::StrCat(prefix, i));
  return items;
}

// Views of `items`, which must outlive them.
inline std::vector<absl::string_view> Views(const std::vector<std::string>& items) {
  return {items.begin(), items.end()};
}

}  // namespace storage::test_items

#endif  // STORAGE_TEST_ITEMS_H_

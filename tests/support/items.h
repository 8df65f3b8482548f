// Numbered test items and views of them, for every test that adds items to a filter.
//
// Thread-safety: pure functions.
#ifndef TESTS_SUPPORT_ITEMS_H_
#define TESTS_SUPPORT_ITEMS_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace bloomtest {

// "<prefix><begin>" ... "<prefix><end - 1>".
inline std::vector<std::string> Items(absl::string_view prefix, int begin, int end) {
  std::vector<std::string> items;
  items.reserve(end > begin ? end - begin : 0);
  for (int i = begin; i < end; ++i) items.push_back(absl::StrCat(prefix, i));
  return items;
}

// "<prefix>0" ... "<prefix><n - 1>".
inline std::vector<std::string> Items(absl::string_view prefix, int n) {
  return Items(prefix, 0, n);
}

// Views of `items`, which must outlive them.
inline std::vector<absl::string_view> Views(const std::vector<std::string>& items) {
  return {items.begin(), items.end()};
}

}  // namespace bloomtest

#endif  // TESTS_SUPPORT_ITEMS_H_

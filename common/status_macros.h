// Tiny status helpers (Abseil 20220623 predates its own).
//
//   RETURN_IF_ERROR(store.Delete(name));
//   ASSIGN_OR_RETURN(FilterInfo info, store.Stats(name));
#ifndef COMMON_STATUS_MACROS_H_
#define COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BLOOM_STATUS_CONCAT_INNER(a, b) a##b
#define BLOOM_STATUS_CONCAT(a, b) BLOOM_STATUS_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                                                             \
  do {                                                                                    \
    if (::absl::Status bloom_status_ = (expr); !bloom_status_.ok()) return bloom_status_; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  BLOOM_ASSIGN_OR_RETURN_IMPL(BLOOM_STATUS_CONCAT(bloom_statusor_, __LINE__), lhs, expr)

// `lhs` may be a declaration ("auto x"), which parentheses would break.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define BLOOM_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr)   \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)
// NOLINTEND(bugprone-macro-parentheses)

#endif  // COMMON_STATUS_MACROS_H_

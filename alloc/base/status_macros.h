// Early returns for code that calls functions returning absl::Status or
// absl::StatusOr (abseil has no public macros for them).
#ifndef CUDAFS_ALLOC_BASE_STATUS_MACROS_H_
#define CUDAFS_ALLOC_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"

// Evaluates `expr` (an absl::Status) once and returns it if not OK.
#define CUDAFS_RETURN_IF_ERROR(expr)                                  \
  do {                                                                \
    if (absl::Status cudafs_status_ = (expr); !cudafs_status_.ok()) { \
      return cudafs_status_;                                          \
    }                                                                 \
  } while (false)

// Evaluates `expr` (an absl::StatusOr<T>) once: returns its status if not OK,
// else moves its value into `lhs`, a declaration ("T x") or an lvalue. A
// statement, not an expression; `lhs` may not contain an unparenthesised
// comma.
#define CUDAFS_ASSIGN_OR_RETURN(lhs, expr)                                                      \
  CUDAFS_ASSIGN_OR_RETURN_IMPL_(CUDAFS_STATUS_MACROS_CONCAT_(cudafs_status_or_, __LINE__), lhs, \
                                expr)

#define CUDAFS_ASSIGN_OR_RETURN_IMPL_(status_or, lhs, expr)  \
  auto status_or = (expr);                                   \
  if (!status_or.ok()) return std::move(status_or).status(); \
  lhs = *std::move(status_or)

#define CUDAFS_STATUS_MACROS_CONCAT_(a, b) CUDAFS_STATUS_MACROS_CONCAT_INNER_(a, b)
#define CUDAFS_STATUS_MACROS_CONCAT_INNER_(a, b) a##b

#endif  // CUDAFS_ALLOC_BASE_STATUS_MACROS_H_

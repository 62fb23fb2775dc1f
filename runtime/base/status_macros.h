// The project's one pair of status macros (Abseil 20220623 ships none).
#ifndef REPRISE_RUNTIME_BASE_STATUS_MACROS_H_
#define REPRISE_RUNTIME_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define REPRISE_STATUS_CONCAT_INNER_(a, b) a##b
#define REPRISE_STATUS_CONCAT_(a, b) REPRISE_STATUS_CONCAT_INNER_(a, b)

/// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status reprise_status_ = (expr);           \
    if (!reprise_status_.ok()) return reprise_status_; \
  } while (false)

/// `ASSIGN_OR_RETURN(lhs, expr)`: evaluates `expr` (an absl::StatusOr<T>); on error returns the
/// status from the enclosing function, otherwise moves the value into `lhs` (which may be a
/// declaration, e.g. `auto x`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  REPRISE_ASSIGN_OR_RETURN_IMPL_(REPRISE_STATUS_CONCAT_(reprise_statusor_, __LINE__), lhs, expr)

#define REPRISE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // REPRISE_RUNTIME_BASE_STATUS_MACROS_H_

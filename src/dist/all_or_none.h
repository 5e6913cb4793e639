// Steps that can fail on some ranks only: at start-up, rank 0 refusing an existing run folder or
// a node that cannot read a file the others can; mid-run, rank 0's own work (a checkpoint, an
// evaluation, a results file). Without a common decision the ranks that did not fail go on to
// their next collective and wait there: until train.dist_timeout_s with NCCL (5 minutes of a
// whole allocation, under srun without --kill-on-bad-exit), or until Gloo notices the closed
// connection, with an error that does not say why.
//
// all_or_none(dp, what, step): every rank runs `step`; then one all-reduce of a [W] vector
// tells every rank which ranks failed. When none did, `step`'s value is returned. When one did,
// every rank stops at once: a failing rank rethrows its own error, the others throw
//   "rank R stopped while <what>: <R's message>"
// (R the lowest failing rank; its message travels in a second all-reduce, only then) as a
// UserError when R's was one (or a file system error), else as an internal error. `step` must not
// run collectives itself (a rank that failed before one would leave the others inside it).
#pragma once
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "dist/data_parallel.h"

namespace rpe::dist {

// A rank's failed step as main() would take it: a user error (exit 2; file system errors
// included, which name the file at fault) or an internal one (exit 1), and its line.
struct Failure {
  bool user = false;
  std::string message;
};
Failure describe_failure(const std::exception_ptr& error);
// What the ranks that did not fail throw when rank `rank` failed with `f` while `what`:
// "rank R stopped while <what>: <f's message>", a UserError when f's was one.
[[noreturn]] void throw_stopped_by(int64_t rank, const std::string& what, const Failure& f);

// The agreement after each rank ran its step: `error` is this rank's (null when it succeeded).
// Returns when no rank failed; throws as described above otherwise.
void agree_all_succeeded(DataParallel& dp, const std::string& what, const std::exception_ptr& error);

template <class Step>
auto all_or_none(DataParallel& dp, const std::string& what, Step&& step) -> decltype(step()) {
  using Result = decltype(step());
  if (!dp.distributed()) return step();
  std::exception_ptr error;
  if constexpr (std::is_void_v<Result>) {
    try {
      step();
    } catch (...) {
      error = std::current_exception();
    }
    agree_all_succeeded(dp, what, error);
  } else {
    std::optional<Result> result;
    try {
      result.emplace(step());
    } catch (...) {
      error = std::current_exception();
    }
    agree_all_succeeded(dp, what, error);
    return std::move(*result);
  }
}

}  // namespace rpe::dist

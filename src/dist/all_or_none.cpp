// Ranks agreeing that a step succeeded everywhere (see all_or_none.h).
#include "dist/all_or_none.h"

#include <fmt/format.h>

#include <system_error>
#include <vector>

#include "util/errors.h"

namespace rpe::dist {
namespace {

enum Outcome : int { kSucceeded = 0, kUserError = 1, kInternalError = 2 };

// Rank `from`'s message, gathered from every rank's [1 + kBytes] row: its length, then its
// bytes (empty for a rank that did not fail).
constexpr size_t kBytes = 1000;
std::string message_of(DataParallel& dp, int64_t from, const std::string& mine) {
  const size_t width = 1 + kBytes, n_mine = std::min(mine.size(), kBytes);
  std::vector<double> row(width, 0.0);
  row[0] = static_cast<double>(n_mine);
  for (size_t i = 0; i < n_mine; ++i) row[1 + i] = static_cast<unsigned char>(mine[i]);
  const auto rows = dp.gather(row);
  const size_t at = static_cast<size_t>(from) * width, n = static_cast<size_t>(rows[at]);
  std::string text(n, ' ');
  for (size_t i = 0; i < n; ++i) text[i] = static_cast<char>(static_cast<unsigned char>(rows[at + 1 + i]));
  return text;
}

}  // namespace

Failure describe_failure(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const UserError& e) {
    return {true, e.what()};
  } catch (const std::system_error& e) {
    return {true, e.what()};
  } catch (const std::exception& e) {
    return {false, e.what()};
  } catch (...) {
    return {false, "unknown exception"};
  }
}

void throw_stopped_by(int64_t rank, const std::string& what, const Failure& f) {
  const std::string line = fmt::format("rank {} stopped while {}: {}", rank, what, f.message);
  if (f.user) throw UserError(line);
  throw std::runtime_error(line);
}

void agree_all_succeeded(DataParallel& dp, const std::string& what, const std::exception_ptr& error) {
  const Failure mine = error ? describe_failure(error) : Failure{};
  const Outcome outcome = !error ? kSucceeded : mine.user ? kUserError : kInternalError;
  const auto rows = dp.gather({static_cast<double>(outcome)});  // [W]: rank r's Outcome
  std::vector<int> outcomes(rows.begin(), rows.end());
  int64_t first = -1;
  for (size_t r = 0; r < outcomes.size() && first < 0; ++r)
    if (outcomes[r] != kSucceeded) first = static_cast<int64_t>(r);
  if (first < 0) return;
  const std::string text = message_of(dp, first, mine.message);  // every rank takes part
  if (error) std::rethrow_exception(error);
  throw_stopped_by(first, what, Failure{outcomes[static_cast<size_t>(first)] == kUserError, text});
}

}  // namespace rpe::dist

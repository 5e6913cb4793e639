// Ranks agreeing that a step succeeded everywhere (see all_or_none.h).
#include "dist/all_or_none.h"

#include <fmt/format.h>

#include <system_error>
#include <vector>

#include "util/errors.h"

namespace rpe::dist {
namespace {

enum Outcome : int { kSucceeded = 0, kUserError = 1, kInternalError = 2 };

// What main() would make of this rank's error: a user error (exit 2; file system errors
// included, which name the file at fault) or an internal one (exit 1), and its line.
std::pair<Outcome, std::string> classify(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const UserError& e) {
    return {kUserError, e.what()};
  } catch (const std::system_error& e) {
    return {kUserError, e.what()};
  } catch (const std::exception& e) {
    return {kInternalError, e.what()};
  } catch (...) {
    return {kInternalError, "unknown exception"};
  }
}

// Rank `from`'s message, gathered as one all-reduce of [W, 1 + kBytes] doubles in which each
// failing rank fills its own row (its length, then its bytes; x + 0 is exact).
constexpr size_t kBytes = 1000;
std::string message_of(DataParallel& dp, int64_t from, const std::string& mine) {
  const size_t width = 1 + kBytes, me = static_cast<size_t>(dp.rank());
  std::vector<double> rows(static_cast<size_t>(dp.world()) * width, 0.0);
  if (!mine.empty()) {
    const size_t n = std::min(mine.size(), kBytes);
    rows[me * width] = static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) rows[me * width + 1 + i] = static_cast<unsigned char>(mine[i]);
  }
  rows = dp.sum(rows);
  const size_t row = static_cast<size_t>(from) * width, n = static_cast<size_t>(rows[row]);
  std::string text(n, ' ');
  for (size_t i = 0; i < n; ++i) text[i] = static_cast<char>(static_cast<unsigned char>(rows[row + 1 + i]));
  return text;
}

}  // namespace

void agree_all_succeeded(DataParallel& dp, const std::string& what, const std::exception_ptr& error) {
  const auto [outcome, message] = error ? classify(error) : std::pair<Outcome, std::string>{kSucceeded, ""};
  std::vector<double> outcomes(static_cast<size_t>(dp.world()), 0.0);  // [W]: rank r's Outcome
  outcomes[static_cast<size_t>(dp.rank())] = outcome;
  outcomes = dp.sum(outcomes);
  int64_t first = -1;
  for (size_t r = 0; r < outcomes.size() && first < 0; ++r)
    if (outcomes[r] != kSucceeded) first = static_cast<int64_t>(r);
  if (first < 0) return;
  const std::string text = message_of(dp, first, message);  // every rank takes part
  if (error) std::rethrow_exception(error);
  const std::string line = fmt::format("rank {} stopped while {}: {}", first, what, text);
  if (outcomes[static_cast<size_t>(first)] == kUserError) throw UserError(line);
  throw std::runtime_error(line);
}

}  // namespace rpe::dist

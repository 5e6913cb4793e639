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

void agree_all_succeeded(DataParallel& dp, const std::string& what, const std::exception_ptr& error) {
  const auto [outcome, message] = error ? classify(error) : std::pair<Outcome, std::string>{kSucceeded, ""};
  const auto outcomes = dp.gather({static_cast<double>(outcome)});  // [W]: rank r's Outcome
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

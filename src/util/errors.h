// User-facing errors. Anything the user can fix (bad config, missing file, bad data)
// is thrown as UserError; main() prints its one-line message and exits with code 2.
#pragma once
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace rpe {

inline constexpr int kExitUserError = 2;
// Pretraining stopped at train.time_limit_min with a checkpoint: not finished, `--resume`
// continues it (sysexits.h's EX_TEMPFAIL, "try again later"), for job scripts that resubmit.
inline constexpr int kExitTimeLimit = 75;

// `message` with each NUL byte written as "\0": std::runtime_error keeps a C string, so a NUL
// from user input (a key, a path, a record) would cut the message there.
std::string without_nul(const std::string& message);

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(without_nul(message)) {}
};

// Throws UserError(message) when cond is false.
void require(bool cond, const std::string& message);

// Whether an error is the machine's, not the command's: the disk, memory or the device (ENOSPC,
// EDQUOT, EIO, ENOMEM, EMFILE, ENFILE, EFBIG; EAGAIN: the system refused a thread, as
// std::thread's resource_unavailable_try_again). main() exits 1 for these, 2 for the rest.
bool environment_error(const std::error_code& ec);

// Joins items with ", " (for "valid ones are: a, b, c" messages).
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");

// A message folded into one line of text (LibTorch's and some libraries' span several): trailing
// newlines and spaces go, inner ones become spaces, and other control characters and bytes that
// are not UTF-8 (a parser quoting a file's own bytes, a path's, an argument's) are written as \xNN.
std::string one_line(std::string text);

// A piece of user data quoted in a message: `text` up to `max_bytes` (cut at a UTF-8 character's
// start), then "... (N bytes)" when longer, so that a message stays one readable line however
// long the line of a file it quotes.
std::string excerpt(const std::string& text, size_t max_bytes = 100);

}  // namespace rpe

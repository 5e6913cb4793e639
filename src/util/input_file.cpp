// Regular-file check of inputs (see input_file.h).
#include "util/input_file.h"

#include <string>
#include <system_error>

#include "util/errors.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {
const char* kind_of(fs::file_type t) {
  switch (t) {
    case fs::file_type::directory: return "a folder, not a file";
    case fs::file_type::fifo: return "a FIFO (named pipe), not a regular file";
    case fs::file_type::socket: return "a socket, not a regular file";
    case fs::file_type::block:
    case fs::file_type::character: return "a device, not a regular file";
    default: return "not a regular file";
  }
}
// Why stat() failed, in words: ELOOP's own text ("Too many levels of symbolic links") does not
// say that the name is a link that never reaches a file.
std::string lookup_problem(const std::error_code& ec) {
  if (ec == std::errc::too_many_symbolic_link_levels)
    return "a symbolic link that cannot be resolved (too many levels of symbolic links: a link loop?)";
  return ec.message();
}

// The type of what `path` names, links followed (a link to a file is a file); not_found when
// nothing is there. A lookup that fails otherwise (a link loop, a folder that may not be
// searched) is a UserError.
fs::file_type looked_up(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() != fs::file_type::not_found && ec)
    throw UserError("cannot read " + path.string() + ": " + lookup_problem(ec));
  return st.type();
}
}  // namespace

void require_regular_file(const fs::path& path) {
  const fs::file_type type = looked_up(path);
  if (type == fs::file_type::not_found) throw UserError("cannot read " + path.string() + ": file not found");
  if (type != fs::file_type::regular) throw UserError("cannot read " + path.string() + ": " + kind_of(type));
}

bool input_exists(const fs::path& path) { return looked_up(path) != fs::file_type::not_found; }

fs::path same_file_key(const fs::path& path) {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(path, ec);
  return ec ? path.lexically_normal() : resolved;
}

}  // namespace rpe

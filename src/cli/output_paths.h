// Up-front checks of a command's output paths, before any work is done: a file where a
// folder is expected (or the reverse), a parent that is a file, or a read-only place is a
// one-line UserError naming the option and the path, and nothing is created yet.
#pragma once
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "util/errors.h"

namespace rpe::cli {

// `dir` will be created (with its parents) if missing: its nearest existing ancestor must
// be a writable folder (a folder at least, unless `writable`), and `dir` itself, if it exists, a folder.
// `shown` is the path the user gave (the file, when checking a file's folder).
inline void check_output_folder(const std::string& option, const std::filesystem::path& dir,
                                const std::filesystem::path& shown = {}, bool writable = true) {
  namespace fs = std::filesystem;
  const std::string named = option + " " + (shown.empty() ? dir : shown).string();
  std::error_code ec;
  fs::path probe = dir.empty() ? fs::path(".") : dir;
  while (true) {
    const auto st = fs::status(probe, ec);
    if (st.type() == fs::file_type::not_found) {
      const fs::path parent = probe.has_parent_path() && probe.parent_path() != probe ? probe.parent_path() : ".";
      if (parent == probe) break;
      probe = parent;
      continue;
    }
    if (ec) throw UserError(named + ": cannot access " + probe.string() + ": " + ec.message());
    if (st.type() != fs::file_type::directory)
      throw UserError(named + ": " +
                      (probe == dir && shown.empty() ? "exists and is not a folder" : probe.string() + " is not a folder"));
    if (writable && ::access(probe.c_str(), W_OK | X_OK) != 0)
      throw UserError(named + ": cannot write in " + probe.string() + ": " + std::strerror(errno));
    return;
  }
}

// `file` will be written (its folder created if missing): it must not be a folder.
inline void check_output_file(const std::string& option, const std::filesystem::path& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(file, ec)) throw UserError(option + " " + file.string() + ": is a folder, expected a file");
  // "pred/" (or "pred/.") names a folder even where none exists yet: refused before the work,
  // not when the result is written (and after its folder was made).
  const fs::path name = file.filename();
  if (name.empty() || name == "." || name == "..")
    throw UserError(option + " " + file.string() + ": names a folder, expected a file name");
  const fs::path parent = file.has_parent_path() ? file.parent_path() : fs::path(".");
  check_output_folder(option, parent, file);
}

// An output that is there already (a file, or a folder with content) is replaced only with
// --overwrite: refused here, before any work, with the same words for every command.
inline void refuse_existing_output(const std::string& option, const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool empty_folder = fs::is_directory(path, ec) && fs::is_empty(path, ec);
  if (fs::exists(path, ec) && !empty_folder)
    throw UserError(option + " " + path.string() + ": exists; pass --overwrite to replace it");
}

// Creates `dir`, the folder an option's output goes to, and runs `write` (the files into it).
// check_output_folder and check_output_file, first, cannot foresee every place that takes no
// folder or file (root may write in /proc by access(2), yet mkdir and open fail there): such a
// failure is the option's and is named with it (`named`: "--out results"), one line, exit 2 or
// 1 by its errno (main). A write that fails once a file is open (a full disk) is the machine's
// and stays as it is (exit 1).
template <typename Write>
void write_output_into(const std::string& named, const std::filesystem::path& dir, Write&& write) {
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) throw std::system_error(ec, named + ": cannot create the folder " + dir.string());
  try {
    write();
  } catch (const UserError& e) {  // a file that cannot be created there (AtomicWriter names it)
    throw UserError(named + ": " + e.what());
  }
}

// CLI11's check for a path option given as "" (an unset shell variable): the command would fall
// back to its default folder, silently. Returns CLI11's error text ("" = fine).
inline std::string empty_path_check(const std::string& value) {
  return value.empty() ? std::string("empty: name a folder, or leave the option out for the default") : std::string();
}

}  // namespace rpe::cli

// Input files must be regular files (or links to one) before anything opens them: opening a
// FIFO blocks until a writer comes (forever, for a path given by mistake), a character device
// can stream without end, and a folder opens as an empty stream on Linux. Every reader of a
// user's file (read_file, the corpus reader, the tokenizer loaders, --text-file) checks here
// first, as the config reader does (config/yaml_tree.cpp).
#pragma once
#include <filesystem>

namespace rpe {

// UserError "cannot read <path>: <why>" when `path` is missing, a folder, or not a regular
// file (a FIFO, a socket, a device), or its links do not resolve (a loop); returns otherwise.
void require_regular_file(const std::filesystem::path& path);

// Whether `path` names something, links followed: false only when nothing is there (a missing
// file, or a link to one). A path that cannot be looked up is no missing file: a loop of
// symbolic links (ELOOP), a folder on the way that may not be searched are a UserError
// "cannot read <path>: <why>", not "file not found".
bool input_exists(const std::filesystem::path& path);

// `path` as it resolves (links followed, "./" and ".." gone), to tell two spellings of one file
// apart; lexically normalised where it cannot be resolved.
std::filesystem::path same_file_key(const std::filesystem::path& path);

}  // namespace rpe

// Deleting a folder tree (run folders under --overwrite, test scratch folders).
// std::filesystem::remove_all must not be used in this project: the PyPI LibTorch's
// libtorch.so exports a broken copy of it (a call through address 0; see CMakeLists.txt).
#pragma once
#include <filesystem>

namespace rpe {

// Deletes `path` (a file, a symlink, or a folder and everything below it, without following
// symlinks). A missing path is not an error; UserError naming the entry that cannot be removed.
void remove_tree(const std::filesystem::path& path);

}  // namespace rpe

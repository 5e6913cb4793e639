// Folder paths: deleting a tree (run folders under --overwrite, test scratch folders),
// replacing a folder as a whole (staged beside it), and naming a folder whatever its spelling.
// std::filesystem::remove_all must not be used in this project: the PyPI LibTorch's
// libtorch.so exports a broken copy of it (a call through address 0; see CMakeLists.txt).
#pragma once
#include <filesystem>

namespace rpe {

// Deletes `path` (a file, a symlink, or a folder and everything below it, without following
// symlinks). A missing path is not an error; UserError naming the entry that cannot be removed.
void remove_tree(const std::filesystem::path& path);

// Puts the complete folder `staged` in place of `target` (which may not exist yet) and removes
// the folder it replaced. Where the file system can (Linux renameat2 RENAME_EXCHANGE: ext4, xfs,
// btrfs, tmpfs, ...) the swap is one atomic step, so `target` exists complete at every instant,
// even across a crash; elsewhere two renames (`target` moved to <staged>.replaced first), with a
// moment in which `target` is missing. The parent folder is fsynced. UserError naming the paths
// when `staged` is missing or a rename fails.
void replace_folder(const std::filesystem::path& staged, const std::filesystem::path& target);

// A new, empty staging folder for `target`, <target>.tmp-<pid> beside it, to be filled and then
// swapped in by replace_folder. Staging folders of writers whose process is gone (killed while
// writing) are removed first; a live process's are left alone; <target>.tmp-<pid>.replaced (the
// previous folder moved aside by replace_folder's fallback) is put back when `target` is missing.
// UserError naming the folder when it cannot be created.
std::filesystem::path make_staging_folder(const std::filesystem::path& target);

// True when `inner` is `outer` or lies inside it (both made absolute, symlinks resolved).
bool path_inside(const std::filesystem::path& inner, const std::filesystem::path& outer);

// fsyncs `folder` ("" is the working directory), so renames in it survive a crash; best effort:
// some file systems cannot fsync a folder.
void fsync_folder(const std::filesystem::path& folder);

// `path` without a trailing separator: "runs/m4/" (what a shell completes) is "runs/m4", so its
// filename() names the folder; "/" stays "/".
inline std::filesystem::path folder_path(const std::filesystem::path& path) {
  return !path.has_filename() && path.has_parent_path() ? path.parent_path() : path;
}

}  // namespace rpe

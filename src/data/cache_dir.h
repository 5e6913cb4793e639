// Where a start keeps what it derives from a prepared shard folder (the sample index, the
// ".verified" stamps) when it cannot write them beside the shards: a dataset folder shared
// read-only (another user's, a read-only mount, a container volume mounted :ro). Without such a
// place, every start on every rank would rebuild the index into its own heap (8 bytes per
// sequence for the whole run) and verify every shard again (the whole corpus read).
//   $RPE_TRAIN_CACHE_DIR (UserError when it cannot be created or written: a folder the user
//   named is not swapped for another), else $XDG_CACHE_HOME/rpe-train, else
//   $HOME/.cache/rpe-train, else <temp>/rpe-train-<uid> (this user's own, mode 0700); each
//   created on first use and taken only where this process can write. Empty when none can.
// Files there are named by content keys (the manifest's checksum, a shard's path), so shard
// folders and jobs can share one cache folder. Nothing empties it (docs/data.md).
#pragma once
#include <filesystem>

namespace rpe {

// The cache folder, created if needed (see above). create = false only looks: the folder a start
// would use if it already exists (nothing made; empty and no UserError otherwise), for reading
// what an earlier start cached without making a folder in the user's home on every first open.
std::filesystem::path fallback_cache_dir(bool create = true);

}  // namespace rpe

// See verified_stamp.h.
#include "data/verified_stamp.h"

#include <fstream>
#include <optional>
#include <string>

#include "data/cache_dir.h"
#include "data/manifest.h"
#include "data/shard.h"
#include "util/atomic_file.h"
#include "util/file_lock.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {
// Whether `stamp` holds exactly `want`. Only a regular file is read (a FIFO would block, a link
// to /dev/zero never end), and no more of it than a stamp holds.
bool stamp_holds(const fs::path& stamp, const std::string& want) {
  std::error_code ec;
  if (!fs::is_regular_file(stamp, ec)) return false;
  std::ifstream in(stamp);
  std::string have(want.size() + 1, '\0');
  in.read(have.data(), static_cast<std::streamsize>(have.size()));
  have.resize(static_cast<size_t>(in.gcount()));
  return have == want;
}

// The stamp of a file whose stamp folder this process cannot write: in the cache folder
// (`create`: made if missing), named by the file's absolute path, which it also holds. "" without one.
fs::path stamp_elsewhere(const fs::path& file, bool create) {
  const fs::path dir = fallback_cache_dir(create);
  if (dir.empty()) return {};
  const std::string path = fs::absolute(file).string();
  ShardHasher h;
  h.update(path.data(), path.size());
  return dir / ("verified-" + manifest::hex64(h.value()));
}
}  // namespace

void verify_once(const StampedCheck& c, bool force) {
  std::error_code ec;
  const auto bytes = fs::file_size(c.file, ec);
  const std::string want = std::to_string(ec ? 0 : bytes) + " " + std::to_string(manifest::mtime_ns(c.file)) + " " +
                           manifest::hex64(c.checksum) + "\n";
  const std::string want_elsewhere = want + fs::absolute(c.file).string() + "\n";
  fs::path other = stamp_elsewhere(c.file, /*create=*/false);  // one an earlier start kept
  const auto stamped = [&] {
    return stamp_holds(c.stamp, want) || (!other.empty() && stamp_holds(other, want_elsewhere));
  };
  if (!force && stamped()) return;
  std::optional<FileLock> lock;
  if (!force) {
    const std::function<void()> waiting =
        c.on_wait ? c.on_wait : [&c] { log::info("data", "waiting for another process verifying {}", c.file.string()); };
    lock.emplace(c.stamp.string() + ".lock", waiting);
    // A folder that takes no lock file (read-only) has its stamps in the cache folder: the lock
    // goes beside them (one process verifies per cache folder, i.e. per node where it is local).
    if (!lock->held() && lock->problem().empty()) {
      const fs::path elsewhere = stamp_elsewhere(c.file, /*create=*/true);
      if (!elsewhere.empty()) lock.emplace(elsewhere.string() + ".lock", waiting);
    }
    other = stamp_elsewhere(c.file, /*create=*/false);
    if (stamped()) return;  // verified while this process waited
  }
  c.verify();
  try {
    write_file_atomic(c.stamp, want);  // anything else there (not a stamp) is written over
    return;
  } catch (const std::exception& e) {  // a read-only folder: the cache folder's stamp
    log::debug("data", "cannot write {}: {}", c.stamp.string(), e.what());
  }
  other = stamp_elsewhere(c.file, /*create=*/true);  // UserError: RPE_TRAIN_CACHE_DIR names no usable folder
  try {
    if (!other.empty()) write_file_atomic(other, want_elsewhere);
  } catch (const std::exception& e) {  // nowhere: verified again next time
    log::debug("data", "cannot write {}: {}", other.string(), e.what());
  }
}

}  // namespace rpe

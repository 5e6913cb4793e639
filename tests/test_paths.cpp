#include "test_paths.h"

#include <unistd.h>

#include <cstdlib>
#include <system_error>

namespace rpe::test {
// The checkout the tests were built in; RPE_SOURCE_DIR in the environment overrides it for a
// test program carried to another machine (scripts/pack_build.sh, scripts/gpu_env.sh).
const std::string& source_dir() {
  static const std::string dir = std::getenv("RPE_SOURCE_DIR") ? std::getenv("RPE_SOURCE_DIR") : RPE_SOURCE_DIR;
  return dir;
}
// The rpe-train beside this test program: a build carried to another machine
// (scripts/pack_build.sh) holds both, and the path it was built at need not exist there.
const std::string& train_binary() {
  static const std::string path = [] {
    std::error_code err;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", err);
    const auto beside = self.parent_path() / std::filesystem::path(RPE_TRAIN_BINARY).filename();
    return !err && std::filesystem::exists(beside, err) ? beside.string() : std::string(RPE_TRAIN_BINARY);
  }();
  return path;
}

namespace {
struct RemovedAtExit {
  std::filesystem::path dir;
  ~RemovedAtExit() {
    std::error_code ignored;  // best effort: a test may have left a file open or read-only
    std::filesystem::remove_all(dir, ignored);
  }
};
}  // namespace

const std::filesystem::path& process_temp_dir() {
  static const RemovedAtExit scratch{[] {
    auto dir = std::filesystem::temp_directory_path() / ("rpe_tests_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir;
  }()};
  return scratch.dir;
}
}  // namespace rpe::test

#include "test_paths.h"

#include <cstdlib>

namespace rpe::test {
// The checkout the tests were built in; RPE_SOURCE_DIR in the environment overrides it for a
// test program carried to another machine (scripts/pack_build.sh, scripts/gpu_env.sh).
const std::string& source_dir() {
  static const std::string dir = std::getenv("RPE_SOURCE_DIR") ? std::getenv("RPE_SOURCE_DIR") : RPE_SOURCE_DIR;
  return dir;
}
const std::string& train_binary() {
  static const std::string path = RPE_TRAIN_BINARY;
  return path;
}
}  // namespace rpe::test

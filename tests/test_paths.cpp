#include "test_paths.h"

namespace rpe::test {
const std::string& source_dir() {
  static const std::string dir = RPE_SOURCE_DIR;
  return dir;
}
const std::string& train_binary() {
  static const std::string path = RPE_TRAIN_BINARY;
  return path;
}
}  // namespace rpe::test

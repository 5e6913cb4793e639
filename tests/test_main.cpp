// Test entry point: quiet logs, one thread for determinism and speed on CI's 2 cores.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "util/log.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  rpe::log::init(/*quiet=*/true);
  torch::set_num_threads(1);
  return RUN_ALL_TESTS();
}

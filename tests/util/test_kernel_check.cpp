// How the one-time kernel checks fold their cases into one disagreement (util/kernel_check.h).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "util/errors.h"
#include "util/kernel_check.h"

namespace rpe {
namespace {

TEST(KernelCheck, ANaNResultIsTheWorstDisagreement) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(worse_disagreement(0.5, 2.0), 2.0);
  EXPECT_EQ(worse_disagreement(0.5, 0.1), 0.5);
  EXPECT_TRUE(std::isnan(worse_disagreement(0.5, nan)));  // std::max(0.5, NaN) is 0.5: a pass
  EXPECT_TRUE(std::isnan(worse_disagreement(nan, 0.1)));  // and it stays the worst
  // As the checks compute a case: a kernel output holding one NaN among right values.
  auto want = torch::randn({4, 5}, torch::kDouble), got = want.clone();
  got[2][3] = nan;
  const double off = (got - want).abs().max().item<double>();
  double worst = 0;
  for (const double x : {0.2, off, 0.3}) worst = worse_disagreement(worst, x);
  EXPECT_FALSE(worst < 1) << "a check would call the kernel usable";
}

// RPE_TRAIN_DISABLE_CUDA_KERNELS names the kernels by the ids their checks' names give.
TEST(KernelCheck, TheOffSwitchNamesEachKernelByItsId) {
  EXPECT_EQ(cuda_kernel_id("add & norm"), "add_norm");
  EXPECT_EQ(cuda_kernel_id("relative layout"), "relative_layout");
  EXPECT_EQ(cuda_kernel_id("m3"), "m3");
  EXPECT_TRUE(parse_disabled_cuda_kernels(nullptr).empty());
  EXPECT_TRUE(parse_disabled_cuda_kernels("").empty());
  EXPECT_EQ(parse_disabled_cuda_kernels(" m3 ,relative_layout,"), (std::set<std::string>{"m3", "relative_layout"}));
  EXPECT_EQ(parse_disabled_cuda_kernels("m3,all"), cuda_kernel_ids());
  EXPECT_EQ(cuda_kernel_ids().size(), 3U);
  EXPECT_THROW(parse_disabled_cuda_kernels("add norm"), UserError);
}

}  // namespace
}  // namespace rpe

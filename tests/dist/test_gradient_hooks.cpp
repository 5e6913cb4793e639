// The two ways GradSync learns that a parameter's gradient is final (util/torch_compat.h): the
// post-accumulate-grad hook of LibTorch 2.1 and newer, and the AccumulateGrad node's post hook
// that older LibTorch builds use. Both run here, on whatever LibTorch the tests are built with,
// so the older path is exercised although the pinned LibTorch takes the newer one.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "util/torch_compat.h"

namespace rpe {
namespace {

using HookFn = std::function<std::function<void()>(const torch::Tensor&, std::function<void()>)>;

// w is used twice in the graph and b once; each backward must fire each hook exactly once, after
// the whole gradient is in .grad (accumulated across backwards), and never after unhooking.
void check_hook(const HookFn& hook) {
  auto w = torch::tensor({0.5, -1.0, 2.0}, torch::kFloat64).requires_grad_();
  auto b = torch::tensor({3.0}, torch::kFloat64).requires_grad_();
  const auto x = torch::tensor({1.0, 2.0, 3.0}, torch::kFloat64);
  std::vector<torch::Tensor> seen_w;
  int fired_b = 0;
  auto unhook_w = hook(w, [&] { seen_w.push_back(w.grad().clone()); });
  auto unhook_b = hook(b, [&] { ++fired_b; });
  auto backward = [&] { ((w * x).sum() + (w * w).sum() + 4.0 * b.sum()).backward(); };

  const auto dw = x + 2 * w.detach();  // d/dw of w.x + w.w
  backward();
  ASSERT_EQ(seen_w.size(), 1u);
  EXPECT_TRUE(torch::equal(seen_w[0], dw));
  backward();  // no zero_grad: the hook sees the sum of both backwards
  ASSERT_EQ(seen_w.size(), 2u);
  EXPECT_TRUE(torch::equal(seen_w[1], 2 * dw));
  EXPECT_EQ(fired_b, 2);
  EXPECT_TRUE(torch::equal(b.grad(), torch::tensor({8.0}, torch::kFloat64)));

  unhook_w();
  unhook_b();
  backward();
  EXPECT_EQ(seen_w.size(), 2u);
  EXPECT_EQ(fired_b, 2);
  EXPECT_TRUE(torch::equal(w.grad(), 3 * dw));  // backward itself is unchanged
}

TEST(GradientHooks, PostAccumulateGradHookFiresOncePerBackwardWithTheFinalGradient) {
  check_hook(compat::on_gradient_accumulated);
}

TEST(GradientHooks, AccumulateGradNodeHookOfOlderLibTorchFiresTheSameWay) {
  check_hook(compat::on_accumulate_grad_node);
}

}  // namespace
}  // namespace rpe

// Parity of the fused attention path (SelfAttention::set_fused(true): the method's score
// bias goes into at::scaled_dot_product_attention as a float mask) with the plain path,
// outputs and gradients of the input and all parameters (bias parameters included), for
// every method whose term is fusable. On CPU here; the CUDA case skips without a GPU.
#include "reference.h"

namespace rpe::test {
namespace {

void expect_fused_matches_plain(const torch::Device& device) {
  int64_t checked = 0;
  for (const auto& name : attention_method_names()) {
    auto layer = make_layer(tiny_options(name, 3));
    if (!layer.attention->position->fusable()) continue;
    layer.method->to(device, torch::kFloat32);
    layer.attention->to(device, torch::kFloat32);
    torch::manual_seed(3);
    auto x = torch::randn({2, 9, 8}, torch::TensorOptions().device(device)).requires_grad_(true);
    auto pad = padding_mask(2, 9).to(device);
    std::vector<torch::Tensor> inputs{x};
    for (auto& p : layer.attention->parameters()) inputs.push_back(p);
    for (auto& p : layer.method->parameters()) inputs.push_back(p);
    auto r = torch::randn({2, 9, 8}, x.options());
    std::vector<torch::Tensor> outs, grads;
    for (bool fused : {false, true}) {
      layer.attention->set_fused(fused);
      auto pos = layer.method->input_embeddings(9);
      auto out = layer.attention->forward(pos.defined() ? x + pos.unsqueeze(0) : x, pad);
      outs.push_back(out);
      auto g = torch::autograd::grad({(out * r).sum()}, inputs, {}, false, false, true);
      for (auto& t : g) grads.push_back(t.defined() ? t : torch::zeros({1}, x.options()));
    }
    EXPECT_LT((outs[0] - outs[1]).abs().max().item<double>(), 1e-5) << name;
    const size_t n = inputs.size();
    for (size_t i = 0; i < n; ++i)
      EXPECT_LT((grads[i] - grads[n + i]).abs().max().item<double>(), 1e-5) << name << " gradient " << i;
    ++checked;
  }
  // absolute, sinusoid, shaw (keys), transformer_xl, m4, t5_bias, alibi, rope, deberta.
  EXPECT_EQ(checked, 9);
}

}  // namespace

TEST(FusedAttention, MatchesPlainPathOnCpu) { expect_fused_matches_plain(torch::kCPU); }

TEST(FusedAttention, MatchesPlainPathOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_fused_matches_plain(torch::Device(torch::kCUDA));
}

}  // namespace rpe::test

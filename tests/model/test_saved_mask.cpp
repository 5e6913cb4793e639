// train.activation_checkpointing: bias (src/model/saved_mask.h). The mechanism on the CPU, where
// SDPA's flash kernel keeps a mask that needs no gradient: the node's copy goes after the forward,
// the backward rebuilds it under the forward's autocast and gives the plain gradients, and a
// rebuilt mask of another shape is refused. The model on a GPU, where the memory-efficient
// kernel keeps the relative methods' [B, H, L, L] bias (one that needs a gradient, which the
// CPU's fused kernel does not take): the same gradients as keeping it, far fewer bytes kept.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <thread>
#include <vector>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>) && defined(USE_C10D_NCCL)
#define RPE_TEST_CUDA_ALLOCATOR 1
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "model/bert.h"
#include "model/encoder.h"
#include "model/saved_mask.h"
#include "test_models.h"
#include "util/autocast_guard.h"
#include "util/torch_compat.h"

namespace rpe {
namespace {

using torch::Tensor;

struct Qkv {
  Tensor q, k, v, g;  // [2, 3, 16, 8] each; g: the output's gradient
};

Qkv inputs() {
  torch::manual_seed(4);
  auto leaf = [] { return torch::randn({2, 3, 16, 8}).requires_grad_(); };
  return {leaf(), leaf(), leaf(), torch::randn({2, 3, 16, 8})};
}

// The mask a test rebuilds: a function of a tensor that outlives the forward, no gradient.
Tensor make_mask(const Tensor& base) { return (base * 0.5).sin(); }

// The hooks are set on LibTorch 2.11's generated autograd nodes only (saved_mask.cpp).
#define SKIP_BEFORE_LIBTORCH_2_11()                                                \
  if (RPE_TORCH_BEFORE(11)) GTEST_SKIP() << "saved_mask.cpp reads LibTorch 2.11's autograd nodes"

std::vector<Tensor> grads_of(const Qkv& x, const Tensor& out) {
  return torch::autograd::grad({out}, {x.q, x.k, x.v}, {x.g});
}

TEST(SavedMask, TheCpuFlashKernelsMaskIsRebuiltInBackwardWithThePlainGradients) {
  SKIP_BEFORE_LIBTORCH_2_11();
  const Qkv x = inputs();
  const auto base = torch::randn({2, 3, 16, 16});
  const auto plain = grads_of(x, compat::scaled_dot_product_attention(x.q, x.k, x.v, make_mask(base), 0.0, 0.3));

  auto mask = make_mask(base);
  const auto out = compat::scaled_dot_product_attention(x.q, x.k, x.v, mask, 0.0, 0.3);
  ASSERT_EQ(out.grad_fn()->name(), "ScaledDotProductFlashAttentionForCpuBackward0") << "SDPA's CPU path changed";
  int rebuilt = 0;
  const bool autocast_was_on = compat::autocast_enabled(torch::kCPU);
  bool autocast_in_rebuild = false;
  ASSERT_TRUE(rebuild_mask_in_backward(out, mask, [&] {
    ++rebuilt;
    autocast_in_rebuild = compat::autocast_enabled(torch::kCPU);
    return make_mask(base);
  }));
  EXPECT_EQ(mask.storage().use_count(), 1) << "the node let its copy go";
  mask = Tensor();
  EXPECT_EQ(rebuilt, 0);
  const auto got = grads_of(x, out);
  EXPECT_EQ(rebuilt, 1);
  EXPECT_EQ(autocast_in_rebuild, autocast_was_on);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(torch::equal(got[i], plain[i])) << "input " << i;
}

// The rebuild runs under the autocast state of the forward it belongs to, though the backward
// runs without one: a mask made in bf16 is made in bf16 again.
TEST(SavedMask, TheRebuildRunsUnderTheForwardsAutocast) {
  SKIP_BEFORE_LIBTORCH_2_11();
  const Qkv x = inputs();
  const auto base = torch::randn({2, 3, 16, 16});
  Tensor out;
  bool autocast_in_rebuild = false;
  {
    const AutocastGuard autocast(torch::kCPU, at::kBFloat16);
    const auto mask = make_mask(base).to(torch::kBFloat16);  // in q's dtype under autocast, as the model's
    out = compat::scaled_dot_product_attention(x.q, x.k, x.v, mask, 0.0, 0.3);
    ASSERT_EQ(out.grad_fn()->name(), "ScaledDotProductFlashAttentionForCpuBackward0") << "SDPA's CPU path changed";
    ASSERT_TRUE(rebuild_mask_in_backward(out, mask, [&] {
      autocast_in_rebuild = compat::autocast_enabled(torch::kCPU);
      return make_mask(base).to(torch::kBFloat16);
    }));
  }
  ASSERT_FALSE(compat::autocast_enabled(torch::kCPU));
  grads_of(x, out.to(torch::kFloat));
  EXPECT_TRUE(autocast_in_rebuild);
}

TEST(SavedMask, ARebuiltMaskOfAnotherShapeIsRefused) {
  SKIP_BEFORE_LIBTORCH_2_11();
  const Qkv x = inputs();
  const auto base = torch::randn({2, 3, 16, 16});
  const auto mask = make_mask(base);
  const auto out = compat::scaled_dot_product_attention(x.q, x.k, x.v, mask, 0.0, 0.3);
  ASSERT_TRUE(rebuild_mask_in_backward(out, mask, [&] { return make_mask(base).narrow(3, 0, 8); }));
  try {
    grads_of(x, out);
    ADD_FAILURE() << "no error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rebuilding the attention mask for backward: got [2, 3, 16, 8], expected "
                                         "[2, 3, 16, 16]"),
              std::string::npos)
        << e.what();
  }
}

// Nothing to rebuild: no graph, or SDPA's math path (a mask that needs a gradient, on the CPU),
// which keeps the probabilities, not the mask.
TEST(SavedMask, WithoutAFusedNodeNothingIsHooked) {
  const Qkv x = inputs();
  const auto base = torch::randn({2, 3, 16, 16}).requires_grad_();
  const auto mask = make_mask(base);
  const auto out = compat::scaled_dot_product_attention(x.q, x.k, x.v, mask, 0.0, 0.3);
  EXPECT_FALSE(rebuild_mask_in_backward(out, mask, [&] { return make_mask(base); }));
  const torch::NoGradGuard no_grad;
  const auto eval = compat::scaled_dot_product_attention(x.q, x.k, x.v, mask.detach(), 0.0, 0.3);
  EXPECT_FALSE(rebuild_mask_in_backward(eval, mask, [&] { return make_mask(base); }));
}

// Bytes allocated on `device` now (CUDA), -1 where this build cannot tell.
double allocated(const torch::Device& device) {
#ifdef RPE_TEST_CUDA_ALLOCATOR
  if (device.is_cuda()) {
    torch::cuda::synchronize();
    return static_cast<double>(c10::cuda::CUDACachingAllocator::getDeviceStats(0).allocated_bytes[0].current);
  }
#endif
  return -1;
}

// What the rebuild rests on: a method's bias made again on another thread (as the autograd
// engine's), with autograd off, under the same autocast, equals the forward's bit for bit.
void expect_bias_rebuilt_bit_for_bit(BertModel& model, const torch::Device& device, const std::string& method) {
  const auto& position = model->layers[0]->as<EncoderLayerImpl>()->attention->position;
  torch::manual_seed(8);
  auto qk = [&] { return torch::randn({4, 4, 128, 16}).to(device).to(torch::kBFloat16).requires_grad_(); };
  const auto q = qk(), k = qk();
  Tensor forward, again;
  {
    const AutocastGuard autocast(device, at::kBFloat16);
    forward = position->score_bias(q, k);
  }
  std::thread other([&] {
    const torch::NoGradGuard no_grad;
    const AutocastGuard autocast(device, at::kBFloat16);
    again = position->score_bias(q, k);
  });
  other.join();
  ASSERT_TRUE(forward.defined() && again.defined()) << method;
  EXPECT_TRUE(forward.requires_grad()) << method;
  EXPECT_TRUE(torch::equal(forward.detach(), again)) << method;
}

// The relative methods with fused attention in bf16, the bias kept (none) or rebuilt (bias):
// the same bias, loss and gradients; on a GPU the bias's [B, H, L, L] bytes per layer are no
// longer kept between forward and backward. On the CPU the fused kernel takes no bias with a
// gradient (SDPA's math path runs, which keeps no mask): this twin checks the harness only.
void rebuilt_bias_trains_as_the_kept_one(const torch::Device& device) {
  const int64_t B = 4, L = 128, H = 4, layers = 3;
  torch::manual_seed(6);
  const auto ids = torch::randint(5, 50, {B, L}, torch::kLong).to(device);
  const auto g = torch::randn({B, L, 64}).to(device);
  for (const std::string method : {"shaw", "transformer_xl", "m4", "deberta"}) {
    torch::manual_seed(3);
    BertModel model(test::small_model_options(
        method, {.hidden = 64, .layers = layers, .heads = H, .ffn = 128, .max_position = L, .dropout = 0.0}));
    model->to(device);
    model->set_fused_attention(true);
    model->train();
    expect_bias_rebuilt_bit_for_bit(model, device, method);
    std::vector<std::vector<Tensor>> grads;
    std::vector<double> losses, kept;
    // A first step unmeasured: the libraries' one-time workspaces are not counted as kept.
    for (const auto what : {Recompute::none, Recompute::none, Recompute::bias}) {
      model->zero_grad();
      model->set_activation_checkpointing(what);
      const double before = allocated(device);
      Tensor loss;
      {
        const AutocastGuard autocast(device, at::kBFloat16);
        loss = (model->encode(ids, {}).to(torch::kFloat) * g).sum();
      }
      kept.push_back(allocated(device) - before);
      loss.backward();
      losses.push_back(loss.item<double>());
      grads.emplace_back();
      for (const auto& p : model->parameters()) grads.back().push_back(p.grad().defined() ? p.grad().cpu() : Tensor());
    }
    EXPECT_EQ(losses[1], losses[2]) << method;
    for (size_t i = 0; i < grads[1].size(); ++i) {
      ASSERT_EQ(grads[1][i].defined(), grads[2][i].defined()) << method << " parameter " << i;
      if (!grads[1][i].defined()) continue;
      // The same bias (above); atomics in SDPA's backward may sum in another order from run to run.
      const double scale = std::max(1e-6, grads[1][i].abs().max().item<double>());
      EXPECT_LE((grads[1][i] - grads[2][i]).abs().max().item<double>() / scale, 1e-2) << method << " parameter " << i;
    }
    if (device.is_cuda() && kept[1] >= 0) {
      const double bias_bytes = static_cast<double>(B * H * L * L * 2);  // bf16, a layer
      EXPECT_LT(kept[2], kept[1] - 0.8 * layers * bias_bytes)
          << method << ": kept " << kept[1] << " bytes with the bias, " << kept[2] << " rebuilding it";
    }
  }
}

TEST(SavedMask, CudaRebuiltBiasTrainsAsTheKeptOneAndIsNotKept) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  SKIP_BEFORE_LIBTORCH_2_11();
  rebuilt_bias_trains_as_the_kept_one(torch::kCUDA);
}

TEST(SavedMask, RebuiltBiasHarnessRunsOnTheCpu) { rebuilt_bias_trains_as_the_kept_one(torch::kCPU); }

}  // namespace
}  // namespace rpe

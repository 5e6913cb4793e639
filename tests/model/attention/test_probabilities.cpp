// The unfused attention's probability steps (src/model/attention/probabilities.h) against the
// ATen ops they stand for: dropout then values against native_dropout and matmul drawing the same
// mask (fp64, values and every gradient, the dropped P's own gradient included); the kept softmax
// against torch::softmax without autocast and under it (its type, its gradient within bf16's).
#include <gtest/gtest.h>
#include <torch/torch.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "model/attention/probabilities.h"
#include "model/bert.h"
#include "test_models.h"
#include "util/autocast_guard.h"

namespace rpe {
namespace {

using torch::Tensor;

struct Inputs {
  Tensor probs, v, g_context, g_dropped;  // [2, 3, 9, 9], [2, 3, 9, 4], and the outputs' gradients
};

Inputs inputs() {
  torch::manual_seed(3);
  auto opt = torch::TensorOptions(torch::kDouble);
  return {torch::softmax(torch::randn({2, 3, 9, 9}, opt), -1), torch::randn({2, 3, 9, 4}, opt),
          torch::randn({2, 3, 9, 4}, opt), torch::randn({2, 3, 9, 9}, opt)};
}

TEST(DropoutThenValues, EqualsDropoutThenMatmulDrawingTheSameMask) {
  const Inputs x = inputs();
  for (const double p : {0.1, 0.5}) {
    auto probs = x.probs.clone().requires_grad_(), v = x.v.clone().requires_grad_();
    torch::manual_seed(17);
    const auto [context, dropped] = dropout_then_values(probs, v, p);
    const auto got = torch::autograd::grad({context, dropped}, {probs, v}, {x.g_context, x.g_dropped});

    auto probs_ref = x.probs.clone().requires_grad_(), v_ref = x.v.clone().requires_grad_();
    torch::manual_seed(17);
    const auto dropped_ref = std::get<0>(at::native_dropout(probs_ref, p, true));
    const auto context_ref = torch::matmul(dropped_ref, v_ref);
    const auto want = torch::autograd::grad({context_ref, dropped_ref}, {probs_ref, v_ref}, {x.g_context, x.g_dropped});

    EXPECT_TRUE(torch::equal(dropped, dropped_ref)) << "the same mask, p = " << p;
    EXPECT_GT((dropped == 0).logical_and(x.probs != 0).sum().item<int64_t>(), 0) << "something dropped";
    EXPECT_LT((context - context_ref).abs().max().item<double>(), 1e-12) << p;
    EXPECT_LT((got[0] - want[0]).abs().max().item<double>(), 1e-12) << "dL/dP, p = " << p;
    EXPECT_LT((got[1] - want[1]).abs().max().item<double>(), 1e-12) << "dL/dv, p = " << p;
  }
}

// Only the context used (no value term): the dropped P's gradient is undefined, and still right.
TEST(DropoutThenValues, ContextAloneHasTheGradientsOfTheOps) {
  const Inputs x = inputs();
  auto probs = x.probs.clone().requires_grad_(), v = x.v.clone().requires_grad_();
  torch::manual_seed(5);
  const auto got = torch::autograd::grad({dropout_then_values(probs, v, 0.3).first}, {probs, v}, {x.g_context});
  auto probs_ref = x.probs.clone().requires_grad_(), v_ref = x.v.clone().requires_grad_();
  torch::manual_seed(5);
  const auto context_ref = torch::matmul(std::get<0>(at::native_dropout(probs_ref, 0.3, true)), v_ref);
  const auto want = torch::autograd::grad({context_ref}, {probs_ref, v_ref}, {x.g_context});
  EXPECT_LT((got[0] - want[0]).abs().max().item<double>(), 1e-12);
  EXPECT_LT((got[1] - want[1]).abs().max().item<double>(), 1e-12);
}

TEST(DropoutThenValues, WithoutDropoutItIsTheProduct) {
  const Inputs x = inputs();
  const auto [context, probs] = dropout_then_values(x.probs, x.v, 0.0);
  EXPECT_TRUE(torch::equal(context, torch::matmul(x.probs, x.v)));
  EXPECT_TRUE(probs.is_same(x.probs));
  EXPECT_EQ(dropout_then_values(x.probs, x.v, 1.0).first.abs().max().item<double>(), 0.0) << "all dropped";
}

TEST(KeptSoftmax, IsTorchSoftmaxWithoutAutocastAndHalfUnderIt) {
  torch::manual_seed(8);
  const auto logits = (torch::randn({2, 3, 16, 16}) * 3).requires_grad_();
  const auto g = torch::randn({2, 3, 16, 16});
  const auto plain = softmax_kept_in_autocast_type(logits);
  EXPECT_TRUE(torch::equal(plain, torch::softmax(logits, -1)));
  const auto want = torch::autograd::grad({torch::softmax(logits, -1)}, {logits}, {g})[0];
  Tensor half;
  {
    const AutocastGuard autocast(torch::kCPU, at::kBFloat16);
    half = softmax_kept_in_autocast_type(logits);  // fp32 logits (m1-m3's), kept as bf16
    EXPECT_EQ(softmax_kept_in_autocast_type(logits.to(torch::kDouble)).scalar_type(), torch::kDouble);
  }
  EXPECT_EQ(half.scalar_type(), torch::kBFloat16);
  EXPECT_LT((half.to(torch::kFloat) - plain).abs().max().item<double>(), 1.0 / 256);  // one bf16 rounding of P <= 1
  const auto got = torch::autograd::grad({half}, {logits}, {g.to(torch::kBFloat16)})[0];
  EXPECT_EQ(got.scalar_type(), torch::kFloat);
  EXPECT_LT((got - want).norm().item<double>() / want.norm().item<double>(), 2.0 / 256);
}

// What dropout adds to what m1's unfused layers keep between forward and backward under bf16
// autocast, per element of [B, H, L, L]: its byte mask alone -- the dropped P (2 bytes more)
// is made again in backward, not kept.
TEST(DropoutThenValues, DropoutAddsOnlyItsMaskToWhatM1Keeps) {
#if !defined(__GLIBC__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "measures the heap with glibc's mallinfo2 (AddressSanitizer's allocator reports none)";
#else
  const int64_t B = 8, H = 4, L = 256, layers = 3;
  const auto ids = torch::randint(5, 50, {B, L}, torch::kLong);
  const auto g = torch::randn({B, L, 16});
  auto live = [] {
    const auto m = mallinfo2();
    return static_cast<double>(m.uordblks + m.hblkhd);
  };
  auto kept_per_score = [&](double dropout) {
    torch::manual_seed(2);
    BertModel model(test::small_model_options(
        "m1", {.hidden = 16, .layers = layers, .heads = H, .ffn = 32, .max_position = L, .dropout = dropout}));
    model->train();
    torch::Tensor loss;
    const double before = live();
    {
      const AutocastGuard autocast(torch::kCPU, at::kBFloat16);
      loss = (model->encode(ids, {}).to(torch::kFloat) * g).sum();
    }
    const double kept = live() - before;
    loss.backward();
    return kept / static_cast<double>(layers * B * H * L * L);
  };
  kept_per_score(0.1);  // once unmeasured: caches made on first use (index tables, thread pools) stay
  const double without = kept_per_score(0.0), with = kept_per_score(0.1);
  const std::string bytes = std::to_string(without) + " bytes a score without dropout, " + std::to_string(with) + " with it";
  EXPECT_GT(with - without, 0.8) << "the mask: a byte a score; " << bytes;
  EXPECT_LT(with - without, 1.5) << bytes;
#endif
}

}  // namespace
}  // namespace rpe

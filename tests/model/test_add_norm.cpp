// The fused post-LN add & norm (src/model/add_norm.h) against the unfused composite:
// its autograd function with the ATen engine on the CPU, the dispatch's fallback draws, and on
// a GPU the CUDA kernels against an fp64 CPU reference and a BERT layer fused vs unfused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "model/add_norm.h"
#include "model/bert.h"
#include "test_models.h"
#include "train/precision.h"

namespace {

using rpe::add_norm_detail::Engine;
using torch::Tensor;

struct Result {
  Tensor y, dx, du, dw, db;
};

// y and the gradients of sum(y * g) through `f` on fresh leaves.
template <class F>
Result run(F f, const Tensor& x, const Tensor& u, const Tensor& w, const Tensor& b, const Tensor& g) {
  auto xl = x.clone().requires_grad_(), ul = u.clone().requires_grad_();
  auto wl = w.clone().requires_grad_(), bl = b.clone().requires_grad_();
  auto y = f(xl, ul, wl, bl);
  auto grads = torch::autograd::grad({(y * g).sum()}, {xl, ul, wl, bl});
  return {y.detach(), grads[0], grads[1], grads[2], grads[3]};
}

// Largest difference relative to max(1, largest reference value), on the CPU in fp64.
double rel(const Tensor& got, const Tensor& want) {
  auto w = want.to(torch::kCPU, torch::kDouble);
  return (got.to(torch::kCPU, torch::kDouble) - w).abs().max().item<double>() /
         std::max(1.0, w.abs().max().item<double>());
}

// `tol` for every result but du, which, in a bf16 or fp16 update's dtype, is also within half a
// step of that type (2^-9 of the largest value for bf16) of an fp64 reference.
void expect_close(const Result& got, const Result& want, double tol, const std::string& what) {
  const double du_tol = got.du.scalar_type() == torch::kBFloat16 ? 4e-3 : got.du.scalar_type() == torch::kHalf ? 1e-3 : tol;
  EXPECT_LT(rel(got.y, want.y), tol) << what << ": y";
  EXPECT_LT(rel(got.dx, want.dx), tol) << what << ": dx";
  EXPECT_LT(rel(got.du, want.du), std::max(tol, du_tol)) << what << ": du";
  EXPECT_LT(rel(got.dw, want.dw), tol) << what << ": dweight";
  EXPECT_LT(rel(got.db, want.db), tol) << what << ": dbias";
}

struct Problem {
  Tensor x, u, w, b, g, keep;
};

// x [2, N, D] fp32 (a stream of two sequences), u in `ut`, a tenth of the mask dropped.
Problem problem(int64_t N, int64_t D, torch::ScalarType ut, const torch::Device& device) {
  torch::manual_seed(7);
  auto opts = torch::TensorOptions().device(device);
  return {torch::randn({2, N, D}, opts) * 3 + 1, torch::randn({2, N, D}, opts).to(ut), torch::rand({D}, opts) + 0.5,
          torch::randn({D}, opts), torch::randn({2, N, D}, opts), torch::rand({2, N, D}, opts) > 0.1};
}

}  // namespace

TEST(AddNorm, AtenEngineMatchesTheUnfusedComposite) {
  const double scale = 1 / 0.9;
  for (const bool drop : {false, true}) {
    auto p = problem(7, 48, torch::kFloat, torch::kCPU);
    auto keep = drop ? p.keep : Tensor();
    auto fused = run([&](auto x, auto u, auto w, auto b) {
      return rpe::add_norm_detail::fused(x, u, keep, scale, w, b, 1e-12, Engine::aten).y;
    }, p.x, p.u, p.w, p.b, p.g);
    auto want = run([&](auto x, auto u, auto w, auto b) {
      return rpe::add_norm_detail::composite(x, u, keep, scale, w, b, 1e-12);
    }, p.x, p.u, p.w, p.b, p.g);
    expect_close(fused, want, 1e-5, drop ? "with dropout" : "without dropout");
    if (drop) {  // the dropped positions pass no gradient to the update, the kept ones scale it
      EXPECT_EQ(fused.du.masked_select(~keep).abs().max().item<float>(), 0.0f);
      EXPECT_TRUE(torch::allclose(fused.du.masked_select(keep), fused.dx.masked_select(keep) * scale, 1e-5, 1e-6));
    }
  }
}

TEST(AddNorm, ANonFiniteUpdateAtADroppedPositionIsNanAsUnfused) {
  // torch::dropout multiplies by the mask, so an inf (an fp16 overflow) that dropout drops still
  // makes its row NaN and the step non-finite; the fused path must not hide it as a 0.
  auto p = problem(4, 16, torch::kFloat, torch::kCPU);
  p.keep[0][1][3] = false;
  p.u[0][1][3] = std::numeric_limits<float>::infinity();
  auto fused = rpe::add_norm_detail::fused(p.x, p.u, p.keep, 1 / 0.9, p.w, p.b, 1e-12, Engine::aten).y;
  auto want = rpe::add_norm_detail::composite(p.x, p.u, p.keep, 1 / 0.9, p.w, p.b, 1e-12);
  EXPECT_TRUE(torch::equal(fused.isnan(), want.isnan()));
  EXPECT_TRUE(fused[0][1].isnan().all().item<bool>()) << "the row with the dropped inf";
  EXPECT_EQ(fused.isnan().sum().item<int64_t>(), 16) << "that row only";
}

// y and the gradients of sum(y g) + sum(y_low g') (g' = g reversed along D) through `f`,
// which returns {y, y_low}: a loss that reads both outputs, as the residual and the next
// Linear do.
Result run_low(const std::function<std::pair<Tensor, Tensor>(Tensor, Tensor, Tensor, Tensor)>& f, const Problem& p) {
  auto xl = p.x.clone().requires_grad_(), ul = p.u.clone().requires_grad_();
  auto wl = p.w.clone().requires_grad_(), bl = p.b.clone().requires_grad_();
  auto [y, y_low] = f(xl, ul, wl, bl);
  auto loss = (y * p.g).sum() + (y_low.to(torch::kFloat) * p.g.flip(-1)).sum();
  auto grads = torch::autograd::grad({loss}, {xl, ul, wl, bl});
  return {y.detach(), grads[0], grads[1], grads[2], grads[3]};
}

TEST(AddNorm, AtenEngineLowOutputIsTheCastAndTakesItsGradient) {
  const double scale = 1 / 0.9;
  auto p = problem(6, 40, torch::kBFloat16, torch::kCPU);
  auto fused = run_low([&](auto x, auto u, auto w, auto b) {
    auto r = rpe::add_norm_detail::fused(x, u, p.keep, scale, w, b, 1e-12, Engine::aten, /*low=*/true);
    return std::make_pair(r.y, r.y_low);
  }, p);
  auto want = run_low([&](auto x, auto u, auto w, auto b) {
    // the composite in fp32 from the same bf16 values, then y cast as autocast would
    auto y = rpe::add_norm_detail::composite(x, u.to(torch::kFloat), p.keep, scale, w, b, 1e-12);
    return std::make_pair(y, y.to(torch::kBFloat16));
  }, p);
  EXPECT_LT(rel(fused.y, want.y), 1e-5);
  EXPECT_LT(rel(fused.dx, want.dx), 1e-4);
  EXPECT_LT(rel(fused.du, want.du), 1e-2);  // both in bf16
  EXPECT_LT(rel(fused.dw, want.dw), 1e-4);
  EXPECT_LT(rel(fused.db, want.db), 1e-4);
  auto r = rpe::add_norm_detail::fused(p.x, p.u, p.keep, scale, p.w, p.b, 1e-12, Engine::aten, true);
  EXPECT_EQ(r.y_low.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(r.y_low, r.y.to(torch::kBFloat16))) << "y_low is y rounded once";
}

TEST(AddNorm, TheDeviceCheckRunsAndMeasures) {
  // add_norm_kernel_usable's check (a GPU runs it with the kernels) with the ATen engine on both
  // sides runs every case through and finds no difference.
  EXPECT_EQ(rpe::add_norm_detail::disagreement(torch::kCPU, Engine::aten), 0.0);
  EXPECT_FALSE(rpe::add_norm_kernel_usable(torch::kCPU));
}

TEST(AddNorm, TheUnfusedPathKeepsItsDraws) {
  // Off the kernel (the CPU here), add_norm is the composite it replaced, with the same random
  // draws: CPU training runs, resumes and results are unchanged by the fused path's existence.
  auto p = problem(5, 16, torch::kFloat, torch::kCPU);
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({16}).eps(1e-12));
  torch::manual_seed(3);
  auto got = rpe::add_norm(p.x, p.u, 0.1, /*training=*/true, norm, /*low=*/true);
  torch::manual_seed(3);
  auto want = norm->forward(p.x + torch::dropout(p.u, 0.1, true));
  EXPECT_TRUE(torch::equal(got.y, want));
  EXPECT_FALSE(got.y_low.defined()) << "made by the fused kernel only";
}

namespace {

// The fused function on `device` with `engine` against the composite in fp64 on the CPU, for
// each problem size, update dtype and with and without dropout; y_low too in bf16 and fp16.
void fused_matches_an_fp64_reference(const torch::Device& device, Engine engine,
                                     const std::vector<std::pair<int64_t, int64_t>>& sizes) {
  const double scale = 1 / 0.9;
  for (const auto& [N, D] : sizes) {
    for (const auto ut : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      for (const bool drop : {false, true}) {
        auto p = problem(N, D, ut, device);
        auto keep = drop ? p.keep : Tensor();
        auto got = run([&](auto x, auto u, auto w, auto b) {
          return rpe::add_norm_detail::fused(x, u, keep, scale, w, b, 1e-12, engine).y;
        }, p.x, p.u, p.w, p.b, p.g);
        const auto cpu64 = [](const Tensor& t) { return t.to(torch::kCPU, torch::kDouble); };
        auto keep64 = drop ? keep.cpu() : Tensor();
        auto want = run([&](auto x, auto u, auto w, auto b) {
          return rpe::add_norm_detail::composite(x, u, keep64, scale, w, b, 1e-12);
        }, cpu64(p.x), cpu64(p.u), cpu64(p.w), cpu64(p.b), cpu64(p.g));
        EXPECT_EQ(got.du.scalar_type(), ut);
        const std::string what = "N " + std::to_string(N) + ", D " + std::to_string(D) + ", " + c10::toString(ut) +
                                 (drop ? ", dropout" : "");
        expect_close(got, want, 1e-4, what);
        if (ut == torch::kFloat) continue;
        // y_low made and read too: its gradient summed in by the kernel
        Tensor y_low;
        auto got_low = run_low([&](auto x, auto u, auto w, auto b) {
          auto r = rpe::add_norm_detail::fused(x, u, keep, scale, w, b, 1e-12, engine, /*low=*/true);
          y_low = r.y_low.detach();
          return std::make_pair(r.y, r.y_low);
        }, p);
        Problem p64{cpu64(p.x), cpu64(p.u), cpu64(p.w), cpu64(p.b), cpu64(p.g), keep64};
        auto want_low = run_low([&](auto x, auto u, auto w, auto b) {
          auto y = rpe::add_norm_detail::composite(x, u, keep64, scale, w, b, 1e-12);
          return std::make_pair(y, y.to(ut));
        }, p64);
        expect_close(got_low, want_low, 1e-4, what + ", y_low");
        EXPECT_LT(rel(y_low, got_low.y), 1e-2) << what << ": y_low is y, rounded";
      }
    }
  }
}

}  // namespace

// The CUDA test's harness on the CPU with the ATen engine (CUDA-only tests cannot be run where
// they are written; a harness bug found on the GPU costs the kernel its whole acceptance run).
TEST(AddNorm, Fp64ReferenceHarnessHoldsForTheAtenEngine) {
  fused_matches_an_fp64_reference(torch::kCPU, Engine::aten, {{9, 80}, {37, 768}});
}

TEST(AddNorm, CudaKernelMatchesAnFp64Reference) {
  if (!torch::cuda::is_available() || !rpe::add_norm_kernel_built()) GTEST_SKIP() << "no CUDA device or no kernel";
  const torch::Device cuda(torch::kCUDA);
  ASSERT_TRUE(rpe::add_norm_kernel_usable(cuda));
  fused_matches_an_fp64_reference(cuda, Engine::cuda, {{37, 768}, {9, 80}, {64, 1024}});
}

TEST(AddNorm, DropoutDropsItsShareOnCpuAndCuda) {
  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available()) devices.emplace_back(torch::kCUDA);
  for (const auto& device : devices) {
    torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({256}).eps(1e-12));
    norm->to(device);
    auto p = problem(512, 256, torch::kFloat, device);
    auto u = p.u.clone().requires_grad_();
    rpe::add_norm(p.x, u, 0.25, /*training=*/true, norm).y.mul(p.g).sum().backward();
    const double dropped = (u.grad() == 0).to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(dropped, 0.25, 0.01) << device;
    auto eval = rpe::add_norm(p.x, p.u, 0.25, /*training=*/false, norm).y;
    EXPECT_LT(rel(eval, norm->forward(p.x + p.u)), 1e-5) << device << ": no dropout in evaluation";
  }
}

namespace {

// A small BERT's encoder on `device` with the fused add & norm on and off, under bf16 autocast:
// the same output and parameter gradients within bf16 rounding.
void bert_fused_equals_unfused(const torch::Device& device) {
  // Without dropout: the two paths draw their masks differently.
  auto options = rpe::test::small_model_options("absolute", {.hidden = 64, .heads = 4, .ffn = 128,
                                                             .max_position = 64, .dropout = 0.0});
  torch::manual_seed(0);
  rpe::BertModel model(options);
  model->to(device);
  auto ids = torch::randint(5, 50, {4, 64}, torch::TensorOptions(torch::kLong).device(device));
  std::vector<std::vector<Tensor>> runs;
  for (const bool fused : {true, false}) {
    rpe::set_fused_add_norm(fused);
    model->zero_grad();
    Tensor hidden;
    {
      rpe::AutocastGuard autocast(device, at::kBFloat16);
      hidden = model->encode(ids, Tensor());
    }
    hidden.square().mean().backward();
    std::vector<Tensor> run{hidden.detach()};
    for (const auto& p : model->named_parameters()) run.push_back(p.value().grad().defined() ? p.value().grad().clone() : Tensor());
    runs.push_back(run);
  }
  rpe::set_fused_add_norm(true);
  EXPECT_LT(rel(runs[0][0], runs[1][0]), 2e-2) << "the encoder's output";
  const auto names = model->named_parameters().keys();
  for (size_t i = 0; i < names.size(); ++i) {
    // The MLM head's parameters get no gradient (encode stops before the head); every other one does.
    const bool head = names[i].rfind("mlm_", 0) == 0;
    const Tensor& fused = runs[0][i + 1];
    const Tensor& plain = runs[1][i + 1];
    ASSERT_EQ(fused.defined(), !head) << names[i] << " (fused)";
    ASSERT_EQ(plain.defined(), !head) << names[i] << " (unfused)";
    if (head) continue;
    EXPECT_LT(rel(fused, plain), 2e-2) << names[i];
  }
}

}  // namespace

// Its harness on the CPU, where both paths run unfused (run there, session 35's clone of the
// head's undefined gradients would have failed before a GPU call did).
TEST(AddNorm, BertHarnessRunsOnTheCpuWhereBothPathsAreUnfused) { bert_fused_equals_unfused(torch::kCPU); }

TEST(AddNorm, CudaBertFusedEqualsUnfusedUnderBf16Autocast) {
  if (!torch::cuda::is_available() || !rpe::add_norm_kernel_usable(torch::kCUDA)) GTEST_SKIP() << "no CUDA kernel";
  bert_fused_equals_unfused(torch::kCUDA);
}

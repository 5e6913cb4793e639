// m3 (Huang et al. 2020, eqs. 14–15) against a naive loop over (i, j):
//   e_ij = sum_t q_it k_jt w_{clip(j-i,k), t} / sqrt(d)
// The module has two kernels with hand-written backwards (loop on CPU, band elsewhere); the
// reference is the equation itself with autograd, so both forwards and backwards are
// checked, each kernel on its own. Also: the gate starts near 1.
#include "model/attention/m3.h"
#include "model/attention/m3_kernels.h"
#include "reference.h"

namespace rpe::test {

TEST(M3, MatchesNaiveEquation) {
  for (int64_t k : kClips)
    for (bool shared : {false, true}) {
      auto layer = make_layer(tiny_options("m3", k, shared));
      const int64_t kk = k > 0 ? k : 15;
      auto w = layer.param("w");  // [H|1, 2k+1, d]
      EXPECT_EQ(w.sizes(), torch::IntArrayRef({shared ? 1 : 2, 2 * kk + 1, 4}));
      RefSpec spec;
      spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
        auto a = w.select(1, clip(j - i, kk) + kk);  // [H|1, d]
        return (t.q.select(2, i) * t.k.select(2, j) * a).sum(-1) / 2.0;
      };
      for (int64_t L : kLengths)
        expect_matches_reference(
            layer, L, spec,
            "m3 k=" + std::to_string(k) + " shared=" + std::to_string(shared) + " L=" + std::to_string(L));
    }
}

TEST(M3, ZeroClipUsesOneVector) {
  // k = 0 is reachable with max_position = 1: every pair uses w_0.
  auto o = tiny_options("m3");
  o.max_position = 1;
  auto layer = make_layer(o);
  auto w = layer.param("w");
  ASSERT_EQ(w.size(1), 1);
  RefSpec spec;
  spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
    return (t.q.select(2, i) * t.k.select(2, j) * w.select(1, 0)).sum(-1) / 2.0;
  };
  for (int64_t L : {1, 5}) expect_matches_reference(layer, L, spec, "m3 k=0 L=" + std::to_string(L));
}

// e_ij = sum_t q_it k_jt w[clip(j - i, k) + k, t], written with an [B, H, L, L, d] product.
torch::Tensor naive_m3(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w, int64_t kk) {
  const int64_t L = q.size(2);
  auto idx = torch::empty({L, L}, torch::kLong);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) idx[i][j] = clip(j - i, kk) + kk;
  auto gate = w.index_select(1, idx.flatten()).view({w.size(0), L, L, w.size(2)});  // [H|1, L, L, d]
  return (q.unsqueeze(3) * k.unsqueeze(2) * gate.unsqueeze(0)).sum(-1);
}

// Both kernels, called directly in fp64: forward and every gradient equal the naive product's,
// for clipped, unclipped and zero-clip tables, per head and shared, including lengths where
// the band's groups hold several diagonals (L = 70 > 2d). The band also with its groups
// forced: one diagonal each, 4 (the last group partial), every diagonal in one (as a GPU's
// budget makes them).
TEST(M3, BothKernelsMatchTheNaiveProduct) {
  torch::manual_seed(3);
  const std::vector<std::pair<rpe::M3Kernel, int64_t>> kernels = {{rpe::M3Kernel::loop, 0},
                                                                  {rpe::M3Kernel::band, 0},
                                                                  {rpe::M3Kernel::band, 1},
                                                                  {rpe::M3Kernel::band, 4},
                                                                  {rpe::M3Kernel::band, 1000}};
  for (const auto& [kernel, group] : kernels)
    for (int64_t L : {1, 5, 70})
      for (int64_t kk : {0, 2, 69, 100})
        for (int64_t Hw : {3, 1}) {
          auto opts = torch::TensorOptions().dtype(torch::kDouble);
          auto q = torch::randn({2, 3, L, 16}, opts).requires_grad_();
          auto k = torch::randn({2, 3, L, 16}, opts).requires_grad_();
          auto w = torch::randn({Hw, 2 * kk + 1, 16}, opts).requires_grad_();
          auto up = torch::randn({2, 3, L, L}, opts);
          auto got = rpe::m3_scores(q, k, w, kk, kernel, group);
          auto got_grads = torch::autograd::grad({(got * up).sum()}, {q, k, w});
          auto want = naive_m3(q, k, w, kk);
          auto want_grads = torch::autograd::grad({(want * up).sum()}, {q, k, w});
          const std::string what = std::string(kernel == rpe::M3Kernel::loop ? "loop" : "band") +
                                   " group=" + std::to_string(group) + " L=" + std::to_string(L) +
                                   " k=" + std::to_string(kk) + " Hw=" + std::to_string(Hw);
          EXPECT_LT((got - want).abs().max().item<double>(), 1e-10) << what;
          for (int g = 0; g < 3; ++g)
            EXPECT_LT((got_grads[g] - want_grads[g]).abs().max().item<double>(), 1e-9) << what << " grad " << g;
        }
}

// The CUDA kernels' element functions (m3_kernels.h: what each CUDA thread computes), called
// here in plain loops on the CPU in fp64 on the layouts m3_cuda_tensors.cpp gives them, then
// summed and folded into the table as it does: scores and every gradient equal the naive
// product's, clipped and not, per-head and shared tables. So the index arithmetic the GPU runs
// is checked where no GPU is.
TEST(M3, CudaKernelElementFunctionsMatchTheNaiveProduct) {
  torch::manual_seed(5);
  for (int64_t L : {1, 5, 13})
    for (int64_t kk : {0, 2, 12, 30})
      for (int64_t Hw : {3, 1}) {
        const int64_t B = 2, H = 3, d = 4, W = 2 * L - 1;
        auto opts = torch::TensorOptions().dtype(torch::kDouble);
        auto q = torch::randn({B, H, L, d}, opts).requires_grad_(),
             k = torch::randn({B, H, L, d}, opts).requires_grad_();
        auto w = torch::randn({Hw, 2 * kk + 1, d}, opts).requires_grad_();
        auto g = torch::randn({B, H, L, L}, opts);
        auto want = naive_m3(q, k, w, kk);
        auto want_grads = torch::autograd::grad({(want * g).sum()}, {q, k, w});

        auto rows = (torch::arange(W, torch::kLong) - (L - 1)).clamp(-kk, kk) + kk;
        auto qc = q.detach().contiguous(), kc = k.detach().contiguous(), kt = kc.transpose(-2, -1).contiguous();
        auto wx = w.detach().index_select(1, rows).contiguous(), wxt = wx.transpose(1, 2).contiguous();
        const rpe::m3k::Dims n{B * H, H, Hw, L, d};
        auto e = torch::empty({B, H, L, L}, opts), gq = torch::empty({B, H, L, d}, opts), gk = torch::empty_like(gq);
        auto gwx = torch::empty({B * H, W, d}, opts);
        const double *pq = qc.data_ptr<double>(), *pk = kc.data_ptr<double>(), *pkt = kt.data_ptr<double>(),
                     *pwx = wx.data_ptr<double>(), *pwxt = wxt.data_ptr<double>(), *pg = g.data_ptr<double>();
        for (int64_t bh = 0; bh < B * H; ++bh) {
          for (int64_t i = 0; i < L; ++i)
            for (int64_t j = 0; j < L; ++j)
              e.data_ptr<double>()[(bh * L + i) * L + j] = rpe::m3k::score(n, pq, pkt, pwxt, bh, i, j);
          for (int64_t row = 0; row < L; ++row)
            for (int64_t t = 0; t < d; ++t) {
              gq.data_ptr<double>()[(bh * L + row) * d + t] = rpe::m3k::grad_q(n, pg, pk, pwx, bh, row, t);
              gk.data_ptr<double>()[(bh * L + row) * d + t] = rpe::m3k::grad_k(n, pg, pq, pwx, bh, row, t);
            }
          for (int64_t s = 0; s < W; ++s)
            for (int64_t t = 0; t < d; ++t)
              gwx.data_ptr<double>()[(bh * W + s) * d + t] = rpe::m3k::grad_wx(n, pg, pq, pk, bh, s, t);
        }
        auto gw_rows = gwx.view({B, H, W, d}).sum(0);
        if (Hw == 1) gw_rows = gw_rows.sum(0, /*keepdim=*/true);
        auto gw = torch::zeros({Hw, 2 * kk + 1, d}, opts).index_add_(1, rows, gw_rows);
        const std::string what = "L=" + std::to_string(L) + " k=" + std::to_string(kk) + " Hw=" + std::to_string(Hw);
        EXPECT_LT((e - want).abs().max().item<double>(), 1e-10) << what;
        EXPECT_LT((gq - want_grads[0]).abs().max().item<double>(), 1e-10) << what << " dq";
        EXPECT_LT((gk - want_grads[1]).abs().max().item<double>(), 1e-10) << what << " dk";
        EXPECT_LT((gw - want_grads[2]).abs().max().item<double>(), 1e-10) << what << " dw";
      }
}

// `kernel` on `device`: fp64 and fp32 scores and gradients against the naive product on the
// CPU, at length L, clipped (k = 7) and not (k = 300), per-head and shared tables.
void kernel_matches_the_naive_product(const torch::Device& device, rpe::M3Kernel kernel, int64_t L) {
  torch::manual_seed(6);
  for (auto dt : {torch::kDouble, torch::kFloat})
    for (int64_t kk : {7, 300})
      for (int64_t Hw : {2, 1}) {
        auto opts = torch::TensorOptions().dtype(torch::kDouble);
        auto q = torch::randn({2, 2, L, 16}, opts).requires_grad_(),
             k = torch::randn({2, 2, L, 16}, opts).requires_grad_();
        auto w = torch::randn({Hw, 2 * kk + 1, 16}, opts).requires_grad_();
        auto g = torch::randn({2, 2, L, L}, opts);
        auto want = naive_m3(q, k, w, kk);
        auto want_grads = torch::autograd::grad({(want * g).sum()}, {q, k, w});
        auto qd = q.detach().to(device, dt).requires_grad_(), kd = k.detach().to(device, dt).requires_grad_();
        auto wd = w.detach().to(device, dt).requires_grad_();
        auto got = rpe::m3_scores(qd, kd, wd, kk, kernel);
        auto got_grads = torch::autograd::grad({(got * g.to(device, dt)).sum()}, {qd, kd, wd});
        const double tol = dt == torch::kDouble ? 1e-9 : 2e-3;  // fp32: relative to values of ~10-100
        const std::string what = std::string(dt == torch::kDouble ? "fp64" : "fp32") + " k=" + std::to_string(kk);
        const auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
          return ((a.cpu().to(torch::kDouble) - b).abs().max() / b.abs().max().clamp_min(1)).item<double>();
        };
        EXPECT_LT(rel(got, want), tol) << what;
        for (int i = 0; i < 3; ++i) EXPECT_LT(rel(got_grads[i], want_grads[i]), tol) << what << " grad " << i;
      }
}

// That harness on the CPU with the loop kernel (what the CUDA kernel replaces there).
TEST(M3, NaiveProductHarnessHoldsForTheCpuLoopKernel) {
  kernel_matches_the_naive_product(torch::kCPU, rpe::M3Kernel::loop, 40);
}

// The CUDA kernel itself (where a GPU and the kernel are), at a length past one warp and a block.
TEST(M3, CudaKernelMatchesTheNaiveProductOnCuda) {
  if (!torch::cuda::is_available() || !rpe::m3_cuda_kernel_built()) GTEST_SKIP() << "no CUDA device or no CUDA kernel";
  kernel_matches_the_naive_product(torch::kCUDA, rpe::M3Kernel::cuda, 300);
}

// Under bf16 (what autocast hands the term) each kernel stays within bf16's rounding of the
// fp32 result, scores and gradients, in bf16's dtype: the loop kernel computes in fp32 and
// rounds once; the band kernel (CUDA's fallback; the layer tests on CPU run the loop) multiplies in
// bf16 and sums in fp32. 40 positions, k = 10: clipped regions, band and several groups.
// q, k in bf16 with the gate in bf16, or in fp32 as M3Term passes it (its clipped regions and
// the band's products then mix the two types, forward and backward, with no autocast here).
TEST(M3, EachKernelInBf16StaysWithinRoundingOfFp32) {
  torch::manual_seed(4);
  auto q = torch::randn({1, 2, 40, 8}), k = torch::randn({1, 2, 40, 8}), w = 1 + 0.1 * torch::randn({2, 21, 8});
  auto up = torch::randn({1, 2, 40, 40});
  auto run = [&](torch::ScalarType dt, torch::ScalarType gate_dt, rpe::M3Kernel kernel) {
    auto qq = q.to(dt).requires_grad_(), kk = k.to(dt).requires_grad_(), ww = w.to(gate_dt).requires_grad_();
    auto e = rpe::m3_scores(qq, kk, ww, 10, kernel);
    auto g = torch::autograd::grad({(e * up.to(dt)).sum()}, {qq, kk, ww});
    return std::vector<torch::Tensor>{e, g[0], g[1], g[2]};
  };
  for (auto kernel : {rpe::M3Kernel::loop, rpe::M3Kernel::band}) {
    const auto hi = run(torch::kFloat, torch::kFloat, kernel);
    for (auto gate_dt : {torch::kBFloat16, torch::kFloat}) {
      const auto lo = run(torch::kBFloat16, gate_dt, kernel);
      for (size_t i = 0; i < lo.size(); ++i) {
        EXPECT_EQ(lo[i].scalar_type(), i == 3 ? gate_dt : torch::kBFloat16) << i;
        const double scale = hi[i].abs().max().item<double>();
        EXPECT_LT((lo[i].to(torch::kFloat) - hi[i]).abs().max().item<double>(), 0.02 * scale)
            << (kernel == rpe::M3Kernel::loop ? "loop " : "band ") << c10::toString(gate_dt) << " gate, " << i;
      }
    }
  }
}

TEST(M3, GateStartsNearOne) {
  torch::manual_seed(0);
  auto term = make_position_method(tiny_options("m3"))->make_layer_term(0);
  auto w = term->named_parameters()["w"];
  EXPECT_NEAR(w.mean().item<double>(), 1.0, 0.01);
  EXPECT_LT((w - 1.0).abs().max().item<double>(), 0.2);
}

}  // namespace rpe::test

// Shapes the kernels would index out of bounds are refused up front, on every kernel.
TEST(M3, MismatchedShapesAreRefused) {
  auto q = torch::randn({2, 3, 5, 4}, torch::kDouble);
  auto w = torch::randn({3, 5, 4}, torch::kDouble);  // k = 2: 2k+1 = 5 rows
  EXPECT_NO_THROW(rpe::m3_scores(q, q, w, 2, rpe::M3Kernel::band));
  const std::vector<std::pair<torch::Tensor, torch::Tensor>> bad = {
      {torch::randn({2, 3, 6, 4}, torch::kDouble), w},         // k of another length
      {q, torch::randn({3, 7, 4}, torch::kDouble)},            // 2k+1 + 2 rows
      {q, torch::randn({3, 5, 8}, torch::kDouble)},            // another head size
      {q, torch::randn({2, 5, 4}, torch::kDouble)}};           // neither 1 table nor H
  for (const auto& kernel : {rpe::M3Kernel::loop, rpe::M3Kernel::band})
    for (const auto& [k, table] : bad) EXPECT_THROW(rpe::m3_scores(q, k, table, 2, kernel), c10::Error) << table.sizes();
  // A table or k on another device would hand the CUDA kernel a pointer it cannot read: refused
  // by name before any kernel (the meta device stands in for a second one here).
  for (const auto& [k, table] : std::vector<std::pair<torch::Tensor, torch::Tensor>>{{q, w.to(torch::kMeta)},
                                                                                    {q.to(torch::kMeta), w}}) {
    try {
      rpe::m3_scores(q, k, table, 2, rpe::M3Kernel::band);
      ADD_FAILURE() << "accepted " << k.device() << " and " << table.device();
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("on one device"), std::string::npos) << e.what();
    }
  }
}

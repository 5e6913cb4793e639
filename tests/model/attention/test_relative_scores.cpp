// relative_scores / relative_key_scores, the [L, L] layout shared by shaw, transformer_xl,
// m4 and deberta, against a loop over (i, j) that reads the table at clip(j - i, k) + k.
// Every block count (0: the default) and both code paths (gather for short reaches,
// skew for long ones), values and gradients, shared and per-head tables, and x laid out as
// attention passes it (a view into the fused QKV projection) as well as contiguous. The CUDA
// layout kernels' index arithmetic runs here on the CPU; the kernels themselves on a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "model/attention/position_cache.h"
#include "model/attention/position_method.h"
#include "model/attention/relative_layout.h"
#include "model/attention/relative_layout_kernels.h"

namespace rpe {
namespace {

// y[b, h, i, j] = x[b, h, key ? j : i] . table[h or 0, clip(j - i, k) + k], in fp64, through
// the [H, L, L, d] tensor of table rows that the real implementation avoids; the slot of
// each (i, j) comes from a plain loop.
torch::Tensor naive(const torch::Tensor& x, const torch::Tensor& table, int64_t k, bool key) {
  const int64_t L = x.size(2);
  auto slot = torch::empty({L, L}, torch::kLong);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < L; ++j) slot[i][j] = std::clamp<int64_t>(j - i, -k, k) + k;
  auto rows = table.index_select(1, slot.flatten()).view({table.size(0), L, L, table.size(2)});  // [H|1, L, L, d]
  auto xi = key ? x.unsqueeze(2) : x.unsqueeze(3);  // [B, H, 1, L, d] (key j) or [B, H, L, 1, d] (query i)
  return (xi * rows.unsqueeze(0)).sum(-1);          // [B, H, L, L]
}

TEST(RelativeScores, MatchLoopForEveryPathAndBlockCount) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  for (int64_t L : {1, 2, 7, 33}) {
    for (int64_t k : {1, 3, 15, 40}) {
      for (int64_t table_heads : {1, 3}) {
        for (int64_t blocks : {0, 1, 2, 3, 4, 5, 40}) {
          for (bool key : {false, true}) {
            torch::manual_seed(L * 1000 + k * 10 + blocks);
            // x: [B, H, L, d] = [2, 3, L, 4]; for odd block counts, a head's slice of a [B, L, 3, H, d]
            // projection, transposed, as SelfAttention's q and k are.
            auto x = blocks % 2 ? torch::randn({2, L, 3, 3, 4}, opts).select(2, 1).transpose(1, 2)
                                : torch::randn({2, 3, L, 4}, opts);
            x.requires_grad_();
            auto table = torch::randn({table_heads, 2 * k + 1, 4}, opts).requires_grad_();
            auto got = key ? relative_key_scores(x, table, k, blocks) : relative_scores(x, table, k, blocks);
            auto want = naive(x, table, k, key);
            const std::string where = "L=" + std::to_string(L) + " k=" + std::to_string(k) + " heads=" +
                                      std::to_string(table_heads) + " blocks=" + std::to_string(blocks) +
                                      (key ? " key" : " query");
            ASSERT_EQ(got.sizes(), want.sizes()) << where;
            EXPECT_LT((got - want).abs().max().item<double>(), 1e-12) << where;
            auto g = torch::randn_like(want);
            auto got_grad = torch::autograd::grad({got}, {x, table}, {g});
            auto want_grad = torch::autograd::grad({want}, {x, table}, {g});
            EXPECT_LT((got_grad[0] - want_grad[0]).abs().max().item<double>(), 1e-12) << where << " dx";
            EXPECT_LT((got_grad[1] - want_grad[1]).abs().max().item<double>(), 1e-12) << where << " dtable";
          }
        }
      }
    }
  }
}

// The cache frees everything when full (a run sweeping lengths), except once a CUDA graph
// was captured (train/cuda_graph.cpp), which reads its entries by address.
TEST(RelativeScores, CachedIndicesOutliveAFullCacheOnceAGraphReadsThem) {
  const auto first = relative_index(8, 5000, torch::kCPU);  // clips no other test uses
  for (int64_t k = 5001; k < 5001 + 1100; ++k) relative_index(8, k, torch::kCPU);  // past 1024 entries
  EXPECT_FALSE(relative_index(8, 5000, torch::kCPU).is_same(first));  // freed and built again
  const auto kept = relative_index(8, 5000, torch::kCPU);
  keep_cached_position_tensors();
  for (int64_t k = 5001; k < 5001 + 1100; ++k) relative_index(8, k, torch::kCPU);
  EXPECT_TRUE(relative_index(8, 5000, torch::kCPU).is_same(kept));
}

TEST(RelativeScores, IndicesBuiltOnceServeEveryLaterCallAndAutograd) {
  // The slot indices are built once per (lengths, device) and kept (position_method.cpp's
  // cached_index). The first call here comes under inference mode, as an evaluation before
  // training would; the indices it builds must still serve a training step's backward, and
  // the kept ones must be the same tensor, unchanged by the methods that read them.
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t L = 29, k = 31;  // a length and clip no other test here uses: built fresh below
  torch::manual_seed(5);
  auto x = torch::randn({2, 3, L, 4}, opts), table = torch::randn({3, 2 * k + 1, 4}, opts);
  torch::Tensor first_index;
  {
    const c10::InferenceMode inference;
    first_index = relative_index(L, k, torch::kCPU);
    relative_scores(x, table, k, 3);
    relative_key_scores(x, table, k, 1);
  }
  EXPECT_FALSE(first_index.is_inference());
  auto again = relative_index(L, k, torch::kCPU);
  EXPECT_TRUE(again.is_same(first_index));
  auto xr = x.clone().requires_grad_(), tr = table.clone().requires_grad_();
  for (int64_t blocks : {3, 1}) {
    auto got = relative_scores(xr, tr, k, blocks) + relative_key_scores(xr, tr, k, blocks);
    auto want = naive(xr, tr, k, false) + naive(xr, tr, k, true);
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-12);
    auto g = torch::randn_like(want);
    auto got_grad = torch::autograd::grad({got}, {xr, tr}, {g});
    auto want_grad = torch::autograd::grad({want}, {xr, tr}, {g});
    EXPECT_LT((got_grad[1] - want_grad[1]).abs().max().item<double>(), 1e-12) << "blocks " << blocks;
  }
  EXPECT_TRUE(torch::equal(relative_index(L, k, torch::kCPU),
                           (torch::arange(L).unsqueeze(0) - torch::arange(L).unsqueeze(1)).clamp(-k, k) + k));
}

// Under bf16/fp16 the clipped gather (relative_scores' path for short tables) sums each slot's
// gradient in fp32 and rounds it once: with inputs exact in the dtype and sums exact in fp32
// (multiples of 1/64 or 1/1024, at most 300 terms), its gradient must be the fp64 sum rounded to
// the dtype, bit for bit, whatever chunks the backward widens at a time, on the query side and
// the key side (negated index). The forward is gather_relative's, bit for bit. On the CPU
// ATen's own gather backward rounds once as well (it passes here too); on a GPU it adds in the
// dtype, one atomic at a time, and fails.
void wide_gather_rounds_once(const torch::Device& device) {
  constexpr int64_t L = 300, k = 8, R = 2 * k + 1;
  for (const auto dtype : {torch::kBFloat16, torch::kHalf}) {
    for (const bool key : {false, true}) {
      torch::manual_seed(key ? 11 : 12);
      auto idx = relative_index(L, k, torch::kCPU);
      if (key) idx = 2 * k - idx;
      auto x = (torch::randint(-8, 9, {2, 3, L, R}) / 8.0).to(dtype);
      const int64_t unit = dtype == torch::kHalf ? 1024 : 64;  // steps of 1/unit: exact in the dtype
      auto g = (torch::randint(-unit, unit + 1, {2, 3, L, L}) / static_cast<double>(unit)).to(dtype);
      auto xd = x.to(torch::kDouble).requires_grad_();
      gather_relative(xd, idx).backward(g.to(torch::kDouble));
      const auto want = xd.grad().to(dtype);
      ASSERT_FALSE(torch::equal(want.to(torch::kDouble), xd.grad())) << dtype << ": no sum needed rounding";
      for (const int64_t chunk_bytes : {int64_t{1}, int64_t{4 * L * L * 4}, int64_t{32} << 20}) {
        auto xr = x.to(device).clone().requires_grad_();
        auto y = gather_relative_wide(xr, idx.to(device), chunk_bytes);
        EXPECT_TRUE(torch::equal(y.cpu(), gather_relative(x, idx))) << device << " " << dtype << " key " << key;
        y.backward(g.to(device));
        ASSERT_EQ(xr.grad().scalar_type(), dtype);
        EXPECT_TRUE(torch::equal(xr.grad().cpu(), want))
            << device << " " << dtype << " key " << key << " chunk " << chunk_bytes << ": max |diff| "
            << (xr.grad().cpu().to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
      }
    }
  }
}

TEST(WideGather, SumsEachSlotOnceRounded) {
  wide_gather_rounds_once(torch::kCPU);
  constexpr int64_t L = 300, k = 8, R = 2 * k + 1;
  // Through relative_scores and relative_key_scores (its gradient arrives transposed) at a reach
  // where they take the gather: the scores exact, the gradients within bf16's GEMM roundings.
  for (const bool key : {false, true}) {
    auto x = (torch::randint(-8, 9, {2, 3, L, 4}) / 8.0).to(torch::kBFloat16).requires_grad_();
    auto table = (torch::randint(-8, 9, {3, R, 4}) / 8.0).requires_grad_();
    auto g = (torch::randint(-64, 65, {2, 3, L, L}) / 64.0).to(torch::kBFloat16);
    auto y = key ? relative_key_scores(x, table, k) : relative_scores(x, table, k);
    ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(y.to(torch::kDouble), naive(x.to(torch::kDouble), table.to(torch::kDouble), k, key)));
    y.backward(g);
    auto xd = x.detach().to(torch::kDouble).requires_grad_(), td = table.detach().to(torch::kDouble).requires_grad_();
    naive(xd, td, k, key).backward(g.to(torch::kDouble));
    // x's gradient: the bf16 slot sums times the table, a bf16 GEMM; the table's likewise.
    EXPECT_LT((x.grad().to(torch::kDouble) - xd.grad()).abs().max().item<double>(),
              xd.grad().abs().max().item<double>() / 32)
        << "key " << key;
    EXPECT_LT((table.grad().to(torch::kDouble) - td.grad()).abs().max().item<double>(),
              td.grad().abs().max().item<double>() / 32)
        << "key " << key;
  }
}

TEST(WideGather, CudaSumsEachSlotOnceRounded) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  wide_gather_rounds_once(torch::kCUDA);
}

// The CUDA layout kernels' arithmetic (relative_layout_kernels.h), run here in plain loops: s =
// x . (every slot's table row, padded to a multiple of 8) laid out as [L, L] must be the naive
// scores, and its gradient (per slot, summed over the clipped ends, zero on the padding) must be
// autograd's through ATen's gather.
// The kernels' backward sums a clipped end's run in one thread: they are taken where those runs
// are short (the longest is L - k' elements, row L - 1's), the skew path elsewhere.
TEST(RelativeScores, LayoutKernelIsTakenForShortClippedRunsOnly) {
  EXPECT_TRUE(relative_layout_suits(512, relative_reach(4096, 512)));  // unclipped (k >= n - 1): runs of one
  EXPECT_TRUE(relative_layout_suits(128, 127));
  EXPECT_TRUE(relative_layout_suits(512, 448));   // 64 elements
  EXPECT_FALSE(relative_layout_suits(512, 447));  // 65
  EXPECT_FALSE(relative_layout_suits(512, relative_reach(2, 512)));  // Table 4's k = 2 at L = 512
  EXPECT_TRUE(relative_layout_suits(40, relative_reach(2, 40)));     // short sequences: any k
  EXPECT_FALSE(relative_layout_suits(0, 0));
}

TEST(RelativeScores, LayoutKernelArithmeticMatchesLoopAndGather) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  for (int64_t L : {1, 2, 7, 33})
    for (int64_t k : {0, 1, 3, 15, 40})
      for (bool key : {false, true}) {
        torch::manual_seed(L * 100 + k);
        const int64_t B = 2, H = 3, reach = std::min(k, L - 1), W = (2 * reach + 8) / 8 * 8;
        auto x = torch::randn({B, H, L, 4}, opts), table = torch::randn({H, 2 * k + 1, 4}, opts);
        auto rows = torch::constant_pad_nd(table.narrow(1, k - reach, 2 * reach + 1), {0, 0, 0, W - 2 * reach - 1});
        // [B, H, L, W], laid out head-major as times_rows leaves it
        auto s = torch::matmul(x, rows.transpose(-2, -1)).transpose(0, 1).contiguous().transpose(0, 1);
        const rlk::Dims n{B, H, L, W, reach, s.stride(0), s.stride(1), key};
        const std::string where = "L=" + std::to_string(L) + " k=" + std::to_string(k) + (key ? " key" : " query");

        auto out = torch::empty({B, H, L, L}, opts);
        auto* o = out.data_ptr<double>();
        const auto* sp = s.data_ptr<double>();
        // As the kernels read: the query side a row of s at a time, the key side by source().
        for (int64_t row = 0; row < B * H * L; ++row) {
          const int64_t bh = row / L, i = row % L;
          const double* s_row = sp + n.block(bh) + i * W;
          for (int64_t j = 0; j < L; ++j) o[row * L + j] = key ? sp[rlk::source(n, bh, i, j)] : s_row[rlk::slot(n, i, j)];
        }
        EXPECT_LT((out - naive(x, table, k, key)).abs().max().item<double>(), 1e-12) << where;

        auto g = torch::randn({B, H, L, L}, opts);
        auto ds = torch::empty_strided(s.sizes(), s.strides(), opts);
        auto* d = ds.data_ptr<double>();
        const auto* gp = g.data_ptr<double>();
        for (int64_t bh = 0; bh < B * H; ++bh)
          for (int64_t r = 0; r < L; ++r)
            for (int64_t c = 0; c < W; ++c) {
              double acc = 0;
              const auto run = rlk::summed(n, r, c);
              const double* g_row = gp + rlk::grad_offset(n, bh, r, 0);  // the query side's kernel reads a row
              for (int64_t t = run.lo; t <= run.hi; ++t) acc += key ? gp[rlk::grad_offset(n, bh, r, t)] : g_row[t];
              d[n.block(bh) + r * W + c] = acc;
            }
        auto sr = s.clone().requires_grad_();
        auto want = torch::autograd::grad({relative_layout_reference(sr, reach, key)}, {sr}, {g})[0];
        EXPECT_LT((ds - want).abs().max().item<double>(), 1e-12) << where;
        EXPECT_EQ(ds.narrow(3, 2 * reach + 1, W - 2 * reach - 1).abs().max().item<double>(), 0.0) << where;
      }
}

// The key side's tiled kernels (relative_layout_cuda.cu), their blocks and threads emulated
// here with the same header functions and shared-memory indexing, against ATen's gather.
TEST(RelativeScores, LayoutKernelKeySideTilesMatchTheGather) {
  constexpr int64_t T = rlk::kTile;
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  for (int64_t L : {1, 7, 33, 70})
    for (int64_t k : {0, 3, 40, 69}) {
      torch::manual_seed(L * 7 + k);
      const int64_t B = 2, H = 2, reach = std::min(k, L - 1), W = (2 * reach + 8) / 8 * 8;
      auto s = torch::randn({H, B, L, W}, opts).transpose(0, 1);  // head-major, as times_rows leaves it
      const rlk::Dims n{B, H, L, W, reach, s.stride(0), s.stride(1), true};
      const std::string where = "L=" + std::to_string(L) + " k=" + std::to_string(k);
      const auto* sp = s.data_ptr<double>();
      auto out = torch::full({B, H, L, L}, -1.0, opts);
      auto* o = out.data_ptr<double>();
      for (int64_t bh = 0; bh < B * H; ++bh)  // key_layout_kernel: blocks (j0, i0), then rows x lanes
        for (int64_t j0 = 0; j0 < L; j0 += T)
          for (int64_t i0 = 0; i0 < L; i0 += T) {
            double tile[T][T + 1];
            for (int64_t row = 0; row < T; ++row)
              for (int64_t lane = 0; lane < T; ++lane)
                if (i0 + lane < L && j0 + row < L) tile[row][lane] = sp[rlk::source(n, bh, i0 + lane, j0 + row)];
            for (int64_t row = 0; row < T; ++row)
              for (int64_t lane = 0; lane < T; ++lane)
                if (i0 + row < L && j0 + lane < L) o[(bh * L + i0 + row) * L + j0 + lane] = tile[lane][row];
          }
      auto sr = s.clone().requires_grad_();
      auto want = relative_layout_reference(sr, reach, true);
      EXPECT_LT((out - want).abs().max().item<double>(), 1e-15) << where;

      auto g = torch::randn({B, H, L, L}, opts);
      const auto* gp = g.data_ptr<double>();
      auto ds = torch::full_like(s, -1.0);  // every slot must be written
      auto* d = ds.data_ptr<double>();
      for (int64_t bh = 0; bh < B * H; ++bh)  // key_layout_grad_kernel: blocks (c0, j0)
        for (int64_t c0 = 0; c0 < W; c0 += T)
          for (int64_t j0 = 0; j0 < L; j0 += T) {
            const int64_t base = rlk::key_grad_base(n, j0, c0);
            double rows[2 * T - 1][T + 1];
            for (int64_t r = 0; r < 2 * T - 1; ++r)
              for (int64_t lane = 0; lane < T; ++lane) {
                const int64_t i = base + r, j = j0 + lane;
                rows[r][lane] = i >= 0 && i < L && j < L ? gp[(bh * L + i) * L + j] : 0.0;
              }
            for (int64_t row = 0; row < T; ++row)
              for (int64_t lane = 0; lane < T; ++lane) {
                const int64_t j = j0 + row, c = c0 + lane;
                if (j >= L || c >= W) continue;
                double acc = 0;
                if (rlk::inner_slot(n, c)) {
                  acc = rows[rlk::key_grad_row(row, lane)][row];
                } else {
                  const auto run = rlk::summed(n, j, c);
                  for (int64_t t = run.lo; t <= run.hi; ++t) acc += gp[rlk::grad_offset(n, bh, j, t)];
                }
                d[n.block(bh) + j * W + c] = acc;
              }
          }
      auto want_grad = torch::autograd::grad({want}, {sr}, {g})[0];
      EXPECT_LT((ds - want_grad).abs().max().item<double>(), 1e-12) << where;
    }
}

// relative_scores and relative_key_scores on `device` (fp64) against the loop on the CPU,
// values and gradients, with the layout kernels on and off (on a GPU: the kernels, then the skew
// path on the same device; on the CPU both runs take the gather or skew path).
void layout_matches_loop(const torch::Device& device, const std::vector<int64_t>& lengths) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  for (bool kernel : {true, false}) {
    set_relative_layout_kernel(kernel);
    for (int64_t L : lengths)
      for (int64_t k : {0, 3, 40, 200})
        for (bool key : {false, true}) {
          torch::manual_seed(L + k);
          auto x = torch::randn({2, L, 3, 3, 8}, opts).select(2, 1).transpose(1, 2).requires_grad_();
          auto table = torch::randn({3, 2 * k + 1, 8}, opts).requires_grad_();
          auto xc = x.detach().to(device).requires_grad_(), tc = table.detach().to(device).requires_grad_();
          auto got = key ? relative_key_scores(xc, tc, k) : relative_scores(xc, tc, k);
          auto want = naive(x, table, k, key);
          const std::string where = "L=" + std::to_string(L) + " k=" + std::to_string(k) + (key ? " key" : " query") +
                                    (kernel ? " kernel" : " skew");
          EXPECT_LT((got.cpu() - want).abs().max().item<double>(), 1e-10) << where;
          auto g = torch::randn_like(want);
          auto got_grad = torch::autograd::grad({got}, {xc, tc}, {g.to(device)});
          auto want_grad = torch::autograd::grad({want}, {x, table}, {g});
          EXPECT_LT((got_grad[0].cpu() - want_grad[0]).abs().max().item<double>(), 1e-10) << where << " dx";
          EXPECT_LT((got_grad[1].cpu() - want_grad[1]).abs().max().item<double>(), 1e-10) << where << " dtable";
        }
  }
  set_relative_layout_kernel(true);
}

// The GPU test's harness on the CPU (short lengths: the loop reference is slow there).
TEST(RelativeScores, LayoutKernelHarnessHoldsOnTheCpuPaths) { layout_matches_loop(torch::kCPU, {1, 7, 33}); }

// On a GPU: the layout kernels and the skew path.
TEST(RelativeScores, CudaLayoutKernelMatchesLoop) {
  if (!torch::cuda::is_available() || !relative_layout_kernel_built()) GTEST_SKIP() << "no CUDA device or kernel";
  ASSERT_TRUE(relative_layout_usable(torch::kCUDA)) << "the kernels disagree with ATen's gather on this GPU";
  layout_matches_loop(torch::kCUDA, {1, 7, 33, 130, 300});  // 300: rows longer than a query-side block
}

}  // namespace
}  // namespace rpe

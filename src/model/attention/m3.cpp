// m3: Huang et al. 2020, method 3 (eqs. 14–15): a relative vector gates q . k elementwise,
//   e_ij = sum_t q_it k_jt w_{clip(j-i,k), t} / sqrt(d)
// w: (2k+1) x d per layer and head (share_across_heads: per layer), k = n - 1 by default.
// Initialised at 1 + N(0, init_std): a zero gate would kill every score, 1 starts the
// method as plain attention.
//
// Written as in eq. 15 the trilinear product is an [B, H, L, L, d] tensor (the paper fitted
// 2 sequences per GPU against 20 for the other methods). No product of three operands is
// a matmul, so here it is a custom autograd function that saves only q, k, w, recomputes in
// backward and never holds more than O(B H L^2), with three kernels (m3.h):
//   * loop (CPU): fused loops over (i, j, t) on the expanded table wx[j - i + L - 1] (clipping
//     applied), one vectorised line over contiguous rows; temporaries: the [H|1, 2L-1, d]
//     table and transposed copies of k (and, in backward, of the incoming gradient).
//   * cuda (CUDA, where built): one thread per element of the scores and of each gradient,
//     the element functions of m3_kernels.h (m3_cuda.cu; m3_cuda_tensors.cpp checks them
//     against the equation on each device before its first use, else the band runs there).
//   * band (any device): diagonals r = j - i with |r| >= k (clipped) share
//     one gate w_{+-k}, so there the scores are plain matmuls (q * w_{+-k}) k^T under a mask;
//     the band |r| < k (all of it when unclipped) is computed by groups of diagonals: for
//     slots s..s+g the window k_{i+r} is a strided view ([B, H, L, d, g], no copy), so the
//     live temporaries are O(B H L d g), g ~ L / 2d on the CPU (about half an [L, L] score
//     tensor), up to 1 GiB a group on a GPU (group_size; backward holds two);
//     the band scores [B, H, L, 2m+1] are then gathered into [B, H, L, L]. Elementwise
//     kernels over a group at a time, memory-bound: one BERT-base layer at L = 512 takes 10x
//     absolute's time on CPU with it, 1.5x with the loop kernel (bench/results/attention_cpu.md).
#include "model/attention/m3.h"

#include <ATen/Parallel.h>

#include <array>

#include "model/attention/clipped_table_method.h"

namespace rpe {

namespace m3_detail {

torch::Tensor offset_rows(int64_t L, int64_t clip, const torch::Device& device) {
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  return (torch::arange(2 * L - 1, opts) - (L - 1)).clamp(-clip, clip) + clip;
}

torch::ScalarType compute_dtype(const torch::Tensor& q) {
  return q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

}  // namespace m3_detail

namespace {

using m3_detail::compute_dtype;
using m3_detail::offset_rows;
using torch::Tensor;

// Band geometry at length L: half-width m (slots s = r + m for r in [-m, m]) and whether
// the clipped regions |r| >= k exist.
struct Band {
  int64_t m;
  bool clipped;
};
Band band_for(int64_t k, int64_t L) { return k >= L ? Band{L - 1, false} : Band{k - 1, true}; }

// Diagonals per group (forced > 0: that many, for tests). On the CPU, where only tests run
// the band, the live temporaries stay near half of a [B, H, L, L] score tensor (g ~ L / 2d).
// A GPU has the memory to take larger groups, and needs them: the CPU's rule makes one
// diagonal a group at L = 128, d = 64, so a BERT-base layer launched ~255 groups of small
// kernels per pass (1.8 s a training step on an H200, 40x the other methods). There a group's
// product [B, H, L, d, g] may take up to kDeviceGroupBytes.
// The product is in the promoted type of a and the gate (bf16 activations, an fp32 gate: fp32).
constexpr int64_t kDeviceGroupBytes = int64_t{1} << 30;
int64_t group_size(const Tensor& a, const Tensor& w, int64_t slots, int64_t forced) {
  slots = std::max<int64_t>(slots, 1);
  if (forced > 0) return std::min(forced, slots);
  if (a.is_cpu()) return std::clamp<int64_t>(a.size(2) / (2 * a.size(3)), 1, slots);
  const auto element = static_cast<int64_t>(c10::elementSize(at::promote_types(a.scalar_type(), w.scalar_type())));
  const int64_t slot_bytes = std::max<int64_t>(a.numel() * element, 1);
  return std::clamp<int64_t>(kDeviceGroupBytes / slot_bytes, 1, slots);
}

// [B, H, L, d, g] view: win[..., i, t, s'] = c[i + s0 + s' - m, t] (0 outside), c_pad = c
// padded with m zero rows on both ends of the length axis.
Tensor windows(const Tensor& c_pad, int64_t L, int64_t s0, int64_t g) {
  return c_pad.narrow(2, s0, L + g - 1).unfold(2, g, 1);
}

// x[..., i, s] = sum_t a_it c_{i+r, t} w_{s, t}, r = s - m: band scores in diagonal-major
// layout [B, H, L, 2m+1]. a, c: [B, H, L, d]; w_band: [H|1, 2m+1, d].
Tensor band_scores(const Tensor& a, const Tensor& c, const Tensor& w_band, int64_t m, int64_t forced_group) {
  const int64_t L = a.size(2), R = 2 * m + 1, g = group_size(a, w_band, R, forced_group);
  auto c_pad = torch::constant_pad_nd(c, {0, 0, m, m});  // [B, H, L+2m, d]
  auto x = torch::empty({a.size(0), a.size(1), L, R}, a.options());
  auto a_col = a.unsqueeze(-1);  // [B, H, L, d, 1]
  for (int64_t s0 = 0; s0 < R; s0 += g) {
    const int64_t gg = std::min(g, R - s0);
    auto wg = w_band.narrow(1, s0, gg).transpose(1, 2).unsqueeze(1);  // [H|1, 1, d, gg]
    auto t = windows(c_pad, L, s0, gg) * wg;                           // [B, H, L, d, gg]
    x.narrow(-1, s0, gg).copy_(t.mul_(a_col).sum(-2));
  }
  return x;
}

// Gradients of band_scores given y = dL/dx [B, H, L, 2m+1]:
//   ga_it = sum_s y_is c_{i+r,t} w_st;  gw_st = sum_{b,i} y_is a_it c_{i+r,t}  (when gw is defined).
Tensor band_backward(const Tensor& y, const Tensor& a, const Tensor& c, const Tensor& w_band, int64_t m,
                     Tensor* gw, int64_t forced_group) {
  const int64_t L = a.size(2), R = 2 * m + 1, g = group_size(a, w_band, R, forced_group);
  auto c_pad = torch::constant_pad_nd(c, {0, 0, m, m});
  auto ga = torch::zeros_like(a);
  auto a_col = a.unsqueeze(-1);
  for (int64_t s0 = 0; s0 < R; s0 += g) {
    const int64_t gg = std::min(g, R - s0);
    auto t = windows(c_pad, L, s0, gg) * y.narrow(-1, s0, gg).unsqueeze(-2);  // [B, H, L, d, gg]: c_{i+r,t} y_is
    if (gw) {
      auto part = (t * a_col).sum(torch::IntArrayRef{0, 2}).transpose(1, 2);  // [H, gg, d]
      if (w_band.size(0) == 1) part = part.sum(0, /*keepdim=*/true);
      gw->narrow(1, s0, gg).add_(part);
    }
    ga.add_(t.mul_(w_band.narrow(1, s0, gg).transpose(1, 2).unsqueeze(1)).sum(-1));
  }
  return ga;
}

// Diagonal-major view of g: y[..., i, s] = g[..., i, i + s - m], 0 where i + s - m is outside.
Tensor to_diagonals(const Tensor& g, int64_t m) {
  const int64_t L = g.size(-1), R = 2 * m + 1;
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(g.device());
  auto j = torch::arange(L, opts).unsqueeze(1) + torch::arange(R, opts).unsqueeze(0) - m;  // [L, R]
  auto valid = (j >= 0) & (j < L);
  auto sizes = g.sizes().vec();
  sizes.back() = R;
  return g.gather(-1, j.clamp(0, L - 1).expand(sizes)) * valid.to(g.dtype());
}

// Regions where the gate is constant: r >= k uses row 2k, r <= -k uses row 0 (k = 0: the
// diagonal belongs to the first region only).
std::vector<std::pair<int64_t, Tensor>> clipped_regions(const Tensor& rel, int64_t clip) {
  auto plus = rel >= clip;
  return {{2 * clip, plus}, {0, (rel <= -clip) & ~plus}};
}

Tensor band_forward(const Tensor& q, const Tensor& k, const Tensor& w, int64_t clip, int64_t group) {
  const int64_t L = q.size(2);
  const auto band = band_for(clip, L);
  auto rel = relative_index(L, L, q.device()) - L;  // [L, L], j - i
  Tensor e;
  if (band.m >= 0) {
    auto x = band_scores(q, k, w.narrow(1, clip - band.m, 2 * band.m + 1), band.m, group);  // [B, H, L, 2m+1]
    e = gather_relative(x, (rel + band.m).clamp(0, 2 * band.m));                     // [B, H, L, L]
    if (band.clipped) e.mul_((rel.abs() <= band.m).to(e.dtype()));
  } else {
    e = torch::zeros({q.size(0), q.size(1), L, L}, q.options());
  }
  if (band.clipped) {
    for (const auto& [row, mask] : clipped_regions(rel, clip)) {
      auto wr = w.select(1, row).unsqueeze(1);  // [H|1, 1, d], fp32 under bf16: the product back in q's type for the GEMM
      e.add_(torch::matmul((q * wr).to(q.scalar_type()), k.transpose(-2, -1)).mul_(mask.to(e.dtype())));
    }
  }
  return e;
}

// Gradients {gq, gk, gw} of band_forward given g = dL/de [B, H, L, L].
std::array<Tensor, 3> band_grads(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& w, int64_t clip,
                                 int64_t group) {
  const int64_t L = q.size(2);
  const auto band = band_for(clip, L);
  Tensor gq = torch::zeros_like(q), gk = torch::zeros_like(k), gw = torch::zeros_like(w);
  if (band.m >= 0) {
    auto w_band = w.narrow(1, clip - band.m, 2 * band.m + 1);  // [H|1, 2m+1, d]
    auto gw_band = gw.narrow(1, clip - band.m, 2 * band.m + 1);
    gq.add_(band_backward(to_diagonals(g, band.m), q, k, w_band, band.m, &gw_band, group));
    // Keys see the band transposed: e_ij as a function of k_j runs over r' = i - j = -r.
    gk.add_(band_backward(to_diagonals(g.transpose(-2, -1), band.m), k, q, w_band.flip(1), band.m, nullptr, group));
  }
  if (band.clipped) {
    auto rel = relative_index(L, L, q.device()) - L;
    for (const auto& [row, mask] : clipped_regions(rel, clip)) {
      auto wr = w.select(1, row).unsqueeze(1);  // [H|1, 1, d]
      auto gm = g * mask.to(g.dtype());         // [B, H, L, L]
      auto gk_sum = torch::matmul(gm, k);        // [B, H, L, d]: sum_j g_ij k_j
      gq.add_(gk_sum * wr);
      gk.add_(torch::matmul(gm.transpose(-2, -1), (q * wr).to(gm.scalar_type())));
      auto part = (gk_sum * q).sum(torch::IntArrayRef{0, 2});  // [H, d]
      if (w.size(0) == 1) part = part.sum(0, /*keepdim=*/true);
      gw.select(1, row).add_(part);
    }
  }
  return {gq, gk, gw};
}

// ---- loop kernel (CPU) ----------------------------------------------------------------
// The gate of every offset r = j - i in [-(L-1), L-1] gets its own row (r + L - 1) of an
// expanded table, clipping already applied, so the loops never branch (offset_rows).

// The expanded table transposed so that offsets run along rows: [H|1, d, 2L-1].
Tensor expanded_table_t(const Tensor& w, const Tensor& rows) {
  return w.index_select(1, rows).transpose(1, 2).contiguous();
}

// The loops below are compiled twice on x86-64 with GCC 12+ (clang clones no templates), for
// x86-64-v3 (AVX2 + FMA: 8 floats a step) and for the baseline (SSE2: 4), and the loader
// picks the one the CPU runs.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define RPE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define RPE_CPU_CLONES
#endif

// y[j] += c x[j] z[j], j < n: every loop below is made of this one contiguous,
// reduction-free line, which the compiler vectorises.
template <class T> inline void axpy3(int64_t n, T c, const T* __restrict x, const T* __restrict z, T* __restrict y) {
  for (int64_t j = 0; j < n; ++j) y[j] += c * x[j] * z[j];
}

// Per (b, h), with tables transposed so that positions run along rows: kt [d, L], wxt [d, 2L-1]
// (so wxt[t] + L - 1 - i, read at j, is the gate of (i, j)):
//   forward  e[i, j]  = sum_t q_it kt[t, j] wxt[t, j-i+L-1]
//   gk^T[t, j] = sum_i g_ij q_it wxt[t, j-i+L-1];  gwx^T[t, j-i+L-1] += g_ij q_it kt[t, j]
//   gq^T[t, i] = sum_j g_ij k_jt wrt[t, i-j+L-1]    (wrt = wxt reversed along its rows)
template <class T> RPE_CPU_CLONES void loop_forward_one(const T* q, const T* kt, const T* wxt, T* e, int64_t L, int64_t d) {
  for (int64_t i = 0; i < L; ++i)
    for (int64_t t = 0; t < d; ++t) axpy3(L, q[i * d + t], kt + t * L, wxt + t * (2 * L - 1) + L - 1 - i, e + i * L);
}

// g, gt (= g^T) [L, L]; q, k [L, d]; kt [d, L]; wxt, wrt [d, 2L-1]; outputs gqt, gkt [d, L],
// gwxt [d, 2L-1], accumulated.
template <class T> struct BackwardArgs {
  const T *g, *gt, *q, *k, *kt, *wxt, *wrt;
  T *gqt, *gkt, *gwxt;
};

template <class T> RPE_CPU_CLONES void loop_backward_one(const BackwardArgs<T>& a, int64_t L, int64_t d) {
  const int64_t W = 2 * L - 1;
  for (int64_t i = 0; i < L; ++i)
    for (int64_t t = 0; t < d; ++t) {
      const T c = a.q[i * d + t];
      axpy3(L, c, a.g + i * L, a.wxt + t * W + L - 1 - i, a.gkt + t * L);
      axpy3(L, c, a.g + i * L, a.kt + t * L, a.gwxt + t * W + L - 1 - i);
    }
  for (int64_t j = 0; j < L; ++j)
    for (int64_t t = 0; t < d; ++t) axpy3(L, a.k[j * d + t], a.gt + j * L, a.wrt + t * W + L - 1 - j, a.gqt + t * L);
}


template <class T> Tensor loop_forward_typed(const Tensor& q, const Tensor& k, const Tensor& w, int64_t clip) {
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), d = q.size(3), Hw = w.size(0);
  auto qc = q.contiguous();                                            // [B, H, L, d]
  auto kt = k.transpose(-2, -1).contiguous();                          // [B, H, d, L]
  auto wxt = expanded_table_t(w, offset_rows(L, clip, w.device()));  // [H|1, d, 2L-1]
  auto e = torch::zeros({B, H, L, L}, qc.options());
  const T *qp = qc.data_ptr<T>(), *kp = kt.data_ptr<T>(), *wp = wxt.data_ptr<T>();
  T* ep = e.data_ptr<T>();
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh)
      loop_forward_one<T>(qp + bh * L * d, kp + bh * d * L, wp + (bh % H) % Hw * d * (2 * L - 1), ep + bh * L * L, L, d);
  });
  return e;
}

template <class T>
std::array<Tensor, 3> loop_grads_typed(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& w, int64_t clip) {
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), d = q.size(3), Hw = w.size(0), W = 2 * L - 1;
  auto gc = g.contiguous(), gt = g.transpose(-2, -1).contiguous();     // [B, H, L, L]
  auto qc = q.contiguous(), kc = k.contiguous();                       // [B, H, L, d]
  auto kt = kc.transpose(-2, -1).contiguous();                         // [B, H, d, L]
  auto rows = offset_rows(L, clip, w.device());
  auto wxt = expanded_table_t(w, rows);  // [H|1, d, 2L-1]
  auto wrt = wxt.flip(-1).contiguous();
  auto gqt = torch::zeros({B, H, d, L}, qc.options()), gkt = torch::zeros_like(gqt);
  auto gwxt = torch::zeros({H, d, W}, qc.options());  // per head: threads over heads never share a row
  const int64_t LL = L * L, Ld = L * d, dW = d * W;
  at::parallel_for(0, H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h)
      for (int64_t b = 0; b < B; ++b) {
        const int64_t bh = b * H + h;
        const BackwardArgs<T> args{gc.data_ptr<T>() + bh * LL,         gt.data_ptr<T>() + bh * LL,
                                   qc.data_ptr<T>() + bh * Ld,         kc.data_ptr<T>() + bh * Ld,
                                   kt.data_ptr<T>() + bh * Ld,         wxt.data_ptr<T>() + h % Hw * dW,
                                   wrt.data_ptr<T>() + h % Hw * dW,    gqt.data_ptr<T>() + bh * Ld,
                                   gkt.data_ptr<T>() + bh * Ld,        gwxt.data_ptr<T>() + h * dW};
        loop_backward_one<T>(args, L, d);
      }
  });
  auto gwx = gwxt.transpose(1, 2);  // [H, 2L-1, d]
  if (Hw == 1) gwx = gwx.sum(0, /*keepdim=*/true);
  return {gqt.transpose(-2, -1), gkt.transpose(-2, -1), torch::zeros_like(w).index_add_(1, rows, gwx)};
}

Tensor loop_forward(const Tensor& q, const Tensor& k, const Tensor& w, int64_t clip) {
  const auto dt = compute_dtype(q);
  auto e = dt == torch::kDouble ? loop_forward_typed<double>(q, k, w, clip)
                                : loop_forward_typed<float>(q.to(dt), k.to(dt), w.to(dt), clip);
  return e.to(q.scalar_type());
}

std::array<Tensor, 3> loop_grads(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& w, int64_t clip) {
  const auto dt = compute_dtype(q);
  auto grads = dt == torch::kDouble ? loop_grads_typed<double>(g, q, k, w, clip)
                                    : loop_grads_typed<float>(g.to(dt), q.to(dt), k.to(dt), w.to(dt), clip);
  return {grads[0].to(q.scalar_type()), grads[1].to(k.scalar_type()), grads[2].to(w.scalar_type())};
}

struct M3Scores : public torch::autograd::Function<M3Scores> {
  // q, k: [B, H, L, d]; w: [H|1, 2k+1, d]; kernel: loop, band or cuda (never automatic).
  // Returns unscaled scores [B, H, L, L].
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& w,
                        int64_t clip, int64_t kernel, int64_t group) {
    ctx->save_for_backward({q, k, w});
    ctx->saved_data["clip"] = clip;
    ctx->saved_data["kernel"] = kernel;
    ctx->saved_data["group"] = group;
    switch (static_cast<M3Kernel>(kernel)) {
      case M3Kernel::loop: return loop_forward(q, k, w, clip);
      case M3Kernel::cuda: return m3_cuda_forward(q, k, w, clip);
      default: return band_forward(q, k, w, clip, group);
    }
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto s = ctx->get_saved_variables();
    const int64_t clip = ctx->saved_data["clip"].toInt(), group = ctx->saved_data["group"].toInt();
    const auto kernel = static_cast<M3Kernel>(ctx->saved_data["kernel"].toInt());
    auto [gq, gk, gw] = kernel == M3Kernel::loop   ? loop_grads(grads[0], s[0], s[1], s[2], clip)
                        : kernel == M3Kernel::cuda ? m3_cuda_grads(grads[0], s[0], s[1], s[2], clip)
                                                   : band_grads(grads[0], s[0], s[1], s[2], clip, group);
    return {gq, gk, gw, Tensor(), Tensor(), Tensor()};
  }
};

class M3Term : public PositionTermImpl {
 public:
  M3Term(int64_t table_heads, int64_t k, int64_t d, double init_std) : k_(k) {
    table_ = register_parameter("w", 1.0 + torch::randn({table_heads, 2 * k + 1, d}) * init_std);  // [H|1, 2k+1, d]
  }

  torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k) override {
    // The fp32 gate: it starts at 1 + N(0, 0.02), and all of m3's position signal is that
    // deviation, which bf16's spacing near 1 (2^-7) rounds to a few dozen values. The kernels
    // compute in fp32 (the band multiplies in the promoted type) and round the scores once.
    return m3_scores(q, k, table_, k_);  // [B, H, L, L]
  }

  bool fusable() const override { return false; }  // multiplicative gate: not a float mask
  torch::Tensor position_weights() override { return table_; }

 private:
  int64_t k_;
  torch::Tensor table_;
};

}  // namespace

// GCC 13 warns falsely (-Warray-bounds) inside LibTorch's autograd::Function::apply, inlined here
// (its std::vector<bool>::reserve); GCC 12 and Clang do not.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif
torch::Tensor m3_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& w, int64_t clip,
                        M3Kernel kernel, int64_t band_group) {
  // The kernels index q, k and the table by these shapes (the CUDA one without bounds checks: a
  // mismatch there would be an illegal address that ends the process's CUDA context).
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes(), "m3: q and k must both be [B, H, L, d], got ", q.sizes(), " and ",
              k.sizes());
  TORCH_CHECK(clip >= 0 && w.dim() == 3 && w.size(1) == 2 * clip + 1 && w.size(2) == q.size(3) &&
                  (w.size(0) == 1 || w.size(0) == q.size(1)),
              "m3: the table must be [1 or H, 2k+1, d] = [1 or ", q.size(1), ", ", 2 * clip + 1, ", ", q.size(3),
              "], got ", w.sizes());
  TORCH_CHECK(k.device() == q.device() && w.device() == q.device(), "m3: q, k and the table must be on one device, got ",
              q.device(), ", ", k.device(), " and ", w.device());
  TORCH_CHECK(kernel != M3Kernel::loop || q.is_cpu(), "m3's loop kernel runs on the CPU only, not on ", q.device());
  TORCH_CHECK(kernel != M3Kernel::cuda || (q.is_cuda() && m3_cuda_kernel_built()),
              "m3's CUDA kernel runs on CUDA devices, in builds that have it (", q.device(), ")");
  if (kernel == M3Kernel::automatic)
    kernel = q.is_cpu() ? M3Kernel::loop : m3_cuda_usable(q.device()) ? M3Kernel::cuda : M3Kernel::band;
  return M3Scores::apply(q, k, w, clip, static_cast<int64_t>(kernel), band_group);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

std::shared_ptr<PositionMethodImpl> make_position_method_m3(const ModelOptions& o) {
  return std::make_shared<ClippedTableMethod<M3Term>>(o, "m3");
}

}  // namespace rpe

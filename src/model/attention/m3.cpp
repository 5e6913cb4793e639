// m3: Huang et al. 2020, method 3 (eqs. 14–15): a relative vector gates q . k elementwise,
//   e_ij = sum_t q_it k_jt w_{clip(j-i,k), t} / sqrt(d)
// w: (2k+1) x d per layer and head (share_across_heads: per layer), k = n - 1 by default.
// Initialised at 1 + N(0, init_std): a zero gate would kill every score, 1 starts the
// method as plain attention.
//
// Memory. Written as in eq. 15 the trilinear product is an [B, H, L, L, d] tensor (the
// paper fitted 2 sequences per GPU against 20 for the other methods). Here, as a custom
// autograd function that saves only q, k, w and recomputes in backward:
//   * diagonals r = j - i with |r| >= k (clipped) share one gate w_{+-k}: there the scores
//     are plain matmuls (q * w_{+-k}) k^T under a mask;
//   * the band |r| < k (all of it when unclipped) is computed by groups of diagonals: for
//     slots s..s+g the window k_{i+r} is a strided view ([B, H, L, d, g], no copy), so the
//     live temporaries are O(B H L d g) with g ~ L / 2d, about half an [L, L] score tensor;
//     the band scores [B, H, L, 2m+1] are then gathered into [B, H, L, L].
// Memory is thus O(B H L^2) like plain attention; no [L, L, d] tensor exists at any time.
#include "model/attention/clipped_table_method.h"

namespace rpe {
namespace {

using torch::Tensor;

// Band geometry at length L: half-width m (slots s = r + m for r in [-m, m]) and whether
// the clipped regions |r| >= k exist.
struct Band {
  int64_t m;
  bool clipped;
};
Band band_for(int64_t k, int64_t L) { return k >= L ? Band{L - 1, false} : Band{k - 1, true}; }

// Diagonals per group: keeps B H L d g near half of B H L L.
int64_t group_size(int64_t L, int64_t d, int64_t slots) {
  return std::clamp<int64_t>(L / (2 * d), 1, std::max<int64_t>(slots, 1));
}

// [B, H, L, d, g] view: win[..., i, t, s'] = c[i + s0 + s' - m, t] (0 outside), c_pad = c
// padded with m zero rows on both ends of the length axis.
Tensor windows(const Tensor& c_pad, int64_t L, int64_t s0, int64_t g) {
  return c_pad.narrow(2, s0, L + g - 1).unfold(2, g, 1);
}

// x[..., i, s] = sum_t a_it c_{i+r, t} w_{s, t}, r = s - m: band scores in diagonal-major
// layout [B, H, L, 2m+1]. a, c: [B, H, L, d]; w_band: [H|1, 2m+1, d].
Tensor band_scores(const Tensor& a, const Tensor& c, const Tensor& w_band, int64_t m) {
  const int64_t L = a.size(2), R = 2 * m + 1, g = group_size(L, a.size(3), R);
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
                     Tensor* gw) {
  const int64_t L = a.size(2), R = 2 * m + 1, g = group_size(L, a.size(3), R);
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

struct M3Scores : public torch::autograd::Function<M3Scores> {
  // q, k: [B, H, L, d]; w: [H|1, 2k+1, d]. Returns unscaled scores [B, H, L, L].
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& w,
                        int64_t clip) {
    ctx->save_for_backward({q, k, w});
    ctx->saved_data["clip"] = clip;
    const int64_t L = q.size(2);
    const auto band = band_for(clip, L);
    auto rel = relative_index(L, L, q.device()) - L;  // [L, L], j - i
    Tensor e;
    if (band.m >= 0) {
      auto x = band_scores(q, k, w.narrow(1, clip - band.m, 2 * band.m + 1), band.m);  // [B, H, L, 2m+1]
      e = gather_relative(x, (rel + band.m).clamp(0, 2 * band.m));                     // [B, H, L, L]
      if (band.clipped) e.mul_((rel.abs() <= band.m).to(e.dtype()));
    } else {
      e = torch::zeros({q.size(0), q.size(1), L, L}, q.options());
    }
    if (band.clipped) {
      for (const auto& [row, mask] : clipped_regions(rel, clip)) {
        auto wr = w.select(1, row).unsqueeze(1);  // [H|1, 1, d]
        e.add_(torch::matmul(q * wr, k.transpose(-2, -1)).mul_(mask.to(e.dtype())));
      }
    }
    return e;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &w = saved[2];
    const int64_t clip = ctx->saved_data["clip"].toInt(), L = q.size(2);
    const auto band = band_for(clip, L);
    auto g = grads[0];  // [B, H, L, L]
    Tensor gq = torch::zeros_like(q), gk = torch::zeros_like(k), gw = torch::zeros_like(w);
    if (band.m >= 0) {
      auto w_band = w.narrow(1, clip - band.m, 2 * band.m + 1);  // [H|1, 2m+1, d]
      auto gw_band = gw.narrow(1, clip - band.m, 2 * band.m + 1);
      gq.add_(band_backward(to_diagonals(g, band.m), q, k, w_band, band.m, &gw_band));
      // Keys see the band transposed: e_ij as a function of k_j runs over r' = i - j = -r.
      gk.add_(band_backward(to_diagonals(g.transpose(-2, -1), band.m), k, q, w_band.flip(1), band.m, nullptr));
    }
    if (band.clipped) {
      auto rel = relative_index(L, L, q.device()) - L;
      for (const auto& [row, mask] : clipped_regions(rel, clip)) {
        auto wr = w.select(1, row).unsqueeze(1);  // [H|1, 1, d]
        auto gm = g * mask.to(g.dtype());         // [B, H, L, L]
        auto gk_sum = torch::matmul(gm, k);        // [B, H, L, d]: sum_j g_ij k_j
        gq.add_(gk_sum * wr);
        gk.add_(torch::matmul(gm.transpose(-2, -1), q * wr));
        auto part = (gk_sum * q).sum(torch::IntArrayRef{0, 2});  // [H, d]
        if (w.size(0) == 1) part = part.sum(0, /*keepdim=*/true);
        gw.select(1, row).add_(part);
      }
    }
    return {gq, gk, gw, Tensor()};
  }

  // Regions where the gate is constant: r >= k uses row 2k, r <= -k uses row 0 (k = 0:
  // the diagonal belongs to the first region only).
  static std::vector<std::pair<int64_t, Tensor>> clipped_regions(const Tensor& rel, int64_t clip) {
    auto plus = rel >= clip;
    return {{2 * clip, plus}, {0, (rel <= -clip) & ~plus}};
  }
};

class M3Term : public PositionTermImpl {
 public:
  M3Term(int64_t table_heads, int64_t k, int64_t d, double init_std) : k_(k) {
    table_ = register_parameter("w", 1.0 + torch::randn({table_heads, 2 * k + 1, d}) * init_std);  // [H|1, 2k+1, d]
  }

  torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k) override {
    return M3Scores::apply(q, k, table_.to(q.dtype()), k_);  // [B, H, L, L]
  }

  bool fusable() const override { return false; }  // multiplicative gate: not a float mask
  torch::Tensor position_weights() override { return table_; }

 private:
  int64_t k_;
  torch::Tensor table_;
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_m3(const ModelOptions& o) {
  return std::make_shared<ClippedTableMethod<M3Term>>(o, "m3");
}

}  // namespace rpe

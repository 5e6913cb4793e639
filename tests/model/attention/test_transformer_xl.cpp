// transformer_xl (Dai et al. 2019; the paper's eq. 10) against a naive loop over (i, j):
//   e_ij = ((q_i + u) . k_j + (q_i + v) . (R_{i-j} W^R)) / sqrt(d)
// R written out in the test (eqs. 1–2 at position i - j), unclipped or clipped at k.
#include <cmath>

#include "reference.h"

namespace rpe::test {
namespace {
// PE(p)_{2t} = sin(p / 10000^(2t/D)), PE(p)_{2t+1} = cos(...): [D] fp64.
torch::Tensor sinusoid_vector(double p, int64_t D) {
  auto r = torch::zeros({D}, torch::kFloat64);
  for (int64_t t = 0; 2 * t < D; ++t) {
    const double angle = p / std::pow(10000.0, 2.0 * static_cast<double>(t) / static_cast<double>(D));
    r[2 * t] = std::sin(angle);
    if (2 * t + 1 < D) r[2 * t + 1] = std::cos(angle);
  }
  return r;
}
}  // namespace

TEST(TransformerXl, MatchesNaiveEquation) {
  for (bool uv : {true, false})
    for (int64_t k : {0, 1, 3, 40}) {
      auto o = tiny_options("transformer_xl", k);
      o.attention.xl_uv_bias = uv;
      auto layer = make_layer(o);
      auto wr = layer.param("r_proj");  // [D, D]
      EXPECT_EQ(layer.attention->position->named_parameters().contains("u"), uv);
      torch::Tensor u, v;
      if (uv) u = layer.param("u").view({2, 4}), v = layer.param("v").view({2, 4});  // [H, d]
      RefSpec spec;
      spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
        const int64_t delta = k > 0 ? clip(i - j, k) : i - j;
        auto p = torch::matmul(sinusoid_vector(static_cast<double>(delta), 8), wr).view({2, 4});  // [H, d]
        auto qi = t.q.select(2, i), kj = t.k.select(2, j);
        auto qu = uv ? qi + u : qi, qv = uv ? qi + v : qi;
        return ((qu * kj).sum(-1) + (qv * p).sum(-1)) / 2.0;
      };
      for (int64_t L : kLengths)
        expect_matches_reference(layer, L, spec,
                                 "xl uv=" + std::to_string(uv) + " k=" + std::to_string(k) + " L=" + std::to_string(L));
    }
}

}  // namespace rpe::test

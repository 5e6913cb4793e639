// deberta (He et al. 2020) against a naive loop over (i, j):
//   e_ij = (q_i . k_j + q_i . P^K_{clip(i-j,k)} + k_j . P^Q_{clip(j-i,k)}) / sqrt(3d)
// P^K = P W^{K,r}, P^Q = P W^{Q,r}, split into heads; P shared by layers.
#include <cmath>

#include "reference.h"

namespace rpe::test {

TEST(Deberta, MatchesNaiveEquation) {
  for (int64_t k : kClips) {
    auto layer = make_layer(tiny_options("deberta", k));
    const int64_t kk = k > 0 ? k : 15;
    auto p = layer.method_param("rel_embeddings");  // [2k+1, D]
    EXPECT_EQ(p.sizes(), torch::IntArrayRef({2 * kk + 1, 8}));
    auto wk = layer.param("pos_key_proj"), wq = layer.param("pos_query_proj");  // [D, D]
    RefSpec spec;
    spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
      auto pk = torch::matmul(p[clip(i - j, kk) + kk], wk).view({2, 4});  // [H, d]
      auto pq = torch::matmul(p[clip(j - i, kk) + kk], wq).view({2, 4});
      auto qi = t.q.select(2, i), kj = t.k.select(2, j);
      return ((qi * kj).sum(-1) + (qi * pk).sum(-1) + (kj * pq).sum(-1)) / std::sqrt(12.0);
    };
    for (int64_t L : kLengths)
      expect_matches_reference(layer, L, spec, "deberta k=" + std::to_string(k) + " L=" + std::to_string(L));
  }
}

}  // namespace rpe::test

// m2 (Huang et al. 2020, eq. 13) against a naive loop over (i, j):
//   e_ij = (q_i . k_j) * w_{clip(j-i,k)} / sqrt(d)
#include "reference.h"

namespace rpe::test {

TEST(M2, MatchesNaiveEquation) {
  for (int64_t k : kClips)
    for (bool shared : {false, true}) {
      auto layer = make_layer(tiny_options("m2", k, shared));
      const int64_t kk = k > 0 ? k : 15;
      auto w = layer.param("w");  // [H|1, 2k+1]
      EXPECT_EQ(w.sizes(), torch::IntArrayRef({shared ? 1 : 2, 2 * kk + 1}));
      RefSpec spec;
      spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
        auto a = w.select(1, clip(j - i, kk) + kk);  // [H|1]
        return (t.q.select(2, i) * t.k.select(2, j)).sum(-1) * a / 2.0;
      };
      for (int64_t L : kLengths)
        expect_matches_reference(layer, L, spec, "m2 k=" + std::to_string(k) + " shared=" + std::to_string(shared) +
                                                     " L=" + std::to_string(L));
    }
}

}  // namespace rpe::test

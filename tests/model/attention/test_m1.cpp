// m1 (Huang et al. 2020, eqs. 11–12) against a naive loop over (i, j):
//   e_ij = (q_i . k_j) * w_{min(|j-i|, k)} / sqrt(d)
#include "reference.h"

namespace rpe::test {

TEST(M1, MatchesNaiveEquation) {
  for (int64_t k : kClips)
    for (bool shared : {false, true}) {
      auto layer = make_layer(tiny_options("m1", k, shared));
      const int64_t kk = k > 0 ? k : 15;
      auto w = layer.param("w");  // [H|1, k+1]
      EXPECT_EQ(w.sizes(), torch::IntArrayRef({shared ? 1 : 2, kk + 1}));
      RefSpec spec;
      spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
        auto a = w.select(1, std::min(std::abs(j - i), kk));  // [H|1]
        return (t.q.select(2, i) * t.k.select(2, j)).sum(-1) * a / 2.0;
      };
      for (int64_t L : kLengths)
        expect_matches_reference(layer, L, spec, "m1 k=" + std::to_string(k) + " shared=" + std::to_string(shared) +
                                                     " L=" + std::to_string(L));
    }
}

TEST(M1, ScalarsStartAtOne) {
  auto fresh = make_position_method(tiny_options("m1"))->make_layer_term(0);
  EXPECT_TRUE(torch::equal(fresh->named_parameters()["w"], torch::ones({2, 16})));
}

}  // namespace rpe::test

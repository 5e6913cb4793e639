// m3 (Huang et al. 2020, eqs. 14–15) against a naive loop over (i, j):
//   e_ij = sum_t q_it k_jt w_{clip(j-i,k), t} / sqrt(d)
// The module uses a band decomposition and a custom backward; the reference is the
// equation itself with autograd, so both the forward and the hand-written backward are
// checked. Also: the gate starts near 1.
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
        expect_matches_reference(layer, L, spec, "m3 k=" + std::to_string(k) + " shared=" + std::to_string(shared) +
                                                     " L=" + std::to_string(L));
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

TEST(M3, GateStartsNearOne) {
  torch::manual_seed(0);
  auto term = make_position_method(tiny_options("m3"))->make_layer_term(0);
  auto w = term->named_parameters()["w"];
  EXPECT_NEAR(w.mean().item<double>(), 1.0, 0.01);
  EXPECT_LT((w - 1.0).abs().max().item<double>(), 0.2);
}

}  // namespace rpe::test

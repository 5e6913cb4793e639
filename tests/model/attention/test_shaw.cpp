// shaw (Shaw et al. 2018; the paper's eqs. 7–9) against a naive loop over (i, j):
//   e_ij = q_i . (k_j + w^K_{clip(j-i,k)}) / sqrt(d),  z_i = sum_j a_ij (v_j + w^V_{clip(j-i,k)})
#include "reference.h"

namespace rpe::test {

TEST(Shaw, MatchesNaiveEquation) {
  for (bool values : {false, true})
    for (int64_t k : kClips)
      for (bool shared : {false, true}) {
        auto o = tiny_options("shaw", k, shared);
        o.attention.shaw_values = values;
        auto layer = make_layer(o);
        const int64_t kk = k > 0 ? k : 15;
        auto wk = layer.param("key_table");  // [H|1, 2k+1, d]
        EXPECT_EQ(wk.sizes(), torch::IntArrayRef({shared ? 1 : 2, 2 * kk + 1, 4}));
        EXPECT_EQ(layer.attention->position->named_parameters().contains("value_table"), values);
        EXPECT_EQ(layer.attention->position->fusable(), !values);
        RefSpec spec;
        spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
          auto a = wk.select(1, clip(j - i, kk) + kk);                                 // [H|1, d]
          return (t.q.select(2, i) * (t.k.select(2, j) + a)).sum(-1) / 2.0;           // sqrt(d) = 2
        };
        if (values) {
          auto wv = layer.param("value_table");
          spec.value = [&, wv](int64_t i, int64_t j) { return wv.select(1, clip(j - i, kk) + kk); };  // [H|1, d]
        }
        for (int64_t L : kLengths)
          expect_matches_reference(layer, L, spec,
                                   "shaw values=" + std::to_string(values) + " k=" + std::to_string(k) +
                                       " shared=" + std::to_string(shared) + " L=" + std::to_string(L));
      }
}

}  // namespace rpe::test

// m4 (Huang et al. 2020, eq. 16) against a naive loop over (i, j):
//   e_ij = (q_i . k_j + q_i . w_{clip(j-i,k)} + k_j . w_{clip(j-i,k)}) / sqrt(d)
// plus the hand-computed relative index of the paper's Figure 3 (7 x 7, k = 3).
#include "reference.h"

namespace rpe::test {

TEST(M4, MatchesNaiveEquation) {
  for (int64_t k : kClips)
    for (bool shared : {false, true}) {
      auto layer = make_layer(tiny_options("m4", k, shared));
      const int64_t kk = k > 0 ? k : 15;
      auto w = layer.param("w");  // [H|1, 2k+1, d]
      EXPECT_EQ(w.sizes(), torch::IntArrayRef({shared ? 1 : 2, 2 * kk + 1, 4}));
      RefSpec spec;
      spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
        auto qi = t.q.select(2, i), kj = t.k.select(2, j);  // [B, H, d]
        auto a = w.select(1, clip(j - i, kk) + kk);          // [H|1, d]
        return ((qi * kj).sum(-1) + (qi * a).sum(-1) + (kj * a).sum(-1)) / 2.0;  // sqrt(d) = 2
      };
      for (int64_t L : kLengths)
        expect_matches_reference(layer, L, spec, "m4 k=" + std::to_string(k) + " shared=" + std::to_string(shared) +
                                                     " L=" + std::to_string(L));
    }
}

TEST(M4, RelativeIndexOfFigure3) {
  // clip(j - i, 3) + 3 for i, j in [0, 7), written out by hand.
  const int64_t expected[7][7] = {{3, 4, 5, 6, 6, 6, 6}, {2, 3, 4, 5, 6, 6, 6}, {1, 2, 3, 4, 5, 6, 6},
                                  {0, 1, 2, 3, 4, 5, 6}, {0, 0, 1, 2, 3, 4, 5}, {0, 0, 0, 1, 2, 3, 4},
                                  {0, 0, 0, 0, 1, 2, 3}};
  auto idx = relative_index(7, 3, torch::kCPU);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 7; ++j) EXPECT_EQ(idx[i][j].item<int64_t>(), expected[i][j]) << i << "," << j;
}

TEST(M4, NegativeClipIsAUserError) {
  try {
    make_position_method(tiny_options("m4", -2));
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.attention.max_relative"), std::string::npos) << e.what();
  }
}

}  // namespace rpe::test

// alibi (Press et al. 2021, symmetric): e_ij = q_i . k_j / sqrt(d) - m_h |j - i|, against a
// naive loop with slopes written out by hand; slopes for 2, 8 and 12 heads by hand.
#include <cmath>

#include "reference.h"
#include "util/cpu_memory.h"

namespace rpe::test {

TEST(Alibi, SlopesByHand) {
  auto expect = [](int64_t heads, const std::vector<double>& slopes) {
    auto got = alibi_slopes(heads);
    ASSERT_EQ(got.size(0), static_cast<int64_t>(slopes.size()));
    for (size_t h = 0; h < slopes.size(); ++h) EXPECT_DOUBLE_EQ(got[h].item<double>(), slopes[h]) << heads << " heads";
  };
  expect(2, {1.0 / 16, 1.0 / 256});
  expect(8, {1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256});
  // 12 heads: the 8 slopes above, then every other slope of 16 heads: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  expect(12, {1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256, std::pow(2.0, -0.5),
              std::pow(2.0, -1.5), std::pow(2.0, -2.5), std::pow(2.0, -3.5)});
}

TEST(Alibi, MatchesNaiveEquation) {
  auto layer = make_layer(tiny_options("alibi"));
  EXPECT_TRUE(layer.attention->position->parameters().empty());
  const double m[2] = {1.0 / 16, 1.0 / 256};  // H = 2
  RefSpec spec;
  spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
    auto slope = torch::tensor({m[0], m[1]}, torch::kFloat64);  // [H]
    return (t.q.select(2, i) * t.k.select(2, j)).sum(-1) / 2.0 - slope * static_cast<double>(std::abs(j - i));
  };
  for (int64_t L : kLengths) expect_matches_reference(layer, L, spec, "alibi L=" + std::to_string(L));
}

// rpe-train flushes denormals on the CPU (util/cpu_memory.h): ALiBi's far keys then get
// probability exactly 0 instead of denormal values that Intel cores process ~100x slower.
// Each ctest case is its own process, so the switch reaches no other test.
TEST(Alibi, FarKeysGetZeroNotDenormalProbabilityOnceFlushed) {
  const int64_t L = 512;
  auto pos = torch::arange(L, torch::kFloat);
  auto logits = -0.5f * (pos.unsqueeze(0) - pos.unsqueeze(1)).abs();  // [L, L], head slope 1/2
  auto is_denormal = [](const torch::Tensor& p) {
    return p.ne(0).logical_and(p.abs().lt(std::numeric_limits<float>::min())).any().item<bool>();
  };
  const auto before = torch::softmax(logits, -1);
  EXPECT_TRUE(is_denormal(before));  // exp(-0.5 * d) < 1.2e-38 for d > 174
  if (!flush_denormals()) GTEST_SKIP() << "this CPU cannot flush denormals";
  const auto p = torch::softmax(logits, -1);
  EXPECT_FALSE(is_denormal(p));
  EXPECT_EQ(p[0][L - 1].item<float>(), 0.0f);
  const auto normal = before.abs().ge(std::numeric_limits<float>::min());  // unaffected values
  EXPECT_TRUE(torch::equal(p.masked_select(normal), before.masked_select(normal)));
  EXPECT_NEAR(p.sum(-1).mean().item<float>(), 1.0f, 1e-6);  // rows still sum to one
}

}  // namespace rpe::test

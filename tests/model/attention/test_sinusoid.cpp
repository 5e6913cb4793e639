// sinusoid (Vaswani et al. 2017; eqs. 1–2): the table against hand values and a loop,
// attention on x + PE against the naive loop, lengths beyond max_position.
#include <cmath>

#include "reference.h"

namespace rpe::test {
namespace {
torch::Tensor naive_table(int64_t L, int64_t D) {
  auto pe = torch::zeros({L, D}, torch::kFloat64);
  for (int64_t p = 0; p < L; ++p)
    for (int64_t t = 0; 2 * t < D; ++t) {
      const double angle = p / std::pow(10000.0, 2.0 * t / static_cast<double>(D));
      pe[p][2 * t] = std::sin(angle);
      pe[p][2 * t + 1] = std::cos(angle);
    }
  return pe;
}
}  // namespace

TEST(Sinusoid, TableByHand) {
  auto method = make_position_method(tiny_options("sinusoid"));
  EXPECT_TRUE(method->parameters().empty());
  auto pe = method->input_embeddings(3).to(torch::kFloat64);  // [3, 8]
  EXPECT_NEAR(pe[0][0].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(pe[0][1].item<double>(), 1.0, 1e-7);
  EXPECT_NEAR(pe[1][0].item<double>(), std::sin(1.0), 1e-7);
  EXPECT_NEAR(pe[2][1].item<double>(), std::cos(2.0), 1e-7);
  EXPECT_NEAR(pe[2][2].item<double>(), std::sin(2.0 / 10.0), 1e-7);  // 10000^(2/8) = 10
  EXPECT_NEAR(pe[1][7].item<double>(), std::cos(1.0 / 1000.0), 1e-7);
  // Beyond max_position (16) the table keeps going.
  auto long_pe = method->input_embeddings(40).to(torch::kFloat64);
  EXPECT_LT((long_pe - naive_table(40, 8)).abs().max().item<double>(), 1e-6);
}

TEST(Sinusoid, MatchesNaiveEquation) {
  auto layer = make_layer(tiny_options("sinusoid"));
  for (int64_t L : kLengths) {
    RefSpec spec;
    spec.positions = naive_table(L, 8);
    spec.score = [&](const Qkv& t, int64_t i, int64_t j) { return (t.q.select(2, i) * t.k.select(2, j)).sum(-1) / 2.0; };
    expect_matches_reference(layer, L, spec, "sinusoid L=" + std::to_string(L));
  }
}

}  // namespace rpe::test

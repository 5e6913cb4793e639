// rope (Su et al. 2021) against a naive loop: each pair (x_{2t}, x_{2t+1}) of q_i (k_j) is
// rotated by i * theta_t (j * theta_t), theta_t = base^(-2t/d), then e_ij = q'_i . k'_j / sqrt(d).
#include <cmath>

#include "reference.h"

namespace rpe::test {
namespace {
// x: [B, H, d] at position p; rotated pair by pair.
torch::Tensor rotate(const torch::Tensor& x, int64_t p, double base) {
  const int64_t d = x.size(-1);
  std::vector<torch::Tensor> parts;
  for (int64_t t = 0; t < d / 2; ++t) {
    const double angle = static_cast<double>(p) * std::pow(base, -2.0 * static_cast<double>(t) / static_cast<double>(d));
    auto x0 = x.select(-1, 2 * t), x1 = x.select(-1, 2 * t + 1);
    parts.push_back(x0 * std::cos(angle) - x1 * std::sin(angle));
    parts.push_back(x0 * std::sin(angle) + x1 * std::cos(angle));
  }
  return torch::stack(parts, -1);
}
}  // namespace

TEST(Rope, MatchesNaiveEquation) {
  for (double base : {10000.0, 7.0}) {
    auto o = tiny_options("rope");
    o.attention.rope_base = base;
    auto layer = make_layer(o);
    RefSpec spec;
    spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
      return (rotate(t.q.select(2, i), i, base) * rotate(t.k.select(2, j), j, base)).sum(-1) / 2.0;
    };
    for (int64_t L : kLengths)
      expect_matches_reference(layer, L, spec, "rope base=" + std::to_string(base) + " L=" + std::to_string(L));
  }
}

TEST(Rope, OddHeadSizeAndBadBaseAreUserErrors) {
  auto o = tiny_options("rope");
  o.hidden = 6;  // d = 3
  EXPECT_THROW(make_position_method(o), UserError);
  o = tiny_options("rope");
  o.attention.rope_base = 0.5;
  EXPECT_THROW(make_position_method(o), UserError);
}

// The build log names the base as configured (a fractional one was printed truncated).
TEST(Rope, DescriptionNamesTheBase) {
  auto o = tiny_options("rope");
  EXPECT_EQ(make_position_method(o)->describe(), "rope (base 10000, no parameters)");
  o.attention.rope_base = 7.5;
  EXPECT_EQ(make_position_method(o)->describe(), "rope (base 7.5, no parameters)");
}

}  // namespace rpe::test

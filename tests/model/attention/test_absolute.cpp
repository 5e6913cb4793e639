// absolute (BERT; the paper's eq. 6): x_i = t_i + p_i with a learned table, plain q . k,
// against the naive loop; refuses lengths beyond max_position naming both lengths.
#include "reference.h"

namespace rpe::test {

TEST(Absolute, MatchesNaiveEquation) {
  auto layer = make_layer(tiny_options("absolute"));
  auto table = layer.method_param("absolute");  // [n, D]
  EXPECT_EQ(table.sizes(), torch::IntArrayRef({16, 8}));
  for (int64_t L : kLengths) {
    if (L > 16) continue;
    RefSpec spec;
    spec.positions = table.narrow(0, 0, L);
    spec.score = [&](const Qkv& t, int64_t i, int64_t j) { return (t.q.select(2, i) * t.k.select(2, j)).sum(-1) / 2.0; };
    expect_matches_reference(layer, L, spec, "absolute L=" + std::to_string(L));
  }
}

TEST(Absolute, RefusesLengthBeyondTableNamingBoth) {
  auto method = make_position_method(tiny_options("absolute"));
  try {
    method->input_embeddings(33);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("33"), std::string::npos) << msg;
    EXPECT_NE(msg.find("16"), std::string::npos) << msg;
  }
}

}  // namespace rpe::test

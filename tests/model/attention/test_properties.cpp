// Properties every position method must have, checked for all registered methods:
//   * appending padding leaves the real tokens' outputs unchanged, padded keys get p = 0;
//   * relative methods: the same tokens at shifted positions give the same outputs;
//   * relative methods accept L > max_position (distances clip to the table's edge).
#include "reference.h"

namespace rpe::test {
namespace {

// Methods whose scores depend on j - i only (no absolute input positions).
bool is_relative(const std::string& name) { return name != "absolute" && name != "sinusoid"; }

// Layer forward with the method's input positions: x [B, L, D] -> [B, L, D].
torch::Tensor run(Layer& layer, const torch::Tensor& x, const torch::Tensor& pad) {
  auto pos = layer.method->input_embeddings(x.size(1));
  return layer.attention->forward(pos.defined() ? x + pos.unsqueeze(0) : x, pad);
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

TEST(PositionProperties, AppendedPaddingChangesNothing) {
  for (const auto& name : attention_method_names()) {
    auto layer = make_layer(tiny_options(name, 3));
    torch::manual_seed(1);
    auto x = torch::randn({1, 7, 8}, torch::kFloat64);
    auto ref = run(layer, x, torch::zeros({1, 7}, torch::kBool));
    auto padded_x = torch::cat({x, torch::randn({1, 4, 8}, torch::kFloat64)}, 1);
    auto pad = torch::cat({torch::zeros({1, 7}, torch::kBool), torch::ones({1, 4}, torch::kBool)}, 1);
    layer.attention->capture = true;
    auto out = run(layer, padded_x, pad);
    EXPECT_LT(max_diff(out.narrow(1, 0, 7), ref), 1e-12) << name;
    auto probs = layer.attention->captured_probs;  // [1, H, 11, 11]
    EXPECT_EQ(probs.narrow(-1, 7, 4).abs().max().item<double>(), 0.0) << name << ": padded keys";
  }
}

TEST(PositionProperties, RelativeMethodsAreShiftInvariant) {
  for (const auto& name : attention_method_names()) {
    if (!is_relative(name)) continue;
    auto layer = make_layer(tiny_options(name, 3));
    torch::manual_seed(2);
    auto x = torch::randn({1, 6, 8}, torch::kFloat64);
    auto ref = run(layer, x, torch::zeros({1, 6}, torch::kBool));
    for (int64_t shift : {1, 5}) {  // the same tokens at positions shift .. shift + 5
      auto shifted = torch::cat({torch::randn({1, shift, 8}, torch::kFloat64), x}, 1);
      auto pad = torch::cat({torch::ones({1, shift}, torch::kBool), torch::zeros({1, 6}, torch::kBool)}, 1);
      auto out = run(layer, shifted, pad).narrow(1, shift, 6);
      EXPECT_LT(max_diff(out, ref), 1e-10) << name << " shift " << shift;
    }
  }
}

TEST(PositionProperties, AbsoluteMethodsAreNotShiftInvariant) {
  // The check above can fail: a method that sees absolute positions does change.
  for (const std::string name : {"absolute", "sinusoid"}) {
    auto layer = make_layer(tiny_options(name));
    torch::manual_seed(2);
    auto x = torch::randn({1, 6, 8}, torch::kFloat64);
    auto ref = run(layer, x, torch::zeros({1, 6}, torch::kBool));
    auto shifted = torch::cat({torch::randn({1, 2, 8}, torch::kFloat64), x}, 1);
    auto pad = torch::cat({torch::ones({1, 2}, torch::kBool), torch::zeros({1, 6}, torch::kBool)}, 1);
    EXPECT_GT(max_diff(run(layer, shifted, pad).narrow(1, 2, 6), ref), 1e-6) << name;
  }
}

TEST(PositionProperties, RelativeMethodsRunBeyondMaxPosition) {
  // max_position 16, length 40: the tables (k = n - 1 = 15) clip at their edge. The
  // exact tests compare L = 33 > 16 against the equation; here every method runs.
  for (const auto& name : attention_method_names()) {
    if (!is_relative(name)) continue;
    auto layer = make_layer(tiny_options(name));
    auto x = torch::randn({2, 40, 8}, torch::kFloat64);
    auto out = run(layer, x, padding_mask(2, 40));
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>()) << name;
  }
}

TEST(PositionProperties, AddAbsoluteAddsALearnedTable) {
  auto o = tiny_options("m4");
  o.attention.add_absolute = true;
  auto method = make_position_method(o);
  EXPECT_TRUE(method->named_parameters().contains("absolute"));
  EXPECT_EQ(method->input_embeddings(5).sizes(), torch::IntArrayRef({5, 8}));
  EXPECT_THROW(method->input_embeddings(17), UserError);  // a learned table cannot extrapolate
  EXPECT_FALSE(make_position_method(tiny_options("m4"))->input_embeddings(5).defined());
}

}  // namespace rpe::test

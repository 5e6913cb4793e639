// t5_bias (Raffel et al. 2019): e_ij = q_i . k_j / sqrt(d) + b_{bucket(j-i)}, against a
// naive loop; the buckets against a hand-computed table; the table shared by layers.
#include <cmath>

#include "model/bert.h"
#include "reference.h"

namespace rpe::test {
namespace {
// T5's bidirectional bucket of one distance, written out as in the T5 paper's code.
int64_t bucket_of(int64_t rel, int64_t buckets, int64_t max_distance) {
  const int64_t half = buckets / 2, exact = half / 2, n = std::abs(rel);
  const int64_t base = rel > 0 ? half : 0;
  if (n < exact) return base + n;
  const auto large = exact + static_cast<int64_t>(std::log(static_cast<double>(n) / exact) /
                                                  std::log(static_cast<double>(max_distance) / exact) * (half - exact));
  return base + std::min(large, half - 1);
}
}  // namespace

TEST(T5Bias, BucketsByHand) {
  // 32 buckets, max distance 128: 16 per direction, exact below 8, log up to 128.
  //   r:       0  -1  -7  -8  -15 -16 -32 -64 -127 -128 -1000 | 1   7   8   16  127  1000
  //   bucket:  0   1   7   8   9  10  12  14  15   15   15   | 17  23  24  26  31   31
  const std::vector<std::pair<int64_t, int64_t>> table{
      {0, 0},    {-1, 1},   {-7, 7},    {-8, 8},     {-15, 9},    {-16, 10}, {-32, 12}, {-64, 14}, {-127, 15},
      {-128, 15}, {-1000, 15}, {1, 17}, {7, 23},     {8, 24},     {16, 26},  {127, 31}, {1000, 31}};
  std::vector<int64_t> rel;
  for (auto [r, b] : table) rel.push_back(r);
  auto got = t5_relative_bucket(torch::tensor(rel), 32, 128);
  for (size_t n = 0; n < table.size(); ++n) {
    EXPECT_EQ(got[n].item<int64_t>(), table[n].second) << "r=" << table[n].first;
    EXPECT_EQ(bucket_of(table[n].first, 32, 128), table[n].second) << "test's own formula, r=" << table[n].first;
  }
}

TEST(T5Bias, MatchesNaiveEquation) {
  for (bool shared : {false, true})
    for (auto [buckets, max_distance] : std::vector<std::pair<int64_t, int64_t>>{{32, 128}, {8, 6}}) {
      auto o = tiny_options("t5_bias", 0, shared);
      o.attention.t5_buckets = buckets;
      o.attention.t5_max_distance = max_distance;
      auto layer = make_layer(o);
      auto b = layer.method_param("relative_attention_bias");  // [buckets, H|1]
      EXPECT_EQ(b.sizes(), torch::IntArrayRef({buckets, shared ? 1 : 2}));
      EXPECT_TRUE(layer.attention->position->parameters().empty()) << "layer must not re-register the table";
      RefSpec spec;
      spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
        return (t.q.select(2, i) * t.k.select(2, j)).sum(-1) / 2.0 + b.select(0, bucket_of(j - i, buckets, max_distance));
      };
      for (int64_t L : kLengths)
        expect_matches_reference(layer, L, spec, "t5 shared=" + std::to_string(shared) + " buckets=" +
                                                     std::to_string(buckets) + " L=" + std::to_string(L));
    }
}

TEST(T5Bias, TableIsSharedByLayersAndCountedOnce) {
  auto o = tiny_options("t5_bias");
  BertModel model(o);
  EXPECT_EQ(model->position_parameter_count(), 32 * 2);
  // Both layers read the same tensor.
  auto l0 = model->layers[0]->as<EncoderLayer>()->attention->position->position_weights();
  auto l1 = model->layers[1]->as<EncoderLayer>()->attention->position->position_weights();
  EXPECT_TRUE(l0.is_same(l1));
  int64_t named = 0;
  for (const auto& p : model->named_parameters())
    if (p.key().find("relative_attention_bias") != std::string::npos) ++named;
  EXPECT_EQ(named, 1);
}

TEST(T5Bias, BadBucketsAreUserErrors) {
  auto o = tiny_options("t5_bias");
  o.attention.t5_buckets = 2;
  EXPECT_THROW(make_position_method(o), UserError);
  o.attention.t5_buckets = 32;
  o.attention.t5_max_distance = 8;  // not beyond the exact range (32 / 4 = 8)
  try {
    make_position_method(o);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.attention.t5_max_distance"), std::string::npos);
  }
}

}  // namespace rpe::test

// Parameter counts of every method against the paper's Table 1 (m layers, h heads, n
// positions, d head size), with 2n-1 -> 2k+1 under clipping and h -> 1 when shared, and
// the position weights / attention maps the model exposes for the paper's Figures 4–5.
#include "model/bert.h"
#include "reference.h"

namespace rpe::test {
namespace {

// Table 1 (adjusted): expected position parameters of a whole model.
int64_t table1(const ModelOptions& o) {
  const auto& a = o.attention;
  const int64_t m = o.layers, h = a.share_across_heads ? 1 : o.heads, n = o.max_position, D = o.hidden;
  const int64_t d = D / o.heads, k = a.max_relative > 0 ? a.max_relative : n - 1;
  int64_t count = a.add_absolute ? n * D : 0;
  const std::string& x = a.method;
  if (x == "absolute") count += n * D;                                 // n d (d = width here)
  if (x == "shaw") count += m * h * (2 * k + 1) * d * (a.shaw_values ? 2 : 1);  // m h (2n-1) d
  if (x == "transformer_xl") count += m * (D * D + (a.xl_uv_bias ? 2 * D : 0));  // W^R, u, v per layer
  if (x == "m1") count += m * h * (k + 1);                             // m h n
  if (x == "m2") count += m * h * (2 * k + 1);                         // m h (2n-1)
  if (x == "m3" || x == "m4") count += m * h * (2 * k + 1) * d;        // m h (2n-1) d
  if (x == "t5_bias") count += a.t5_buckets * h;                       // buckets x heads, shared by layers
  const int64_t rows = a.position_buckets > 0 ? 2 * a.position_buckets + 1 : 2 * k + 1;  // deberta: log buckets
  if (x == "deberta") count += rows * D + m * 2 * D * D;               // shared P, per-layer W^{K,r}, W^{Q,r}
  return count;                                                        // sinusoid, alibi, rope: 0
}

}  // namespace

TEST(PositionParameters, CountsMatchTable1) {
  for (const auto& name : attention_method_names())
    for (int64_t k : {0, 3})
      for (bool shared : {false, true}) {
        auto o = tiny_options(name, k, shared);
        BertModel model(o);
        EXPECT_EQ(model->position_parameter_count(), table1(o)) << name << " k=" << k << " shared=" << shared;
      }
  // Options that add parameters, or change a table's rows (deberta's log buckets: 2b+1 rows).
  auto buckets = tiny_options("deberta", 6);
  buckets.attention.position_buckets = 8;
  EXPECT_EQ(BertModel(buckets)->position_parameter_count(), table1(buckets));
  EXPECT_EQ(method_info("deberta").position_parameters(buckets), static_cast<double>(table1(buckets)));  // the estimate
  auto o = tiny_options("shaw");
  o.attention.shaw_values = true;
  EXPECT_EQ(BertModel(o)->position_parameter_count(), table1(o));
  EXPECT_EQ(table1(o), 2 * 2 * 31 * 4 * 2);
  o = tiny_options("transformer_xl");
  o.attention.xl_uv_bias = false;
  EXPECT_EQ(BertModel(o)->position_parameter_count(), 2 * 64);
  o = tiny_options("m4");
  o.attention.add_absolute = true;
  EXPECT_EQ(BertModel(o)->position_parameter_count(), 16 * 8 + 2 * 2 * 31 * 4);
  // The paper's BERT-base figure: m h (2n-1) d = 12 * 12 * 1023 * 64 for m3/m4.
  ModelOptions base;
  base.vocab_size = 10;
  base.attention.method = "m4";
  EXPECT_EQ(table1(base), 12LL * 12 * 1023 * 64);
}

TEST(PositionParameters, EveryLearnedMethodReturnsItsWeights) {
  // layer 1's position weights: shape per method; methods with nothing learned return none.
  const std::map<std::string, std::vector<int64_t>> shapes{
      {"shaw", {2, 31, 4}}, {"transformer_xl", {2, 31, 4}}, {"m1", {2, 16}},      {"m2", {2, 31}},
      {"m3", {2, 31, 4}},   {"m4", {2, 31, 4}},             {"t5_bias", {32, 2}}, {"deberta", {31, 8}}};
  for (const auto& name : attention_method_names()) {
    BertModel model(tiny_options(name));
    auto w = model->layers[1]->as<EncoderLayer>()->attention->position->position_weights();
    auto it = shapes.find(name);
    if (it == shapes.end()) {
      EXPECT_FALSE(w.defined()) << name;
    } else {
      ASSERT_TRUE(w.defined()) << name;
      EXPECT_EQ(w.sizes().vec(), it->second) << name;
    }
  }
}

TEST(PositionParameters, CapturedAttentionIsAProbabilityMap) {
  for (const std::string name : {"m3", "m4", "t5_bias"}) {
    BertModel model(tiny_options(name));
    model->eval();
    auto ids = torch::randint(0, 50, {2, 9});
    auto pad = padding_mask(2, 9);
    model->capture_attention(1);
    auto plain = model->encode(ids, pad);
    auto probs = model->captured_attention();  // [B, H, L, L]
    ASSERT_TRUE(probs.defined()) << name;
    EXPECT_EQ(probs.sizes(), torch::IntArrayRef({2, 2, 9, 9}));
    EXPECT_LT((probs.sum(-1) - 1).abs().max().item<float>(), 1e-5) << name;
    EXPECT_EQ(probs[1].narrow(-1, 6, 3).abs().max().item<float>(), 0.0f) << name << ": padded keys";
    // Capturing does not change the training path's result.
    model->capture_attention(-1);
    EXPECT_LT((model->encode(ids, pad) - plain).abs().max().item<float>(), 1e-6) << name;
  }
}

}  // namespace rpe::test

namespace rpe::test {

// Options a method does not read are reported (make_position_method warns about them).
TEST(PositionParameters, OptionsAMethodIgnoresAreReported) {
  using V = std::vector<std::string>;
  auto unused = [](ModelOptions o) { return unused_attention_options(*make_position_method(o), o.attention); };
  auto o = tiny_options("m4", 3, true);  // k and sharing: both read by m4
  EXPECT_EQ(unused(o), V{});
  o.attention.shaw_values = true;
  o.attention.rope_base = 500.0;
  EXPECT_EQ(unused(o), (V{"shaw_values", "rope_base"}));
  o.attention.method = "shaw";
  EXPECT_EQ(unused(o), V{"rope_base"});
  o.attention.method = "absolute";
  EXPECT_EQ(unused(o), (V{"max_relative", "share_across_heads", "shaw_values", "rope_base"}));
  auto t5 = tiny_options("t5_bias");
  t5.attention.t5_buckets = 8;
  t5.attention.t5_max_distance = 20;
  EXPECT_EQ(unused(t5), V{});
  t5.attention.position_buckets = 8;  // deberta's alone
  EXPECT_EQ(unused(t5), V{"position_buckets"});
}

}  // namespace rpe::test

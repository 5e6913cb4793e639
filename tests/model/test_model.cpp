// BERT model: shapes, tied MLM decoder, gradients reach every parameter, parameter
// count of BERT-base against the closed-form formula, pre-LN variant.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/bert.h"
#include "test_models.h"

namespace {

rpe::ModelOptions tiny(const std::string& method) {
  return rpe::test::small_model_options(method, {.max_position = 24});  // ModelOptions' dropouts
}

}  // namespace

class ModelMethods : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelMethods, ShapesAndGradientsFlowToEveryParameter) {
  torch::manual_seed(0);
  rpe::BertModel model(tiny(GetParam()));
  auto ids = torch::randint(5, 50, {3, 11}, torch::kLong);
  auto pad = torch::zeros({3, 11}, torch::kBool);
  pad.index_put_({1, torch::indexing::Slice(8)}, true);
  auto hidden = model->encode(ids, pad);
  EXPECT_EQ(hidden.sizes(), (std::vector<int64_t>{3, 11, 16}));
  auto logits = model->mlm_logits(hidden.view({-1, 16}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{33, 50}));
  logits.pow(2).mean().backward();
  for (const auto& p : model->named_parameters()) {
    if (p.key() == "token_type_embeddings.weight") continue;  // only row 0 is used (one segment)
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, ModelMethods, ::testing::Values("absolute", "m4"));

TEST(Model, DecoderIsTiedToWordEmbeddings) {
  torch::manual_seed(0);
  rpe::BertModel model(tiny("absolute"));
  model->eval();
  auto h = torch::randn({4, 16});
  auto logits = model->mlm_logits(h);
  // Independent recomputation: gelu -> LayerNorm -> E^T + b with E the word embeddings.
  auto t = torch::gelu(torch::matmul(h, model->mlm_transform->weight.t()) + model->mlm_transform->bias);
  t = torch::layer_norm(t, {16}, model->mlm_norm->weight, model->mlm_norm->bias, 1e-12);
  auto expected = torch::matmul(t, model->word_embeddings->weight.t()) + model->mlm_bias;
  EXPECT_LT((logits - expected).abs().max().item<double>(), 1e-5);
  // Changing the embedding table changes the decoder: they are one tensor.
  torch::NoGradGuard g;
  model->word_embeddings->weight.mul_(2.0);
  EXPECT_GT((model->mlm_logits(h) - logits).abs().max().item<double>(), 1e-3);
}

TEST(Model, BertBaseParameterCountMatchesFormula) {
  rpe::ModelOptions o;  // defaults are BERT-base
  o.vocab_size = 30522;
  o.attention.method = "absolute";
  rpe::BertModel model(o);
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  const int64_t V = 30522, D = 768, F = 3072, P = 512, T = 2, Lyr = 12;
  const int64_t embeddings = V * D + P * D + T * D + 2 * D;
  const int64_t layer = 4 * (D * D + D) + 2 * D + (D * F + F) + (F * D + D) + 2 * D;
  const int64_t head = D * D + D + 2 * D + V;  // transform, LayerNorm, bias (decoder tied)
  EXPECT_EQ(n, embeddings + Lyr * layer + head);
  EXPECT_EQ(n, 109514298);  // bert-base-uncased with its MLM head, as Hugging Face reports it
}

TEST(Model, AbsoluteRefusesSequencesLongerThanItsTable) {
  rpe::BertModel model(tiny("absolute"));
  auto ids = torch::randint(5, 50, {1, 30}, torch::kLong);
  try {
    model->encode(ids, torch::zeros({1, 30}, torch::kBool));
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("30"), std::string::npos) << msg;
    EXPECT_NE(msg.find("24"), std::string::npos) << msg;
  }
}

TEST(Model, PreLayerNormVariantRunsAndDiffers) {
  torch::manual_seed(0);
  auto o = tiny("m4");
  rpe::BertModel post(o);
  o.pre_ln = true;
  torch::manual_seed(0);
  rpe::BertModel pre(o);
  post->eval();
  pre->eval();
  auto ids = torch::randint(5, 50, {2, 9}, torch::kLong);
  auto pad = torch::zeros({2, 9}, torch::kBool);
  auto a = post->encode(ids, pad), b = pre->encode(ids, pad);
  EXPECT_EQ(a.sizes(), b.sizes());
  EXPECT_GT((a - b).abs().max().item<double>(), 1e-3);  // same weights, different wiring
}

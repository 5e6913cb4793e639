// BERT model: shapes, tied MLM decoder, gradients reach every parameter, parameter
// count of BERT-base against the closed-form formula, pre-LN wiring against its equations.
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

TEST(Model, PreLayerNormWiringFollowsItsEquations) {
  // Reference composed from the model's own sub-modules, one equation per line:
  //   x = LN_emb(word + type_0 + position);  per layer: h = x + Attn(LN_1(x)); x = h + FFN(LN_2(h));
  //   out = LN_final(x). A large init makes every term count (at BERT's 0.02 the residual
  //   branches are tiny and post-LN and pre-LN outputs agree to 1e-4).
  torch::manual_seed(0);
  auto o = tiny("t5_bias");  // a method with a position-only bias: the shared bias reaches every layer
  o.init_std = 0.5;
  o.pre_ln = true;
  rpe::BertModel pre(o);
  pre->eval();
  auto ids = torch::randint(5, 50, {2, 9}, torch::kLong);
  auto pad = torch::zeros({2, 9}, torch::kBool);
  pad[1][7] = pad[1][8] = true;
  const auto got = pre->encode(ids, pad);

  torch::NoGradGuard no_grad;
  auto x = pre->word_embeddings->forward(ids) + pre->token_type_embeddings->weight[0];
  auto pos = pre->position->input_embeddings(9);
  if (pos.defined()) x = x + pos.unsqueeze(0);
  x = pre->embeddings_norm->forward(x);
  auto bias = pre->position->position_bias(9, x.device(), x.scalar_type());
  ASSERT_TRUE(bias.defined());
  bias = bias + torch::zeros({2, 1, 1, 9}).masked_fill(pad.view({2, 1, 1, 9}), -INFINITY);
  for (const auto& module : *pre->layers) {
    auto layer = module->as<rpe::EncoderLayerImpl>();
    auto h = x + layer->attention->forward(layer->attention_norm->forward(x), torch::Tensor(), bias);
    x = h + layer->ffn_out->forward(torch::gelu(layer->ffn_in->forward(layer->ffn_norm->forward(h))));
  }
  const auto want = pre->final_norm->forward(x);
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-5);

  // The same weights wired post-LN give clearly other states.
  o.pre_ln = false;
  torch::manual_seed(0);
  rpe::BertModel post(o);
  post->eval();
  EXPECT_GT((post->encode(ids, pad) - got).abs().max().item<double>(), 0.1);
}

TEST(Model, PreLayerNormEndsWithALayerNorm) {
  // Pre-LN layers add to an unnormalised residual stream; the heads get it through a final
  // LayerNorm (weight 1, bias 0 at init): every position's hidden state has mean 0, variance 1.
  torch::manual_seed(0);
  auto o = tiny("absolute");
  o.pre_ln = true;
  rpe::BertModel model(o);
  model->eval();
  ASSERT_TRUE(model->final_norm);
  auto h = model->encode(torch::randint(5, 50, {2, 9}, torch::kLong), torch::zeros({2, 9}, torch::kBool));
  EXPECT_LT(h.mean(-1).abs().max().item<double>(), 1e-5);
  EXPECT_LT((h.var(-1, /*unbiased=*/false) - 1).abs().max().item<double>(), 1e-3);
  // The residual stream itself is not normalised: without the final LayerNorm it would fail.
  torch::NoGradGuard no_grad;
  model->final_norm->weight.fill_(2.0);
  auto h2 = model->encode(torch::randint(5, 50, {2, 9}, torch::kLong), torch::zeros({2, 9}, torch::kBool));
  EXPECT_NEAR(h2.var(-1, false).mean().item<double>(), 4.0, 1e-2);
}

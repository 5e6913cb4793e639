// Method swap (paper section 4.4): an absolute checkpoint loaded into a relative model
// starts as the same function when the absolute table is kept and the new tables are
// zero; dropping the table changes it; mismatched architectures are refused.
#include <gtest/gtest.h>

#include "config/config.h"
#include "interop/method_swap.h"
#include "interop/model_file.h"
#include "model/attention/registry.h"
#include "util/errors.h"
#include "test_models.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace rpe;

namespace {

Config tiny(const std::string& method) {
  Config cfg;
  cfg.model = test::small_model_options(method, {.vocab = 30, .max_position = 10});
  cfg.data.train_files = {"none"};
  return cfg;
}

fs::path absolute_checkpoint() {
  const fs::path dir = test::process_temp_dir() / "method_swap";
  fs::create_directories(dir);
  const Config cfg = tiny("absolute");
  torch::manual_seed(11);
  BertModel model(cfg.model);
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) p.value().normal_(0.0, 0.3);
  save_model_file(dir / "abs.pt", *model, to_yaml(cfg));
  return dir / "abs.pt";
}

// MLM logits of a batch the swap's own probe does not use: [B*L, V].
torch::Tensor logits(BertModelImpl& model) {
  model.eval();
  torch::NoGradGuard no_grad;
  auto ids = torch::tensor({{5, 9, 2, 28, 14, 3, 7, 0}, {1, 1, 22, 4, 19, 6, 11, 25}}, torch::kLong);
  auto pad = torch::zeros_like(ids, torch::kBool);
  return model.mlm_logits(model.encode(ids, pad).view({-1, model.options().hidden}));
}

}  // namespace

TEST(MethodSwap, KeepingAbsoluteWithZeroTablesStartsAsTheLoadedFunction) {
  const fs::path ck = absolute_checkpoint();
  auto original = load_model_file(ck);
  for (const std::string method : {"m4", "shaw"}) {
    if (!test::method_registered(method)) continue;
    for (bool shared : {false, true}) {
      Config cfg = tiny(method);
      cfg.model.attention.add_absolute = true;  // keep the loaded table
      cfg.model.attention.share_across_heads = shared;
      torch::manual_seed(99);
      BertModel model(cfg.model);
      const SwapReport r = load_pretrained_encoder(*model, ck);
      EXPECT_EQ(r.probe_max_diff, 0.0) << method;
      EXPECT_TRUE(r.dropped.empty());
      ASSERT_EQ(r.added.size(), 2u) << method;  // one table per layer
      for (const auto& name : r.added) {
        EXPECT_NE(name.find(".attention.position."), std::string::npos) << name;
        EXPECT_EQ(model->named_parameters()[name].abs().max().item<float>(), 0.0f) << name;
      }
      EXPECT_TRUE(torch::equal(logits(*model), logits(*original.model))) << method;
    }
  }
}

// Adding an absolute table to a model of the same method (e.g. m3 -> m3 + add_absolute): the
// table is an input embedding, so zero is neutral for it even where the method's own tables
// start neutral otherwise (m1-m3's gates, deberta): the function is the loaded one.
TEST(MethodSwap, AnAddedAbsoluteTableStartsAtZeroForEveryMethod) {
  const fs::path dir = test::process_temp_dir() / "method_swap_add_abs";
  fs::create_directories(dir);
  for (const std::string method : {"m1", "m3", "deberta", "m4"}) {
    if (!test::method_registered(method)) continue;
    Config plain = tiny(method);
    torch::manual_seed(21);
    BertModel source(plain.model);
    const fs::path ck = dir / (method + ".pt");
    save_model_file(ck, *source, to_yaml(plain));
    Config with_abs = plain;
    with_abs.model.attention.add_absolute = true;
    BertModel model(with_abs.model);
    const SwapReport r = load_pretrained_encoder(*model, ck);
    EXPECT_EQ(r.added, std::vector<std::string>{"position.absolute"}) << method;
    EXPECT_EQ(model->named_parameters()["position.absolute"].abs().max().item<float>(), 0.0f) << method;
    EXPECT_LT(r.probe_max_diff, 1e-5) << method;
    EXPECT_TRUE(logits(*model).allclose(logits(*source), 1e-5, 1e-6)) << method;
  }
}

TEST(MethodSwap, DroppingAbsoluteTableChangesTheFunctionAndIsReported) {
  const fs::path ck = absolute_checkpoint();
  Config cfg = tiny("m4");
  BertModel model(cfg.model);
  const SwapReport r = load_pretrained_encoder(*model, ck);
  EXPECT_EQ(r.dropped, std::vector<std::string>{"position.absolute"});
  EXPECT_GT(r.probe_max_diff, 1e-3);
  // Everything but positions came across.
  auto original = load_model_file(ck);
  auto params = model->named_parameters();
  for (const auto& p : original.model->named_parameters())
    if (p.key() != "position.absolute") {
      EXPECT_TRUE(p.value().equal(params[p.key()])) << p.key();
    }
}

TEST(MethodSwap, RandomInitKeepsTheMethodsOwnValues) {
  const fs::path ck = absolute_checkpoint();
  Config cfg = tiny("m4");
  cfg.model.attention.add_absolute = true;
  cfg.init.new_position_params = "random";
  BertModel model(cfg.model);
  const SwapReport r = load_pretrained_encoder(*model, ck, swap_options_from(cfg.init));
  EXPECT_GT(model->named_parameters()[r.added.at(0)].abs().max().item<float>(), 0.0f);
  EXPECT_GT(r.probe_max_diff, 0.0);
}

// m1-m4 all name their per-layer table "...position.w": across methods it is not carried over
// (m3's near-1 gates are no m4 additive table; m4's [H, 2k+1, d] table does not fit m2's
// scalars): the old table is dropped and the new method's added, m4's at zero.
TEST(MethodSwap, ASameNamedTableOfAnotherMethodIsDroppedNotLoaded) {
  const fs::path dir = test::process_temp_dir() / "method_swap_m3";
  fs::create_directories(dir);
  Config m3 = tiny("m3");
  m3.model.attention.add_absolute = true;
  torch::manual_seed(5);
  BertModel source(m3.model);
  save_model_file(dir / "m3.pt", *source, to_yaml(m3));
  Config m4 = tiny("m4");
  m4.model.attention.add_absolute = true;
  BertModel model(m4.model);
  const SwapReport r = load_pretrained_encoder(*model, dir / "m3.pt");
  ASSERT_EQ(r.added.size(), 2u);
  EXPECT_EQ(r.dropped, r.added);  // the same names, one per layer
  for (const auto& name : r.added) EXPECT_EQ(model->named_parameters()[name].abs().max().item<float>(), 0.0f) << name;
  // The absolute table (the same input embedding in every method) did come across.
  EXPECT_TRUE(model->named_parameters()["position.absolute"].equal(source->named_parameters()["position.absolute"]));
  Config m2 = tiny("m2");
  BertModel scalars(m2.model);
  save_model_file(dir / "m4.pt", *model, to_yaml(m4));
  EXPECT_NO_THROW(load_pretrained_encoder(*scalars, dir / "m4.pt"));  // was refused for the shape
}

// A clipped deberta table of 2k+1 rows has the shape of a bucketed one of 2b+1 rows at k = b, but
// its rows mean distances, not buckets: it is dropped and the new one added, as across methods.
TEST(MethodSwap, ABucketedDebertaTableIsNotAClippedOne) {
  const fs::path dir = test::process_temp_dir() / "method_swap_deberta";
  fs::create_directories(dir);
  Config clipped = tiny("deberta");
  clipped.model.attention.max_relative = 4;  // P: [9, D]
  torch::manual_seed(6);
  BertModel source(clipped.model);
  save_model_file(dir / "clipped.pt", *source, to_yaml(clipped));
  Config bucketed = tiny("deberta");
  bucketed.model.attention.position_buckets = 4;  // P: [9, D] (k = 9, ending the buckets)
  BertModel model(bucketed.model);
  ASSERT_EQ(model->named_parameters()["position.rel_embeddings"].sizes(),
            source->named_parameters()["position.rel_embeddings"].sizes());
  const SwapReport r = load_pretrained_encoder(*model, dir / "clipped.pt");
  EXPECT_EQ(r.dropped, r.added);
  EXPECT_NE(std::find(r.added.begin(), r.added.end(), "position.rel_embeddings"), r.added.end());
  // Not copied: the new table keeps its own initialisation (so do the per-layer projections).
  EXPECT_FALSE(model->named_parameters()["position.rel_embeddings"].equal(source->named_parameters()["position.rel_embeddings"]));
}

// Microsoft's p2c index reads the same tables mirrored: every tensor is loaded, the change of
// option is reported (the backend, how attention runs, is no change) and the probe shows it.
TEST(MethodSwap, SameMethodWithOtherOptionsIsLoadedAndReported) {
  const fs::path dir = test::process_temp_dir() / "method_swap_p2c";
  fs::create_directories(dir);
  Config paper = tiny("deberta");
  torch::manual_seed(8);
  BertModel source(paper.model);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : source->named_parameters()) p.value().normal_(0.0, 0.3);
  }
  save_model_file(dir / "paper.pt", *source, to_yaml(paper));
  Config microsoft = tiny("deberta");
  microsoft.model.attention.deberta_p2c = "microsoft";
  microsoft.model.attention.backend = "plain";
  BertModel model(microsoft.model);
  const SwapReport r = load_pretrained_encoder(*model, dir / "paper.pt");
  EXPECT_TRUE(r.added.empty());
  EXPECT_TRUE(r.dropped.empty());
  EXPECT_EQ(r.changed_options, std::vector<std::string>{"model.attention.deberta_p2c: paper -> microsoft"});
  EXPECT_GT(r.probe_max_diff, 1e-3);

  BertModel same(paper.model);  // the same options: nothing to report, the same function
  const SwapReport unchanged = load_pretrained_encoder(*same, dir / "paper.pt");
  EXPECT_TRUE(unchanged.changed_options.empty());
  EXPECT_EQ(unchanged.probe_max_diff, 0.0);

  Config unread = paper;  // an option deberta does not read: listed, and the probe (no warning) shows no change
  unread.model.attention.rope_base = 500;
  BertModel other(unread.model);
  const SwapReport same_function = load_pretrained_encoder(*other, dir / "paper.pt");
  EXPECT_EQ(same_function.changed_options, std::vector<std::string>{"model.attention.rope_base: 10000 -> 500"});
  EXPECT_EQ(same_function.probe_max_diff, 0.0);
}

TEST(MethodSwap, RefusesOtherArchitectures) {
  const fs::path ck = absolute_checkpoint();
  Config wider = tiny("m4");
  wider.model.hidden = 32;
  BertModel a(wider.model);
  try {
    load_pretrained_encoder(*a, ck);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("word_embeddings.weight has shape [30, 16]"), std::string::npos) << e.what();
  }
  Config deeper = tiny("absolute");
  deeper.model.layers = 3;
  BertModel b(deeper.model);
  try {
    load_pretrained_encoder(*b, ck);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("layers.2."), std::string::npos) << e.what();
  }
}

TEST(MethodSwap, ConfigValidatesInitSection) {
  Config cfg = tiny("m4");
  cfg.init.new_position_params = "zeros";
  try {
    validate(cfg);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("init.new_position_params"), std::string::npos);
  }
  cfg.init.new_position_params = "identity";
  cfg.init.checkpoint = "x.pt";
  const Config back = config_from_yaml(to_yaml(cfg), "t");
  EXPECT_EQ(back.init.checkpoint, "x.pt");
}

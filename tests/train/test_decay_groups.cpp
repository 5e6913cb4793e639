// train.decay_position_params: which named parameters the optimizers decay under each setting,
// against names written out here by hand for a one-layer model of each method with position
// parameters (not the rule of split_decay_groups run again), and the decoupled decay the switch
// turns on for a relative table, step by step.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/bert.h"
#include "test_models.h"
#include "train/foreach_adamw.h"
#include "train/lamb.h"
#include "train/optim.h"

namespace rpe {
namespace {

using Names = std::set<std::string>;

// The matrices every method's model decays under either setting (BERT's recipe).
const Names kDecayedAlways = {
    "word_embeddings.weight",         "token_type_embeddings.weight",  "layers.0.attention.query.weight",
    "layers.0.attention.key.weight",  "layers.0.attention.value.weight", "layers.0.attention.output.weight",
    "layers.0.ffn_in.weight",         "layers.0.ffn_out.weight",       "mlm_transform.weight"};

struct MethodCase {
  std::string method;
  Names position;       // decayed only with train.decay_position_params
  Names bias_matrices;  // of two or more dimensions, yet biases: never decayed (LAMB still adapts them)
};

const std::vector<MethodCase> kCases = {
    {"absolute", {"position.absolute"}, {}},
    {"shaw", {"layers.0.attention.position.key_table"}, {}},
    {"transformer_xl", {"layers.0.attention.position.r_proj"},
     {"layers.0.attention.position.u", "layers.0.attention.position.v"}},
    {"m1", {"layers.0.attention.position.w"}, {}},
    {"m2", {"layers.0.attention.position.w"}, {}},
    {"m3", {"layers.0.attention.position.w"}, {}},
    {"m4", {"layers.0.attention.position.w"}, {}},
    {"deberta",
     {"position.rel_embeddings", "layers.0.attention.position.pos_key_proj",
      "layers.0.attention.position.pos_query_proj"},
     {}},
    {"t5_bias", {"position.relative_attention_bias"}, {}},
};

BertModel one_layer(const std::string& method) {
  torch::manual_seed(1);
  return BertModel(test::small_model_options(method, {.layers = 1}));
}

// The names of `tensors` in `model` (by identity).
Names names_of(BertModel& model, const std::vector<torch::Tensor>& tensors) {
  std::map<const void*, std::string> name;
  for (const auto& p : model->named_parameters()) name[p.value().unsafeGetTensorImpl()] = p.key();
  Names out;
  for (const auto& t : tensors) out.insert(name.at(t.unsafeGetTensorImpl()));
  return out;
}

Names united(Names a, const Names& b) {
  a.insert(b.begin(), b.end());
  return a;
}

TEST(DecayGroups, NamedParametersUnderEachSetting) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.method);
    auto model = one_layer(c.method);
    const size_t total = model->named_parameters().size();
    for (bool on : {false, true}) {
      SCOPED_TRACE(on ? "decay_position_params" : "default");
      const Names want = on ? united(kDecayedAlways, c.position) : kDecayedAlways;
      const auto g = split_decay_groups(*model, on);
      EXPECT_EQ(names_of(model, g.decay), want);
      EXPECT_EQ(g.decay.size() + g.no_decay.size(), total);  // every parameter, once
      EXPECT_EQ(names_of(model, g.decay).size() + names_of(model, g.no_decay).size(), total);
    }
  }
}

// Through the optimizers the training loop builds: AdamW's decayed group, and LAMB's three
// (decayed and adapted; undecayed and adapted; undecayed vectors, the plain Adam step).
TEST(DecayGroups, BothOptimizersHonourTheSwitch) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.method);
    auto model = one_layer(c.method);
    for (bool on : {false, true}) {
      SCOPED_TRACE(on ? "decay_position_params" : "default");
      TrainOptions o;
      o.decay_position_params = on;
      const Names decayed = on ? united(kDecayedAlways, c.position) : kDecayedAlways;
      const Names adapted_undecayed = on ? c.bias_matrices : united(c.position, c.bias_matrices);
      auto adamw = make_adamw(*model, o);
      ASSERT_EQ(adamw->param_groups().size(), 2u);
      EXPECT_EQ(names_of(model, adamw->param_groups()[0].params()), decayed);
      EXPECT_DOUBLE_EQ(static_cast<torch::optim::AdamWOptions&>(adamw->param_groups()[0].options()).weight_decay(),
                       o.weight_decay);
      o.optimizer = "lamb";
      auto lamb = make_optimizer(*model, o);
      Names lamb_decayed, lamb_adapted_undecayed;
      for (auto& group : lamb->param_groups()) {
        const auto& opts = static_cast<const LambOptions&>(group.options());
        if (opts.weight_decay() > 0) {
          EXPECT_TRUE(opts.layer_adaptation());
          lamb_decayed = united(lamb_decayed, names_of(model, group.params()));
        } else if (opts.layer_adaptation()) {
          lamb_adapted_undecayed = united(lamb_adapted_undecayed, names_of(model, group.params()));
        }
      }
      EXPECT_EQ(lamb_decayed, decayed);
      EXPECT_EQ(lamb_adapted_undecayed, adapted_undecayed);
    }
  }
}

// One step with every gradient zero: Adam's direction is 0, so what moves a tensor is the
// decoupled decay alone, p <- p - lr * wd * p (AdamW), and with the switch that includes shaw's
// relative table; without it the table stays bit for bit. The FFN matrix decays either way (the
// step did run). step() and the training loop's step_if(finite) alike.
TEST(DecayGroups, AdamWStepDecaysARelativeTableOnlyWithTheSwitch) {
  for (bool on : {false, true})
    for (bool device_flag : {false, true}) {
      SCOPED_TRACE(std::string(on ? "decay_position_params" : "default") + (device_flag ? ", step_if" : ", step"));
      auto model = one_layer("shaw");
      auto table = model->named_parameters()["layers.0.attention.position.key_table"];
      auto matrix = model->named_parameters()["layers.0.ffn_in.weight"];
      const auto table0 = table.detach().clone(), matrix0 = matrix.detach().clone();
      TrainOptions o;
      o.lr = 0.1, o.weight_decay = 0.5, o.decay_position_params = on;
      auto opt = make_adamw(*model, o);
      for (auto& p : model->parameters()) p.mutable_grad() = torch::zeros_like(p);
      if (device_flag) dynamic_cast<ForeachAdamW&>(*opt).step_if(torch::tensor(true));
      else opt->step();
      const double shrink = 1.0 - o.lr * o.weight_decay;  // 0.95
      EXPECT_TRUE(torch::allclose(matrix, matrix0 * shrink, 1e-6, 0.0));
      if (on) EXPECT_TRUE(torch::allclose(table, table0 * shrink, 1e-6, 0.0));
      else EXPECT_TRUE(torch::equal(table, table0));
      EXPECT_GT((table0 * (1 - shrink)).abs().max().item<double>(), 1e-3);  // the decay would show
    }
}

// LAMB, the same zero-gradient step: r = wd * p and trust = ||p|| / ||r|| = 1 / wd, so a decayed
// matrix moves by p <- p - lr * p; the undecayed table (r = 0) does not move.
TEST(DecayGroups, LambStepDecaysARelativeTableOnlyWithTheSwitch) {
  for (bool on : {false, true}) {
    SCOPED_TRACE(on ? "decay_position_params" : "default");
    auto model = one_layer("shaw");
    auto table = model->named_parameters()["layers.0.attention.position.key_table"];
    const auto table0 = table.detach().clone();
    TrainOptions o;
    o.optimizer = "lamb", o.lr = 0.1, o.weight_decay = 0.5, o.decay_position_params = on;
    auto opt = make_optimizer(*model, o);
    for (auto& p : model->parameters()) p.mutable_grad() = torch::zeros_like(p);
    opt->step();
    if (on) EXPECT_TRUE(torch::allclose(table, table0 * (1.0 - o.lr), 1e-5, 0.0));
    else EXPECT_TRUE(torch::equal(table, table0));
  }
}

}  // namespace
}  // namespace rpe

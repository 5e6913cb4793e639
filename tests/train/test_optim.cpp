// Optimizers and schedules against independent references: LAMB against a naive per-element
// implementation of You et al. 2019 (Algorithm 2) written here; schedules against hand values.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "train/lamb.h"
#include "train/optim.h"
#include "util/op_counter.h"
#include "util/torch_compat.h"

namespace rpe {
namespace {

// One naive LAMB step on a flat std::vector copy of one tensor, in double precision.
void naive_lamb_step(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m,
                     std::vector<double>& v, int t, double lr, double b1, double b2, double eps, double wd,
                     bool adapt = true) {
  std::vector<double> r(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    const double mh = m[i] / (1 - std::pow(b1, t)), vh = v[i] / (1 - std::pow(b2, t));
    r[i] = mh / (std::sqrt(vh) + eps) + wd * p[i];
  }
  double pn = 0, rn = 0;
  for (size_t i = 0; i < p.size(); ++i) pn += p[i] * p[i], rn += r[i] * r[i];
  pn = std::sqrt(pn), rn = std::sqrt(rn);
  const double trust = adapt && pn > 0 && rn > 0 ? pn / rn : 1.0;
  for (size_t i = 0; i < p.size(); ++i) p[i] -= lr * trust * r[i];
}

std::vector<double> to_vec(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kDouble).contiguous().view({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

TEST(Lamb, MatchesNaiveReferenceOverSeveralSteps) {
  torch::manual_seed(3);
  auto w = torch::randn({5, 4}).set_requires_grad(true);   // decayed group
  auto b = torch::zeros({4}).set_requires_grad(true);      // no-decay group, starts at norm 0 (trust = 1)
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{w}, std::make_unique<LambOptions>(LambOptions(0.01).weight_decay(0.1)));
  groups.emplace_back(std::vector<torch::Tensor>{b}, std::make_unique<LambOptions>(LambOptions(0.01).weight_decay(0.0)));
  Lamb opt(groups, LambOptions(0.01));
  auto pw = to_vec(w), pb = to_vec(b);
  const auto initial = pw;
  std::vector<double> mw(pw.size()), vw(pw.size()), mb(pb.size()), vb(pb.size());
  for (int t = 1; t <= 4; ++t) {
    auto gw = torch::randn({5, 4}), gb = torch::randn({4});
    w.mutable_grad() = gw.clone();
    b.mutable_grad() = gb.clone();
    opt.step();
    naive_lamb_step(pw, to_vec(gw), mw, vw, t, 0.01, 0.9, 0.999, 1e-6, 0.1);
    naive_lamb_step(pb, to_vec(gb), mb, vb, t, 0.01, 0.9, 0.999, 1e-6, 0.0);
  }
  const auto ow = to_vec(w), ob = to_vec(b);
  for (size_t i = 0; i < pw.size(); ++i) EXPECT_NEAR(ow[i], pw[i], 1e-6) << "w[" << i << "]";
  for (size_t i = 0; i < pb.size(); ++i) EXPECT_NEAR(ob[i], pb[i], 1e-6) << "b[" << i << "]";
  EXPECT_GT(std::abs(ow[0] - initial[0]), 1e-3);  // the steps did move the weights
}

TEST(Lamb, StateRoundTripsThroughArchive) {
  torch::manual_seed(4);
  auto w = torch::randn({3, 3}).set_requires_grad(true);
  Lamb a(std::vector<torch::Tensor>{w}, LambOptions(0.05));
  w.mutable_grad() = torch::randn({3, 3});
  a.step();
  torch::serialize::OutputArchive out;
  a.save(out);
  std::stringstream buf;
  out.save_to(buf);
  auto w2 = w.detach().clone().set_requires_grad(true);
  Lamb b(std::vector<torch::Tensor>{w2}, LambOptions(0.05));
  torch::serialize::InputArchive in;
  in.load_from(buf);
  b.load(in);
  const auto g = torch::randn({3, 3});
  w.mutable_grad() = g.clone();
  w2.mutable_grad() = g.clone();
  a.step();
  b.step();
  EXPECT_TRUE(torch::equal(w, w2));  // same moments and step count after the round trip
}

// Two LAMBs over copies of the same two groups (decayed matrix, undecayed vector).
struct LambPair {
  torch::Tensor w, b, w2, b2;
  std::unique_ptr<Lamb> a, ref;
  LambPair() {
    torch::manual_seed(6);
    w = torch::randn({5, 4}).set_requires_grad(true);
    b = torch::randn({4}).set_requires_grad(true);
    w2 = w.detach().clone().set_requires_grad(true);
    b2 = b.detach().clone().set_requires_grad(true);
    a = make(w, b);
    ref = make(w2, b2);
  }
  static std::unique_ptr<Lamb> make(const torch::Tensor& w, const torch::Tensor& b) {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{w}, std::make_unique<LambOptions>(LambOptions(0.01).weight_decay(0.1)));
    // As the training loop's vectors: no decay, no layer adaptation (step_if's other path).
    groups.emplace_back(std::vector<torch::Tensor>{b},
                        std::make_unique<LambOptions>(LambOptions(0.01).weight_decay(0.0).layer_adaptation(false)));
    return std::make_unique<Lamb>(groups, LambOptions(0.01));
  }
  void grads(int step) {
    torch::manual_seed(100 + step);
    const auto gw = torch::randn({5, 4}), gb = torch::randn({4});
    w.mutable_grad() = gw.clone();
    b.mutable_grad() = gb.clone();
    w2.mutable_grad() = gw.clone();
    b2.mutable_grad() = gb.clone();
  }
  const LambParamState& state(Lamb& o, const torch::Tensor& p) {
    return static_cast<const LambParamState&>(*o.state().at(compat::optimizer_state_key(p)));
  }
};

// The training loop's step_if(finite) against step(): the same update (t on the device in
// float32: within float tolerance); a non-finite step -- NaN gradients, the flag false, also as
// the very first step -- leaves weights, moments and t exactly as they were.
TEST(Lamb, StepIfMatchesStepAndSkipsOnTheDevice) {
  LambPair p;
  for (int step = 0; step < 7; ++step) {
    p.grads(step);
    if (step == 0 || step == 4) {  // skipped: the reference does not step
      const auto w = p.w.detach().clone(), b = p.b.detach().clone();
      p.w.mutable_grad().fill_(std::numeric_limits<float>::quiet_NaN());
      p.b.mutable_grad()[1] = std::numeric_limits<float>::infinity();
      std::vector<torch::Tensor> m_before;
      if (step > 0) m_before = {p.state(*p.a, p.w).exp_avg().clone(), p.state(*p.a, p.w).exp_avg_sq().clone()};
      p.a->step_if(torch::tensor(false));
      ASSERT_TRUE(torch::equal(p.w, w) && torch::equal(p.b, b)) << step;
      if (step > 0) {
        EXPECT_TRUE(torch::equal(p.state(*p.a, p.w).exp_avg(), m_before[0]));
        EXPECT_TRUE(torch::equal(p.state(*p.a, p.w).exp_avg_sq(), m_before[1]));
      }
      continue;
    }
    p.a->step_if(torch::tensor(true));
    p.ref->step();
    ASSERT_TRUE(torch::allclose(p.w, p.w2, 1e-5, 1e-7)) << step;
    ASSERT_TRUE(torch::allclose(p.b, p.b2, 1e-5, 1e-7)) << step;
  }
  EXPECT_GT((p.w - LambPair().w).abs().max().item<double>(), 1e-3);  // it did move the weights
  p.a->sync_host_state();
  EXPECT_EQ(p.state(*p.a, p.w).step(), 5);  // 7 steps, 2 skipped
  EXPECT_EQ(p.state(*p.a, p.b).step(), p.state(*p.ref, p.b2).step());
  EXPECT_TRUE(torch::allclose(p.state(*p.a, p.w).exp_avg_sq(), p.state(*p.ref, p.w2).exp_avg_sq(), 1e-5, 1e-10));
}

// Device counts reach the state when synced (a checkpoint), and state loaded into a fresh LAMB
// (a resumed run) is what its next step_if continues from: bitwise the uninterrupted run.
TEST(Lamb, StepIfCountsSurviveSaveAndLoad) {
  LambPair p;
  for (int step = 0; step < 3; ++step) {
    p.grads(step);
    p.a->step_if(torch::tensor(true));
  }
  p.a->sync_host_state();
  torch::serialize::OutputArchive out;
  p.a->save(out);
  std::stringstream buf;
  out.save_to(buf);
  p.w2.detach().copy_(p.w.detach());
  p.b2.detach().copy_(p.b.detach());
  auto resumed = LambPair::make(p.w2, p.b2);
  torch::serialize::InputArchive in;
  in.load_from(buf);
  resumed->load(in);
  p.grads(3);
  p.a->step_if(torch::tensor(true));
  resumed->step_if(torch::tensor(true));
  EXPECT_TRUE(torch::equal(p.w, p.w2));
  EXPECT_TRUE(torch::equal(p.b, p.b2));
  resumed->sync_host_state();
  EXPECT_EQ(p.state(*resumed, p.w2).step(), 4);
}

// LAMB's step: the moment, norm and trust-ratio ops run once per group; only the scaling by
// each tensor's trust ratio is one op per tensor (1,639 ops per BERT-base step before, ~8 per tensor).
// step_if adds one more per tensor: zeroing a skipped step's gradients.
TEST(Lamb, DispatchesOneOpPerTensorBeyondAFixedFew) {
  auto ops_for = [](int n, bool device_decides) {
    torch::manual_seed(5);
    std::vector<torch::Tensor> ps;
    for (int i = 0; i < n; ++i) ps.push_back(torch::randn({4, 3}).set_requires_grad(true));
    Lamb opt(ps, LambOptions(0.01));
    for (auto& p : ps) p.mutable_grad() = torch::randn({4, 3});
    const auto finite = torch::tensor(true);
    auto step = [&] { device_decides ? opt.step_if(finite) : (void)opt.step(); };
    step();  // creates the state
    TopLevelOpCounter counter;
    step();
    return counter.ops();
  };
  const int small = ops_for(6, false), large = ops_for(60, false);
  EXPECT_EQ(large - small, 54);  // one op per extra tensor
  EXPECT_LE(small, 6 + 25);
  EXPECT_EQ(ops_for(60, true) - ops_for(6, true), 2 * 54);
}

TEST(Schedule, LinearWarmupThenDecayHandValues) {
  TrainOptions o;
  o.lr = 1.0, o.warmup_steps = 2, o.max_steps = 6, o.schedule = "linear";
  const double expect[] = {0.5, 1.0, 1.0, 0.75, 0.5, 0.25};
  for (int s = 0; s < 6; ++s) EXPECT_NEAR(learning_rate(o, s), expect[s], 1e-12) << "step " << s;
}

TEST(Schedule, CosineWithFloorHandValues) {
  TrainOptions o;
  o.lr = 1.0, o.warmup_steps = 2, o.max_steps = 6, o.schedule = "cosine", o.min_lr_ratio = 0.1;
  // floor + (1 - floor) * (1 + cos(pi * k / 4)) / 2 for k = 0..3 after warmup
  const double expect[] = {0.5, 1.0, 1.0, 0.1 + 0.9 * 0.8535533905932737, 0.55, 0.1 + 0.9 * 0.14644660940672624};
  for (int s = 0; s < 6; ++s) EXPECT_NEAR(learning_rate(o, s), expect[s], 1e-12) << "step " << s;
}

TEST(Optimizer, FactoryKeepsBiasesAndNormsUndecayed) {
  torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::LayerNorm(torch::nn::LayerNormOptions({3})));
  TrainOptions o;
  o.optimizer = "lamb";
  auto opt = make_optimizer(*net, o);
  ASSERT_EQ(opt->param_groups().size(), 2u);  // no position table here: no group for tables
  EXPECT_EQ(opt->param_groups()[0].params().size(), 1u);  // the weight matrix
  EXPECT_EQ(opt->param_groups()[1].params().size(), 3u);  // bias, LayerNorm weight and bias
  const auto& vectors = static_cast<LambOptions&>(opt->param_groups()[1].options());
  EXPECT_DOUBLE_EQ(vectors.weight_decay(), 0.0);
  EXPECT_FALSE(vectors.layer_adaptation());
  EXPECT_TRUE(static_cast<LambOptions&>(opt->param_groups()[0].options()).layer_adaptation());
  set_learning_rate(*opt, 0.123);
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].options().get_lr(), 0.123);
}

// LAMB's groups in a model with position tables: decayed matrices and undecayed position tables
// adapt; vectors take the plain Adam step. Checked on the first step against the naive reference:
// from a LayerNorm weight of norm sqrt(D), an adapted step would be sqrt(D) / ||r|| times larger.
TEST(Optimizer, LambAdaptsMatricesAndPositionTablesNotVectors) {
  struct Net : torch::nn::Module {
    Net() {
      dense = register_module("dense", torch::nn::Linear(4, 3));
      norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({3})));
      position_table = register_parameter("position_table", torch::randn({5, 3}));
    }
    torch::nn::Linear dense{nullptr};
    torch::nn::LayerNorm norm{nullptr};
    torch::Tensor position_table;
  };
  torch::manual_seed(5);
  Net net;
  TrainOptions o;
  o.optimizer = "lamb";
  o.lr = 0.01;
  auto opt = make_optimizer(net, o);
  ASSERT_EQ(opt->param_groups().size(), 3u);
  std::vector<std::vector<double>> before, grads;
  const auto params = net.named_parameters();
  for (const auto& p : params) {
    auto g = torch::randn_like(p.value());
    p.value().mutable_grad() = g;
    before.push_back(to_vec(p.value()));
    grads.push_back(to_vec(g));
  }
  opt->step();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& name = params[i].key();
    const bool matrix = params[i].value().dim() >= 2, decayed = matrix && name != "position_table";
    auto want = before[i];
    std::vector<double> m(want.size()), v(want.size());
    if (matrix) {
      naive_lamb_step(want, grads[i], m, v, 1, 0.01, o.adam_beta1, o.adam_beta2, o.adam_eps,
                      decayed ? o.weight_decay : 0.0);
    } else {  // trust = 1: the Adam step
      naive_lamb_step(want, grads[i], m, v, 1, 0.01, o.adam_beta1, o.adam_beta2, o.adam_eps, 0.0, /*adapt=*/false);
    }
    const auto got = to_vec(params[i].value());
    for (size_t j = 0; j < got.size(); ++j) EXPECT_NEAR(got[j], want[j], 1e-6) << name << "[" << j << "]";
  }
}

}  // namespace
}  // namespace rpe

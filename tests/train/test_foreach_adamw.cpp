// ForeachAdamW against LibTorch's own torch::optim::AdamW (the reference): bitwise the same
// parameters and state over several steps with two groups, a changing lr and a tensor that
// misses its gradient for a while; the state loads into AdamW and back; and a step dispatches
// a fixed number of ops per group instead of ~7 per tensor.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>
#include <limits>
#include <sstream>

#include "train/foreach_adamw.h"
#include "train/optim.h"
#include "util/op_counter.h"
#include "util/torch_compat.h"

namespace rpe {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

// Tensors of mixed shapes: matrices (decayed group) and vectors (not decayed).
std::vector<torch::Tensor> make_params(int n) {
  torch::manual_seed(11);
  std::vector<torch::Tensor> out;
  for (int i = 0; i < n; ++i)
    out.push_back((i % 3 == 2 ? torch::randn({5}) : torch::randn({7, 4 + i % 3})).set_requires_grad(true));
  return out;
}

std::vector<torch::Tensor> clone_params(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (const auto& p : ps) out.push_back(p.detach().clone().set_requires_grad(true));
  return out;
}

template <class Opt>
std::unique_ptr<Opt> make(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : ps) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  const auto opts = AdamWOptions(1e-2).betas({0.9, 0.98}).eps(1e-6);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<AdamWOptions>(AdamWOptions(opts).weight_decay(0.05)));
  groups.emplace_back(no_decay, std::make_unique<AdamWOptions>(AdamWOptions(opts).weight_decay(0.0)));
  return std::make_unique<Opt>(groups, opts);
}

void set_grads(std::vector<torch::Tensor>& a, std::vector<torch::Tensor>& b, int step) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (i == 4 && step >= 2 && step <= 3) {  // no gradient this step: skipped, not decayed
      a[i].mutable_grad() = torch::Tensor();
      b[i].mutable_grad() = torch::Tensor();
      continue;
    }
    const auto g = torch::randn_like(a[i]);
    a[i].mutable_grad() = g.clone();
    b[i].mutable_grad() = g.clone();
  }
}

void expect_same_state(torch::optim::Optimizer& a, torch::optim::Optimizer& b, const std::vector<torch::Tensor>& pa,
                       const std::vector<torch::Tensor>& pb) {
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_TRUE(torch::equal(pa[i], pb[i])) << "parameter " << i;
    const auto& sa = static_cast<AdamWParamState&>(*a.state().at(compat::optimizer_state_key(pa[i])));
    const auto& sb = static_cast<AdamWParamState&>(*b.state().at(compat::optimizer_state_key(pb[i])));
    EXPECT_EQ(sa.step(), sb.step()) << i;
    EXPECT_TRUE(torch::equal(sa.exp_avg(), sb.exp_avg())) << i;
    EXPECT_TRUE(torch::equal(sa.exp_avg_sq(), sb.exp_avg_sq())) << i;
  }
}

// A resumed run: `to` gets `from`'s parameter values and, through an archive, its optimizer state.
template <class Opt>
std::unique_ptr<Opt> resumed(torch::optim::Optimizer& from, const std::vector<torch::Tensor>& from_params,
                             std::vector<torch::Tensor>& to) {
  torch::serialize::OutputArchive out;
  from.save(out);
  std::stringstream buf;
  out.save_to(buf);
  for (size_t i = 0; i < to.size(); ++i) to[i].detach().copy_(from_params[i].detach());
  auto opt = make<Opt>(to);
  torch::serialize::InputArchive in;
  in.load_from(buf);
  opt->load(in);
  return opt;
}

TEST(ForeachAdamW, BitwiseEqualToLibTorchAdamW) {
  auto ours = make_params(12), ref = clone_params(ours);
  auto a = make<ForeachAdamW>(ours);
  auto b = make<torch::optim::AdamW>(ref);
  const auto start = ours[0].detach().clone();
  for (int step = 0; step < 6; ++step) {
    set_grads(ours, ref, step);
    set_learning_rate(*a, 1e-2 / (step + 1));  // the schedule changes lr between steps
    set_learning_rate(*b, 1e-2 / (step + 1));
    a->step();
    b->step();
    expect_same_state(*a, *b, ours, ref);
  }
  EXPECT_EQ(static_cast<AdamWParamState&>(*a->state().at(compat::optimizer_state_key(ours[4]))).step(), 4);  // 2 skipped
  EXPECT_GT((ours[0] - start).abs().max().item<double>(), 1e-3);  // the steps moved the weights
}

TEST(ForeachAdamW, StateLoadsIntoLibTorchAdamW) {
  auto ours = make_params(6), ref = clone_params(ours);
  auto a = make<ForeachAdamW>(ours);
  set_grads(ours, ref, 0);
  a->step();
  auto b = resumed<torch::optim::AdamW>(*a, ours, ref);
  set_grads(ours, ref, 1);
  a->step();
  b->step();
  expect_same_state(*a, *b, ours, ref);  // same moments and step count after the round trip
}

// The training loop's step: step_if(finite) on the device. The fused kernel rounds differently
// from LibTorch's op-by-op loop, so equal within float tolerance; a non-finite step (NaN
// gradients) leaves parameters, moments and step counts exactly as they were. Without the fused
// kernel (a LibTorch before 2.4 on the CPU) the same holds.
void check_step_if(bool fused) {
  auto ours = make_params(12), ref = clone_params(ours);
  auto a = make<ForeachAdamW>(ours);
  a->use_fused_kernel(fused);
  auto b = make<torch::optim::AdamW>(ref);
  for (int step = 0; step < 7; ++step) {
    set_grads(ours, ref, step);
    set_learning_rate(*a, 1e-2 / (step + 1));
    set_learning_rate(*b, 1e-2 / (step + 1));
    if (step == 5) {  // a non-finite step: NaN gradients, flag false; the reference does not step
      std::vector<torch::Tensor> before;
      for (auto& p : ours) {
        before.push_back(p.detach().clone());
        if (p.grad().defined()) p.mutable_grad().fill_(std::numeric_limits<float>::quiet_NaN());
      }
      a->step_if(torch::tensor(false));
      for (size_t i = 0; i < ours.size(); ++i) ASSERT_TRUE(torch::equal(ours[i], before[i])) << i;
      continue;
    }
    a->step_if(torch::tensor(true));
    b->step();
    for (size_t i = 0; i < ours.size(); ++i) ASSERT_TRUE(torch::allclose(ours[i], ref[i], 1e-5, 1e-7)) << step << " " << i;
  }
  a->sync_host_state();
  for (size_t i = 0; i < ours.size(); ++i) {
    const auto& sa = static_cast<AdamWParamState&>(*a->state().at(compat::optimizer_state_key(ours[i])));
    const auto& sb = static_cast<AdamWParamState&>(*b->state().at(compat::optimizer_state_key(ref[i])));
    EXPECT_EQ(sa.step(), sb.step()) << i;  // 6 (5 for the tensor without gradient twice), the skip not counted
    EXPECT_TRUE(torch::allclose(sa.exp_avg(), sb.exp_avg(), 1e-5, 1e-8)) << i;
    EXPECT_TRUE(torch::allclose(sa.exp_avg_sq(), sb.exp_avg_sq(), 1e-5, 1e-10)) << i;
  }
  EXPECT_EQ(static_cast<AdamWParamState&>(*a->state().at(compat::optimizer_state_key(ours[0]))).step(), 6);
}

TEST(ForeachAdamW, StepIfMatchesAdamWAndSkipsOnTheDevice) { check_step_if(/*fused=*/true); }

TEST(ForeachAdamW, StepIfWithoutTheFusedKernelMatchesAdamWAndSkips) { check_step_if(/*fused=*/false); }

// The fused kernel's presence is asked of the dispatcher (it has a CPU kernel from LibTorch 2.4).
TEST(TorchCompat, HasKernelAsksTheDispatcher) {
  const bool cpu_fused = !RPE_TORCH_BEFORE(4);
  EXPECT_EQ(compat::has_kernel("aten::_fused_adamw_", torch::kCPU), cpu_fused);
  EXPECT_TRUE(compat::has_kernel("aten::relu", torch::kCPU));
  EXPECT_FALSE(compat::has_kernel("aten::_cudnn_rnn", torch::kCPU));  // a CUDA kernel only
  EXPECT_FALSE(compat::has_kernel("aten::no_such_operator", torch::kCPU));
}

// Counts kept on the device reach the state when synced, and state loaded into the optimizer
// (a checkpoint) is what the next step_if continues from.
TEST(ForeachAdamW, StepIfCountsSurviveSaveAndLoad) {
  auto ours = make_params(4), ref = clone_params(ours);
  auto a = make<ForeachAdamW>(ours);
  for (int step = 0; step < 3; ++step) {
    set_grads(ours, ref, step);
    a->step_if(torch::tensor(true));
  }
  a->sync_host_state();
  auto b = resumed<ForeachAdamW>(*a, ours, ref);  // a resumed run: fresh optimizer, loaded state
  set_grads(ours, ref, 3);
  a->step_if(torch::tensor(true));
  b->step_if(torch::tensor(true));
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_TRUE(torch::equal(ours[i], ref[i])) << i;
  b->sync_host_state();
  EXPECT_EQ(static_cast<AdamWParamState&>(*b->state().at(compat::optimizer_state_key(ref[0]))).step(), 4);
}

template <class Opt>
int ops_per_step(int tensors) {
  auto ps = make_params(tensors), unused = clone_params(ps);
  auto opt = make<Opt>(ps);
  set_grads(ps, unused, 0);
  opt->step();  // the first step also creates the state
  TopLevelOpCounter counter;
  opt->step();
  return counter.ops();
}

TEST(ForeachAdamW, DispatchesPerGroupNotPerTensor) {
  const int ours = ops_per_step<ForeachAdamW>(60), ref = ops_per_step<torch::optim::AdamW>(60);
  EXPECT_LE(ours, 2 * 9);  // two groups x (decay, 2 + 2 moment ops, sqrt, div, add, addcdiv)
  EXPECT_EQ(ops_per_step<ForeachAdamW>(6), ours);  // independent of the number of tensors
  EXPECT_GE(ref, 60 * 6);  // LibTorch's loop: ~7 ops per tensor (also shows the counter counts)
  std::cout << "ops per step over 60 tensors: ForeachAdamW " << ours << ", torch::optim::AdamW " << ref << "\n";
}

}  // namespace
}  // namespace rpe

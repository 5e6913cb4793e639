// Attention dispatch of the whole model (BertModel::encode): the fused path (SDPA) equals the
// plain path for every method, with padding and without it (an undefined padding mask: no
// mask at all reaches SDPA, so FlashAttention is eligible); an all-false mask equals no mask;
// position-only biases (t5_bias, alibi) are built once per forward, [1, H, L, L].
//
// Tolerance: both paths compute the same real numbers in fp32 (eps = 2^-24 ~ 6e-8) in a
// different order (SDPA's blocked online softmax vs softmax over whole rows). A length-n
// reduction differs by about sqrt(n) eps relative (random rounding), n <= 64 here, and two
// layers chain about 12 such stages whose condition numbers (softmax, LayerNorm) are a few:
// 8 * 12 * 4 eps ~ 2.3e-5 of the largest value; measured <= 1e-6. We allow 1e-4 (~1700 eps)
// relative to the largest reference value of each tensor: a wrong mask or a missing bias
// changes values by O(1).
#include "reference.h"

#include "model/bert.h"
#include "test_models.h"

namespace rpe::test {
namespace {

constexpr int64_t kB = 3, kL = 40;

ModelOptions dispatch_options(const std::string& method) {
  auto o = small_model_options(method, {.vocab = 64, .hidden = 32, .heads = 4, .ffn = 64, .max_position = 64,
                                        .dropout = 0.0});
  o.init_std = 0.1;
  return o;
}

// The model and inputs drawn from seed 5, in this order: the weights (eval mode), ids [B, L],
// the output weighting r [B, L, D] and a padding mask hiding sequence 1's last 13 positions.
struct DispatchCase {
  BertModel model{nullptr};
  torch::Tensor ids, r, pad;
};

DispatchCase dispatch_case(const std::string& method) {
  torch::manual_seed(5);
  DispatchCase c{BertModel(dispatch_options(method)), {}, {}, {}};
  c.model->eval();
  c.ids = torch::randint(5, 64, {kB, kL}, torch::kLong);
  c.r = torch::randn({kB, kL, 32});
  c.pad = torch::zeros({kB, kL}, torch::kBool);
  c.pad[1].narrow(0, kL - 13, 13).fill_(true);
  return c;
}

std::vector<torch::Tensor> outputs_and_grads(BertModel& model, const torch::Tensor& ids, const torch::Tensor& pad,
                                             const torch::Tensor& r) {
  model->zero_grad();
  auto h = model->encode(ids, pad);
  (h * r).sum().backward();
  std::vector<torch::Tensor> out{h.detach()};
  for (auto& p : model->parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

// Largest |a - ref| of each tensor over its largest |ref|, or over 1% of the largest gradient
// entry when that is larger: the key biases' gradient is exactly zero (softmax ignores q.b_k),
// so both paths hold only fp32 rounding noise there.
double worst_rel(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& ref) {
  double worst = 0, largest = 0;
  for (size_t i = 1; i < ref.size(); ++i) largest = std::max(largest, ref[i].abs().max().item<double>());
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max({ref[i].abs().max().item<double>(), 0.01 * largest, 1e-30});
    worst = std::max(worst, (a[i] - ref[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

}  // namespace

TEST(AttentionDispatch, FusedEqualsPlainWholeModelWithAndWithoutPadding) {
  for (const auto& name : attention_method_names()) {
    auto [model, ids, r, padded] = dispatch_case(name);
    padded[2].narrow(0, kL - 1, 1).fill_(true);
    for (const auto& pad : {padded, torch::Tensor()}) {
      const std::string what = name + (pad.defined() ? " padded" : " unpadded (no mask)");
      model->set_fused_attention(false);
      const auto plain = outputs_and_grads(model, ids, pad, r);
      model->set_fused_attention(true);
      const auto fused = outputs_and_grads(model, ids, pad, r);
      EXPECT_LT(worst_rel(fused, plain), 1e-4) << what;
      if (!pad.defined()) {  // no mask = an all-false mask, on both paths
        for (bool f : {false, true}) {
          model->set_fused_attention(f);
          const auto all_false = outputs_and_grads(model, ids, torch::zeros({kB, kL}, torch::kBool), r);
          EXPECT_LT(worst_rel(f ? fused : plain, all_false), 1e-4) << what << (f ? " fused" : " plain");
        }
      }
    }
  }
}

TEST(AttentionDispatch, PositionOnlyBiasIsBuiltOncePerForwardAndBroadcastOverTheBatch) {
  for (const auto& name : attention_method_names()) {
    auto o = dispatch_options(name);
    o.layers = 3;
    BertModel model(o);
    auto ids = torch::randint(5, 64, {kB, kL}, torch::kLong);
    const int64_t before = model->position->bias_builds();
    for (bool fused : {false, true}) {
      model->set_fused_attention(fused);
      model->encode(ids, torch::Tensor());
    }
    const bool shared = name == "t5_bias" || name == "alibi";
    EXPECT_EQ(model->position->bias_builds() - before, shared ? 2 : 0) << name << ": one build per forward";
    auto bias = model->position->position_bias(kL, torch::kCPU, torch::kFloat);
    if (shared) {
      EXPECT_EQ(bias.sizes(), (std::vector<int64_t>{1, 4, kL, kL})) << name;
    } else {
      EXPECT_FALSE(bias.defined()) << name;
    }
  }
}

// CUDA's fused SDPA kernels (flash, memory-efficient, cuDNN) refuse a mask whose last
// dimension is strided and leave the slow math kernel, silently, while the CPU accepts it: every
// bias a method hands to SDPA must have unit stride along keys (t5_bias's was a permuted view).
TEST(AttentionDispatch, EveryBiasHasUnitStrideAlongKeys) {
  for (const auto& name : attention_method_names()) {
    BertModel model(dispatch_options(name));
    const auto shared = model->position->position_bias(kL, torch::kCPU, torch::kFloat);
    if (shared.defined()) {
      EXPECT_EQ(shared.stride(-1), 1) << name << " position_bias";
    }
    auto term = model->position->make_layer_term(0);
    const auto q = torch::randn({kB, 4, kL, 8}), k = torch::randn({kB, 4, kL, 8});
    const auto bias = term->score_bias(q, k);
    if (bias.defined()) {
      EXPECT_EQ(bias.stride(-1), 1) << name << " score_bias";
    }
  }
}

namespace {

// The GPU acceptance check (scripts/gpu_check.sh): on CUDA, fused, fp32 (TF32 off, LibTorch's
// default for matmuls) against the same weights in fp64 on the CPU (plain path), outputs and
// every gradient (the bias parameters of t5_bias, m4, shaw, ... included), per method. fp32
// against exact: eps 2^-24, the same chain as above -> 1e-4 of the largest value.
void whole_model_matches_fp64_cpu(const torch::Device& device) {
  for (const auto& name : attention_method_names()) {
    auto [model, ids, r, pad] = dispatch_case(name);
    model->to(torch::kFloat64);
    model->set_fused_attention(false);
    const auto exact = outputs_and_grads(model, ids, pad, r.to(torch::kFloat64));
    model->to(device, torch::kFloat32);
    model->set_fused_attention(true);
    auto got = outputs_and_grads(model, ids.to(device), pad.to(device), r.to(device));
    for (auto& t : got) t = t.cpu().to(torch::kFloat64);
    EXPECT_LT(worst_rel(got, exact), 1e-4) << name;
  }
}

}  // namespace

TEST(AttentionDispatch, WholeModelOnCudaMatchesFp64Cpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  whole_model_matches_fp64_cpu(torch::kCUDA);
}

// Its harness on the CPU: fused in fp32 there against the plain path in fp64.
TEST(AttentionDispatch, WholeModelInFp32MatchesFp64) { whole_model_matches_fp64_cpu(torch::kCPU); }

}  // namespace rpe::test

// Every method in bf16 and in fp16 autocast (train.precision: bf16 | fp16) against the same
// model in fp32, on CPU at L = 512 (the base_alibi preset's length): attention probabilities,
// the encoder output and the gradient of every parameter. A method whose positions, distances or bucket ids pass
// through bf16 fails here: bf16 holds integers exactly only up to 256, so at L = 512 about
// 44% of the |j - i| values computed in bf16 are wrong by up to 2 (ALiBi's old bias did this).
//
// Tolerances, from bf16's 8 significand bits (7 stored + 1 implicit): rounding to nearest
// changes a value z by at most u|z| with u = 2^-8 ~ 3.9e-3, and every matmul accumulates in
// fp32, so each bf16 stage adds a relative error of about u (a few u for a product of
// rounded factors).
//  * Probabilities, per query row, total variation TV(p, p') = 1/2 sum_j |p_j - p'_j|. For a
//    logit perturbation delta, TV <= E_p|delta - E_p delta| <= 2 E_p|delta|. The logits of
//    layer 0 are q k^T/sqrt(d) + bias with q, k rounded (u each, on an input x that is
//    itself a bf16-rounded LayerNorm output: u more) and the logit rounded (u): about 4u|z|
//    with |z| ~ 1 here; the bias rounded once more (u|b|, |b| up to ~2 where it still
//    carries weight); the probabilities rounded (u/2 in TV). Bound: 2*(4u + u*2) + u/2
//    ~ 12.5u; we allow 16u = 0.0625. A wrong distance of 1-2 on a head of slope 1/4 moves
//    logits by 0.25-0.5 (64u-128u), far outside it.
//  * Encoder output and gradients, relative Frobenius error ||a - a_ref|| / ||a_ref|| (never
//    elementwise: a gradient entry near 0 has no relative precision). Two layers forward and
//    backward chain about 30 bf16 roundings; independent errors add in quadrature,
//    sqrt(30)u ~ 5.5u, and LayerNorm's division by a small standard deviation can double it:
//    we allow 12u ~ 0.047 for the output and 16u ~ 0.0625 for gradients (backward has a second
//    chain of roundings through the saved bf16 activations).
// Measured (CPU, this seed): TV <= 1.3u, output <= 1u, gradients <= 5.2u for every method
// and both paths. ALiBi with its old bf16 positions: TV 39.5u, gradients 30.6u (fails).
//
// fp16 (10 stored significand bits): the same derivation with u = 2^-11 ~ 4.9e-4, hence the
// same multiples of u. Its range (max 65504) is not at stake at these magnitudes; the loss
// scaling that keeps small gradients from underflowing is tested in train/test_loss_scaler.cpp
// (here the loss is O(1) and unscaled). Measured (CPU, this seed): TV <= 1.2u, output <= 1.1u,
// gradients <= 4.0u for every method and both paths.
#include "reference.h"

#include <cmath>

#include "model/attention/registry.h"
#include "model/bert.h"
#include "model/encoder.h"
#include "train/precision.h"

namespace rpe::test {
namespace {

constexpr int64_t kLength = 512, kBatch = 2;

ModelOptions half_options(const std::string& method, int64_t max_relative = 0, bool shaw_values = false,
                         int64_t position_buckets = 0) {
  ModelOptions o;
  o.vocab_size = 64;
  o.hidden = 16;
  o.heads = 4;  // ALiBi slopes 1/4 .. 1/256
  o.layers = 2;
  o.ffn = 32;
  o.max_position = kLength;
  o.dropout = 0.0;
  o.attention_dropout = 0.0;
  o.init_std = 0.2;  // logits of order 1, so content scores matter as much as position terms
  o.attention.method = method;
  o.attention.max_relative = max_relative;
  o.attention.shaw_values = shaw_values;
  o.attention.position_buckets = position_buckets;
  return o;
}

struct Pass {
  torch::Tensor hidden, probs;       // [B, L, D], [B, H, L, L] of layer 0 (fp32 copies)
  std::vector<torch::Tensor> grads;  // one per parameter, in named_parameters order
};

// dtype: the autocast type, kFloat for the fp32 reference.
Pass run_model(BertModel& model, const torch::Tensor& ids, const torch::Tensor& pad, const torch::Tensor& r,
               at::ScalarType dtype, bool fused) {
  model->zero_grad();
  model->set_fused_attention(fused);
  model->capture_attention(fused ? -1 : 0);  // capture takes the plain path
  Pass out;
  torch::Tensor loss;
  {
    AutocastGuard autocast(ids.device(), dtype);
    out.hidden = model->encode(ids, pad);
    loss = (out.hidden.to(torch::kFloat) * r).sum();
  }
  loss.backward();
  out.hidden = out.hidden.detach().to(torch::kFloat);
  if (!fused) out.probs = model->captured_attention().to(torch::kFloat);
  for (auto& p : model->parameters())
    out.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

// ||a - ref|| / max(||ref||, floor): relative to the reference's norm, never elementwise.
double rel_error(const torch::Tensor& a, const torch::Tensor& ref, double floor = 0) {
  return (a - ref).norm().item<double>() / std::max(ref.norm().item<double>(), floor);
}

// Every method in `dtype` autocast against fp32, within the bounds above for unit roundoff u.
// max_relative > 0: the clipped methods only, clipped there (their gather and skew paths).
// shaw_values: Shaw with its value term alone (unfused: the probabilities summed into slots).
// buckets > 0: deberta alone, with that many log buckets (a bucket's gradient sums many distances).
void every_method_matches_fp32(at::ScalarType dtype, double u, const torch::Device& device = torch::kCPU,
                               int64_t max_relative = 0, bool shaw_values = false, int64_t buckets = 0) {
  int64_t checked = 0, expected = 0;
  for (const auto& name : attention_method_names()) {
    if (max_relative > 0 && !method_info(name).clipped) continue;
    if (shaw_values && name != "shaw") continue;
    if (buckets > 0 && name != "deberta") continue;
    ++expected;
    torch::manual_seed(11);
    BertModel model(half_options(name, max_relative, shaw_values, buckets));
    model->to(device);
    model->eval();  // no dropout (set to 0 anyway); autograd still records
    auto ids = torch::randint(5, 64, {kBatch, kLength}, torch::kLong).to(device);
    auto pad = torch::zeros({kBatch, kLength}, torch::kBool);
    pad[1].narrow(0, kLength - 100, 100).fill_(true);  // one padded sequence, one full one
    pad = pad.to(device);
    auto r = torch::randn({kBatch, kLength, 16}).to(device);
    const bool fusable = model->layers[0]->as<EncoderLayerImpl>()->attention->position->fusable();
    for (bool fused : {false, true}) {
      if (fused && !fusable) continue;
      const Pass ref = run_model(model, ids, pad, r, at::kFloat, fused);
      const Pass got = run_model(model, ids, pad, r, dtype, fused);
      const std::string what = name + (max_relative > 0 ? " k=" + std::to_string(max_relative) : "") +
                               (buckets > 0 ? " " + std::to_string(buckets) + " buckets" : "") +
                               (fused ? " (fused, " : " (plain, ") + c10::toString(dtype) + ", " + device.str() + ")";
      if (!fused) {
        // Rows of real queries only (padded queries attend too, but nothing reads them).
        auto tv = 0.5 * (got.probs - ref.probs).abs().sum(-1);  // [B, H, L]
        auto keep = pad.logical_not().view({kBatch, 1, kLength}).expand_as(tv);
        const double max_tv = tv.masked_select(keep).max().item<double>();
        EXPECT_LT(max_tv, 16 * u) << what << ": attention row total variation";
      }
      const double out_err = rel_error(got.hidden, ref.hidden);
      EXPECT_LT(out_err, 12 * u) << what << ": encoder output";
      EXPECT_GT(out_err, 0.01 * u) << what << ": no rounding at all; did autocast run?";
      double total = 0;
      for (const auto& g : ref.grads) total += g.square().sum().item<double>();
      const auto names = model->named_parameters().keys();
      for (size_t i = 0; i < ref.grads.size(); ++i) {
        // Relative to the parameter's own gradient, or to 1% of the whole gradient's norm when
        // that is larger: the key biases' gradient is exactly zero (softmax ignores q.b_k, the
        // same for every key), so fp32 and the half type hold only rounding noise of the backward there.
        const double e = rel_error(got.grads[i], ref.grads[i], 0.01 * std::sqrt(total));
        EXPECT_LT(e, 16 * u) << what << ": gradient of " << names[i];
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, expected);
  EXPECT_GE(checked, shaw_values || buckets > 0 ? 1 : max_relative > 0 ? 5 : static_cast<int64_t>(attention_method_names().size()));
}

}  // namespace

TEST(Bf16Autocast, EveryMethodMatchesFp32AtLength512) { every_method_matches_fp32(at::kBFloat16, 1.0 / 256); }

TEST(Fp16Autocast, EveryMethodMatchesFp32AtLength512) { every_method_matches_fp32(at::kHalf, 1.0 / 2048); }

// Clipped at k = 8 < L - 1: the relative methods' gather and skew paths (the default k = n - 1
// reaches neither at this length) in bf16.
TEST(Bf16Autocast, ClippedMethodsMatchFp32AtLength512) {
  every_method_matches_fp32(at::kBFloat16, 1.0 / 256, torch::kCPU, 8);
}

// Shaw's value term sums each row's probabilities into its 2k + 1 slots: at k = 8 a clipped end's
// slot holds ~500 of them, which must be summed in fp32 (on CUDA, scatter_add's atomic adds round
// in the tensor's type; the probabilities are bf16 under autocast).
TEST(Bf16Autocast, ShawValuesMatchFp32AtLength512) {
  every_method_matches_fp32(at::kBFloat16, 1.0 / 256, torch::kCPU, 8, /*shaw_values=*/true);
}

// DeBERTa's log buckets (64, ending at k = 511): each far bucket's table row gathers the
// gradients of hundreds of distances, summed in fp32 before the autocast cast.
TEST(Bf16Autocast, DebertaLogBucketsMatchFp32AtLength512) {
  every_method_matches_fp32(at::kBFloat16, 1.0 / 256, torch::kCPU, 0, false, /*buckets=*/64);
}

// On a GPU the index steps' backward adds with atomics: in bf16 each add rounds, and a gradient
// summed over thousands of terms (T5's far buckets, a clipped table's edge rows, m1/m2's slots)
// drifts by percents. The tables are indexed in fp32 for that; this holds them to the bounds.
TEST(Bf16Autocast, CudaEveryMethodMatchesFp32AtLength512) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  every_method_matches_fp32(at::kBFloat16, 1.0 / 256, torch::kCUDA);
  every_method_matches_fp32(at::kBFloat16, 1.0 / 256, torch::kCUDA, 8);
  every_method_matches_fp32(at::kBFloat16, 1.0 / 256, torch::kCUDA, 8, /*shaw_values=*/true);
  every_method_matches_fp32(at::kBFloat16, 1.0 / 256, torch::kCUDA, 0, false, /*buckets=*/64);
}

// The plain path's attention probabilities, which its softmax keeps for backward, stay in the
// autocast type (summed in fp32): an fp32 [B, H, L, L] copy per layer would be its largest saved
// tensor (m1/m2 peaked at 18.5 GB on the H100 at L = 512, against m4's 10.4). Within the bounds
// of EveryMethodMatchesFp32AtLength512 all the same (above).
// m1's logits are fp32 (its gates), m4's bf16 (on CUDA autocast's softmax would make them fp32;
// the CPU's keeps them): on a GPU (scripts/gpu_check.sh runs Bf16Autocast.*) both cases.
TEST(Bf16Autocast, ThePlainPathKeepsItsProbabilitiesInTheAutocastType) {
  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available()) devices.emplace_back(torch::kCUDA);
  for (const auto& device : devices)
    for (const std::string method : {"m1", "m4"})
      for (const auto dtype : {at::kBFloat16, at::kHalf}) {
        const std::string what = method + " " + c10::toString(dtype) + " on " + device.str();
        torch::manual_seed(5);
        BertModel model(half_options(method));
        model->to(device);
        model->set_fused_attention(false);
        model->capture_attention(0);  // the probabilities the softmax returned, and keeps for backward
        auto ids = torch::randint(5, 64, {kBatch, 32}, torch::kLong).to(device);
        {
          AutocastGuard autocast(device, dtype);
          model->encode(ids, {});
        }
        EXPECT_EQ(model->captured_attention().scalar_type(), dtype) << what;
        const auto rows = model->captured_attention().to(torch::kFloat).sum(-1);
        EXPECT_LT((rows - 1).abs().max().item<double>(), dtype == at::kHalf ? 1e-2 : 5e-2) << what << ": rows sum to 1";
      }
}

// The gates of m1, m2 and m3 start at 1 (m3: 1 + N(0, init_std)), and all they say about
// positions is their deviation from it, finer than bf16's spacing there (2^-7): a gate rounded
// to bf16 loses it. Under bf16 autocast a gate of 1.003 (bf16: exactly 1) must scale the
// content scores by 1.003, up to the scores' own rounding (unbiased, averaged out here).
TEST(Bf16Autocast, GatesKeepDeviationsFinerThanBf16) {
  for (const std::string name : {"m1", "m2", "m3"}) {
    ModelOptions o = half_options(name);
    o.max_position = 64;
    torch::manual_seed(3);
    BertModel model(o);
    auto term = model->layers[0]->as<EncoderLayerImpl>()->attention->position;
    auto gate = term->position_weights();
    auto q = torch::randn({2, 4, 64, 4}).to(torch::kBFloat16), k = torch::randn({2, 4, 64, 4}).to(torch::kBFloat16);
    auto scores = [&](double fill) {
      torch::NoGradGuard no_grad;
      gate.fill_(fill);
      AutocastGuard autocast(torch::kCPU, at::kBFloat16);
      return term->content_scores(q, k).to(torch::kDouble);  // [B, H, L, L]
    };
    const auto one = scores(1.0), off = scores(1.003);
    const double ratio = (off * one).sum().item<double>() / one.square().sum().item<double>();
    EXPECT_NEAR(ratio, 1.003, 3e-4) << name;
  }
}

// The backward of an index step sums, per table entry, the gradients of every score that reads
// it. Under bf16 autocast that sum must run in fp32: with scores and upstream gradients exact in
// bf16 (small integers, multiples of 1/64), fp32 sums are exact, so the tables' gradients must
// equal those of the fp32 model bit for bit (a bf16 sum rounds them: T5's far buckets sum
// thousands of terms). T5's bias (built once, shared by the layers) and m1/m2's gates.
TEST(Bf16Autocast, TableGradientsAreSummedInFp32) {
  constexpr int64_t L = 300;
  for (const std::string name : {"t5_bias", "m1", "m2"}) {
    ModelOptions o = half_options(name);
    o.max_position = L;
    torch::manual_seed(4);
    BertModel model(o);
    auto q = torch::randint(-1, 2, {2, 4, L, 4}).to(torch::kFloat), k = torch::randint(-1, 2, {2, 4, L, 4}).to(torch::kFloat);
    auto g = torch::randint(-64, 65, {2, 4, L, L}).to(torch::kFloat) / 64.0;  // exact in bf16
    auto table_grad = [&](at::ScalarType dtype) {
      model->zero_grad();
      torch::Tensor out;
      {
        AutocastGuard autocast(torch::kCPU, dtype);
        out = name == "t5_bias" ? model->position->position_bias(L, torch::kCPU, dtype).expand({2, -1, L, L})
                                : model->layers[0]->as<EncoderLayerImpl>()->attention->position->content_scores(
                                      q.to(dtype), k.to(dtype));
      }
      out.backward(g.to(out.scalar_type()));
      auto params = model->named_parameters();
      return (name == "t5_bias" ? params["position.relative_attention_bias"] : params["layers.0.attention.position.w"])
          .grad()
          .clone();
    };
    const auto fp32 = table_grad(at::kFloat), bf16 = table_grad(at::kBFloat16);
    ASSERT_EQ(bf16.scalar_type(), torch::kFloat) << name;
    EXPECT_TRUE(torch::equal(bf16, fp32)) << name << ": max |diff| " << (bf16 - fp32).abs().max().item<double>();
  }
}

}  // namespace rpe::test

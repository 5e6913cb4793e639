// Activation checkpointing (src/model/recompute.h): a BERT whose layers, or attention cores,
// are recomputed in backward gives the loss and gradients of the plain model with the same
// random draws (dropout on, so a recomputation that drew other masks fails), for every method;
// under bf16 autocast as well; leaves the random generators where the plain backward leaves
// them; and keeps less alive between forward and backward.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "model/attention/registry.h"
#include "model/bert.h"
#include "test_models.h"
#include "train/precision.h"

namespace {

using torch::Tensor;

struct Batch {
  Tensor ids, pad, g;  // [B, L] tokens, [B, L] padding (second sequence's last 3), [B, L, D] output weights
};

Batch batch(int64_t B, int64_t L, int64_t D) {
  torch::manual_seed(11);
  auto pad = torch::zeros({B, L}, torch::kBool);
  pad[B - 1].narrow(0, L - 3, 3).fill_(true);
  return {torch::randint(5, 50, {B, L}, torch::kLong), pad, torch::randn({B, L, D})};
}

// Every node of the graph behind `t`, by name, one a line.
std::string node_names(const Tensor& t) {
  std::string names;
  std::vector<torch::autograd::Node*> todo{t.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    auto* n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n).second) continue;
    names += n->name() + "\n";
    for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
  }
  return names;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct Outcome {
  double loss;
  std::vector<Tensor> grads;  // every parameter's, in registration order (zeros where none)
  Tensor next_draw;           // the device generator's next draws after backward
  std::string nodes;          // the autograd nodes' names, from the encoder's output back
};

// One forward (dropout on, seed 5) and backward of sum(encode(ids) * g), on the model's device.
Outcome step(rpe::BertModel& model, const Batch& cpu_batch, rpe::Recompute recompute,
             at::ScalarType autocast = at::kFloat) {
  const auto device = model->word_embeddings->weight.device();
  const Batch b{cpu_batch.ids.to(device), cpu_batch.pad.to(device), cpu_batch.g.to(device)};
  model->zero_grad();
  model->train();
  model->set_activation_checkpointing(recompute);
  torch::manual_seed(5);
  Tensor loss;
  std::string nodes;
  {
    const rpe::AutocastGuard guard(device, autocast);
    auto hidden = model->encode(b.ids, b.pad);  // [B, L, D]
    nodes = node_names(hidden);
    loss = (hidden.to(torch::kFloat) * b.g).sum();
  }
  loss.backward();
  // The next draws of the device's generator, where the dropout masks came from.
  Outcome out{loss.item<double>(), {}, torch::rand({8}, torch::TensorOptions().device(device)).cpu(), nodes};
  for (const auto& p : model->parameters())
    out.grads.push_back(p.grad().defined() ? p.grad().cpu() : torch::zeros_like(p).cpu());
  return out;
}

// Largest difference between two runs' gradients relative to the largest gradient value.
double worst_gradient(const Outcome& a, const Outcome& b) {
  double worst = 0, scale = 1e-12;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    worst = std::max(worst, (a.grads[i] - b.grads[i]).abs().max().item<double>());
    scale = std::max(scale, b.grads[i].abs().max().item<double>());
  }
  return worst / scale;
}

rpe::BertModel small_model(const std::string& method, int64_t layers = 3) {
  torch::manual_seed(3);
  return rpe::BertModel(rpe::test::small_model_options(method, {.layers = layers, .dropout = 0.1}));
}

}  // namespace

TEST(Recompute, GradientsAndDrawsEqualThePlainBackwardForEveryMethod) {
  using rpe::Recompute;
  const Batch b = batch(2, 12, 16);
  for (const auto& method : rpe::attention_method_names()) {
    auto model = small_model(method);
    const Outcome plain = step(model, b, Recompute::none);
    EXPECT_EQ(count(plain.nodes, "RecomputedFunction"), 0) << method;
    for (const auto what : {Recompute::layers, Recompute::attention}) {
      const std::string name = method + (what == Recompute::layers ? ", layers" : ", attention");
      const Outcome recomputed = step(model, b, what);
      EXPECT_EQ(count(recomputed.nodes, "RecomputedFunction"), 3) << name << ": one a layer";
      EXPECT_EQ(recomputed.loss, plain.loss) << name;  // the same forward pass, bit for bit
      // The same arithmetic; only the order in which a shared bias's per-layer gradients are summed may differ.
      EXPECT_LT(worst_gradient(recomputed, plain), 1e-6) << name;
      EXPECT_TRUE(torch::equal(recomputed.next_draw, plain.next_draw)) << name << ": the generator moved on differently";
    }
  }
}

// The recomputation runs under the autocast state of the forward pass it repeats: in fp32 its
// gradients would be ~1e-3 away from the bf16 pass's.
TEST(Recompute, Bf16AutocastIsReenteredInBackward) {
  const Batch b = batch(2, 12, 16);
  for (const std::string method : {"absolute", "m4"}) {
    auto model = small_model(method);
    const Outcome plain = step(model, b, rpe::Recompute::none, at::kBFloat16);
    const Outcome fp32 = step(model, b, rpe::Recompute::none);
    EXPECT_GT(worst_gradient(fp32, plain), 1e-4) << method << ": bf16 and fp32 too close to tell apart";
    for (const auto what : {rpe::Recompute::layers, rpe::Recompute::attention}) {
      const Outcome recomputed = step(model, b, what, at::kBFloat16);
      EXPECT_EQ(recomputed.loss, plain.loss) << method;
      EXPECT_LT(worst_gradient(recomputed, plain), 1e-6) << method;
    }
  }
}

namespace {

// On a GPU (scripts/gpu_check.sh runs it): fused attention (SDPA's dropout), the fused add & norm
// and the CUDA generator's replay, under bf16 autocast. Same kernels both passes, so the loss is
// the same; gradients within bf16 noise of atomics-summed kernels (other dropout masks would
// move them by tens of percent).
void fused_bf16_recompute_equals_the_plain_backward(const torch::Device& device) {
  const Batch b = batch(2, 64, 64);
  for (const std::string method : {"absolute", "m4", "t5_bias"}) {
    torch::manual_seed(3);
    rpe::BertModel model(rpe::test::small_model_options(
        method, {.hidden = 64, .layers = 3, .heads = 4, .ffn = 128, .max_position = 64, .dropout = 0.1}));
    model->to(device);
    model->set_fused_attention(true);
    const Outcome plain = step(model, b, rpe::Recompute::none, at::kBFloat16);
    for (const auto what : {rpe::Recompute::layers, rpe::Recompute::attention}) {
      const Outcome recomputed = step(model, b, what, at::kBFloat16);
      EXPECT_NEAR(recomputed.loss, plain.loss, 1e-6 * std::abs(plain.loss)) << method;
      EXPECT_LT(worst_gradient(recomputed, plain), 2e-2) << method;
      EXPECT_TRUE(torch::equal(recomputed.next_draw, plain.next_draw)) << method;
    }
  }
}

}  // namespace

TEST(Recompute, CudaGradientsEqualThePlainBackward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  fused_bf16_recompute_equals_the_plain_backward(torch::kCUDA);
}

// The same harness on the CPU: its fused attention and generator, under bf16 autocast.
TEST(Recompute, FusedBf16GradientsEqualThePlainBackwardOnTheCpu) {
  fused_bf16_recompute_equals_the_plain_backward(torch::kCPU);
}

// Without autograd (evaluation) or in eval mode nothing is recomputed: the plain layers run.
TEST(Recompute, EvaluationRunsThePlainLayers) {
  const Batch b = batch(2, 12, 16);
  auto model = small_model("m4");
  for (const auto what : {rpe::Recompute::layers, rpe::Recompute::attention}) {
    model->set_activation_checkpointing(what);
    model->eval();
    EXPECT_EQ(count(node_names(model->encode(b.ids, b.pad)), "RecomputedFunction"), 0);
    model->train();
    const torch::NoGradGuard no_grad;
    EXPECT_FALSE(model->encode(b.ids, b.pad).requires_grad());
  }
}

// The backward replays the forward as it ran, dropout included: a model switched to eval mode
// in between would replay it without dropout and give other gradients silently; it is refused.
TEST(Recompute, AModeChangeBeforeTheBackwardIsRefused) {
  const Batch b = batch(2, 12, 16);
  auto model = small_model("m4");
  for (const auto what : {rpe::Recompute::layers, rpe::Recompute::attention}) {
    model->set_activation_checkpointing(what);
    model->train();
    auto out = model->encode(b.ids, b.pad);
    model->eval();
    try {
      (out * b.g).sum().backward();
      ADD_FAILURE() << "no error";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find("left training mode before its backward"), std::string::npos) << e.what();
    }
  }
}

// What the graph keeps between forward and backward: with whole layers recomputed, the layers'
// inputs ([B, L, D] each) instead of their activations: under a fifth; with the attention cores,
// q, k, v instead of the [B, H, L, L] scores, probabilities, dropout masks and m4's relative
// terms, which dominate at L = 64 and D = 32: under half.
TEST(Recompute, KeepsAFractionOfTheActivations) {
#if !defined(__GLIBC__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "measures the heap with glibc's mallinfo2 (AddressSanitizer's allocator reports none)";
#else
  torch::manual_seed(2);
  const int64_t B = 4, L = 64, D = 32;
  auto ids = torch::randint(5, 50, {B, L}, torch::kLong);
  auto g = torch::randn({B, L, D});
  auto model = rpe::BertModel(rpe::test::small_model_options(
      "m4", {.hidden = D, .layers = 4, .heads = 4, .ffn = 64, .max_position = L, .dropout = 0.1}));
  model->train();
  auto live = [] {
    const auto m = mallinfo2();
    return static_cast<double>(m.uordblks + m.hblkhd);
  };
  using rpe::Recompute;
  std::map<Recompute, double> kept;
  for (const auto what : {Recompute::none, Recompute::attention, Recompute::layers}) {
    model->set_activation_checkpointing(what);
    const double before = live();
    auto loss = (model->encode(ids, {}) * g).sum();
    kept[what] = live() - before;  // the graph's saved tensors and the output
    loss.backward();
  }
  // Measured here: 6.7 MB plain, 2.1 MB attention, 0.23 MB layers.
  const std::string sizes = "bytes kept: plain " + std::to_string(kept[Recompute::none]) + ", attention " +
                            std::to_string(kept[Recompute::attention]) + ", layers " +
                            std::to_string(kept[Recompute::layers]);
  EXPECT_LT(kept[Recompute::layers], 0.2 * kept[Recompute::none]) << sizes;
  EXPECT_LT(kept[Recompute::attention], 0.5 * kept[Recompute::none]) << sizes;
#endif
}

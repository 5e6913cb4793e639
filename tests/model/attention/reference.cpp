// Naive multi-head attention reference for the position-method tests (see reference.h).
#include "reference.h"

#include "test_models.h"

namespace rpe::test {

ModelOptions tiny_options(const std::string& method, int64_t max_relative, bool shared) {
  auto o = small_model_options(method, {.hidden = 8, .ffn = 16, .dropout = 0.0});
  o.attention.max_relative = max_relative;
  o.attention.share_across_heads = shared;
  return o;
}

torch::Tensor Layer::param(const std::string& name) {
  auto params = attention->position->named_parameters();
  EXPECT_TRUE(params.contains(name)) << "no layer parameter " << name;
  return params[name];
}

torch::Tensor Layer::method_param(const std::string& name) {
  auto params = method->named_parameters();
  EXPECT_TRUE(params.contains(name)) << "no model-level parameter " << name;
  return params[name];
}

Layer make_layer(const ModelOptions& options, uint64_t seed) {
  torch::manual_seed(seed);
  Layer layer;
  layer.method = make_position_method(options);
  layer.attention = SelfAttention(options, layer.method->make_layer_term(0));
  // Random, non-trivial values everywhere (biases too), so every term matters.
  torch::NoGradGuard no_grad;
  for (auto& p : layer.attention->parameters()) p.add_(torch::randn_like(p) * 0.3);
  for (auto& p : layer.method->parameters()) p.add_(torch::randn_like(p) * 0.3);
  layer.method->to(torch::kFloat64);
  layer.attention->to(torch::kFloat64);
  layer.method->eval();
  layer.attention->eval();
  return layer;
}

torch::Tensor padding_mask(int64_t B, int64_t L) {
  auto pad = torch::zeros({B, L}, torch::kBool);
  const int64_t n_pad = L >= 2 ? std::max<int64_t>(1, L / 3) : 0;
  if (B > 1 && n_pad > 0) pad[1].narrow(0, L - n_pad, n_pad).fill_(true);
  return pad;
}

namespace {

struct RefOut {
  torch::Tensor out, probs;
};

RefOut reference_forward(Layer& layer, const torch::Tensor& x, const torch::Tensor& pad, const RefSpec& spec) {
  const int64_t B = x.size(0), L = x.size(1), D = x.size(2), H = layer.method->options().heads, d = D / H;
  auto split = [&](const torch::Tensor& t) { return t.view({B, L, H, d}).transpose(1, 2); };
  auto& a = layer.attention;
  Qkv qkv{split(a->query->forward(x)), split(a->key->forward(x)), split(a->value->forward(x))};
  if (spec.transform) spec.transform(qkv.q, qkv.k);
  // e_ij pair by pair, as the equation reads.
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < L; ++i) {
    std::vector<torch::Tensor> row;
    for (int64_t j = 0; j < L; ++j) {
      auto e = spec.score(qkv, i, j);                                                   // [B, H]
      auto is_pad = pad.select(1, j).view({B, 1}).expand({B, H});
      row.push_back(torch::where(is_pad, torch::full_like(e, -INFINITY), e));
    }
    rows.push_back(torch::stack(row, -1));  // [B, H, L]
  }
  auto logits = torch::stack(rows, -2);  // [B, H, L, L]
  auto probs = torch::softmax(logits, -1);
  std::vector<torch::Tensor> z;
  for (int64_t i = 0; i < L; ++i) {
    auto zi = torch::zeros({B, H, d}, x.options());
    for (int64_t j = 0; j < L; ++j) {
      auto vj = qkv.v.select(2, j);  // [B, H, d]
      if (spec.value) vj = vj + spec.value(i, j);
      zi = zi + probs.select(2, i).select(2, j).unsqueeze(-1) * vj;
    }
    z.push_back(zi);
  }
  auto context = torch::stack(z, 2);  // [B, H, L, d]
  return {a->output->forward(context.transpose(1, 2).reshape({B, L, D})), probs};
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.defined() && !b.defined()) return 0.0;
  if (!a.defined()) return b.abs().max().item<double>();
  if (!b.defined()) return a.abs().max().item<double>();
  if (a.numel() == 0) return 0.0;
  return (a - b).abs().max().item<double>();
}

}  // namespace

void expect_matches_reference(Layer& layer, int64_t L, const RefSpec& spec, const std::string& what, double tol) {
  const int64_t B = 2, D = layer.method->options().hidden;
  torch::manual_seed(100 + L);
  auto x = torch::randn({B, L, D}, torch::kFloat64).requires_grad_(true);
  auto pad = padding_mask(B, L);

  std::vector<torch::Tensor> inputs{x};
  std::vector<std::string> names{"x"};
  for (const auto& p : layer.attention->named_parameters()) inputs.push_back(p.value()), names.push_back(p.key());
  for (const auto& p : layer.method->named_parameters()) inputs.push_back(p.value()), names.push_back("method." + p.key());

  auto module_in = x;
  auto pos = layer.method->input_embeddings(L);
  if (pos.defined()) module_in = x + pos.unsqueeze(0);
  layer.attention->capture = true;
  auto out = layer.attention->forward(module_in, pad);
  auto probs = layer.attention->captured_probs;
  layer.attention->capture = false;

  auto ref_in = spec.positions.defined() ? x + spec.positions.unsqueeze(0) : x;
  auto ref = reference_forward(layer, ref_in, pad, spec);

  EXPECT_LE(max_diff(out, ref.out), tol) << what << ": outputs";
  EXPECT_LE(max_diff(probs, ref.probs), tol) << what << ": probabilities";
  // Padded keys get exactly zero probability.
  auto pad_cols = pad.view({B, 1, 1, L}).expand_as(probs);
  EXPECT_EQ(probs.masked_select(pad_cols).abs().sum().item<double>(), 0.0) << what << ": padded keys";

  auto r = torch::randn_like(out);
  auto g_mod = torch::autograd::grad({(out * r).sum()}, inputs, {}, false, false, /*allow_unused=*/true);
  auto g_ref = torch::autograd::grad({(ref.out * r).sum()}, inputs, {}, false, false, /*allow_unused=*/true);
  for (size_t n = 0; n < inputs.size(); ++n)
    EXPECT_LE(max_diff(g_mod[n], g_ref[n]), tol) << what << ": gradient of " << names[n];
}

}  // namespace rpe::test

// Test harness for position methods: a naive reference of multi-head attention that loops
// over (i, j) with a method-specific score e_ij (and optional value vector), written in
// fp64 with autograd, compared with the real SelfAttention on outputs, attention
// probabilities and the gradients of the input and every parameter.
#pragma once
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "model/attention/position_method.h"
#include "model/attention/registry.h"
#include "model/attention/self_attention.h"
#include "util/errors.h"

namespace rpe::test {

// Tiny model options for attention tests: D = 8, H = 2 (d = 4), n = 16, no dropout.
ModelOptions tiny_options(const std::string& method, int64_t max_relative = 0, bool shared = false);

// One attention layer (layer term 0 of `method`) in fp64, eval mode.
struct Layer {
  std::shared_ptr<PositionMethodImpl> method;
  SelfAttention attention{nullptr};
  torch::Tensor param(const std::string& name);         // a layer-term parameter, e.g. "w"
  torch::Tensor method_param(const std::string& name);  // a model-level parameter
};
Layer make_layer(const ModelOptions& options, uint64_t seed = 7);

// q, k, v of the layer's own projections, [B, H, L, d] (after the method's transform_qk).
struct Qkv {
  torch::Tensor q, k, v;
};
// e_ij for all (b, h): [B, H], already scaled (the full logit before masking).
using PairScore = std::function<torch::Tensor(const Qkv&, int64_t i, int64_t j)>;
// Vector added to v_j in z_i = sum_j a_ij (v_j + extra_ij): broadcastable to [B, H, d].
using PairValue = std::function<torch::Tensor(int64_t i, int64_t j)>;
// Replaces q, k before scoring (RoPE), as the equation reads it; default identity.
using QkTransform = std::function<void(torch::Tensor& q, torch::Tensor& k)>;

struct RefSpec {
  PairScore score;
  PairValue value;            // optional
  QkTransform transform;      // optional
  torch::Tensor positions;    // optional [L, D] added to x before the layer (absolute, sinusoid)
};

// Batch of B = 2: sequence 1 has its last L/3 tokens (at least one when L >= 2) padded.
torch::Tensor padding_mask(int64_t B, int64_t L);

// Runs module and reference on random x [2, L, D]; expects max abs difference <= tol for
// outputs, probabilities and all gradients. `what` names the case in failure messages.
void expect_matches_reference(Layer& layer, int64_t L, const RefSpec& spec, const std::string& what,
                              double tol = 1e-10);

// clip(x, k) = max(-k, min(k, x)) (eq. 9).
inline int64_t clip(int64_t x, int64_t k) { return std::max(-k, std::min(k, x)); }

// The lengths, clipping distances (0 = default n - 1 = 15, below L = 33) and sharing the
// exact tests cover.
inline const std::vector<int64_t> kLengths{1, 2, 7, 33};
inline const std::vector<int64_t> kClips{1, 3, 40, 0};

}  // namespace rpe::test

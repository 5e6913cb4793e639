// The one small interface every position method implements.
//
// Notation (README): B batch, L length, H heads, d head size, D = H*d model width,
// n = model.max_position, k = clipping distance. Scores of one head:
//   logits_ij = content_scores(q, k)_ij * scale + score_bias(q, k)_ij
//   out_i     = sum_j softmax_j(logits)_ij v_j + value_term(probs)_i
// A method lives in two objects:
//   PositionMethodImpl  model-level: embeddings added to the input (absolute, sinusoid),
//                       tables shared by all layers (T5), and a factory for ...
//   PositionTermImpl    per-layer hooks used by the shared attention core, which has no
//                       per-method branches.
#pragma once
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"

namespace rpe {

class PositionTermImpl : public torch::nn::Module {
 public:
  ~PositionTermImpl() override = default;

  // Rotates q and k in place (RoPE). q, k: [B, H, L, d].
  virtual void transform_qk(torch::Tensor& q, torch::Tensor& k) {}

  // Unscaled content scores [B, H, L, L]; q k^T unless the method is multiplicative (m1–m3).
  virtual torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k) {
    return torch::matmul(q, k.transpose(-2, -1));
  }

  // Additive logit term, already scaled, broadcastable to [B, H, L, L], with unit stride along
  // keys (CUDA's fused attention kernels need it); undefined = none.
  virtual torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k) { return {}; }

  // Term added to the attention output from the (dropped-out) probabilities
  // [B, H, L, L] -> [B, H, L, d]; undefined = none (Shaw's value embeddings use it).
  virtual torch::Tensor value_term(const torch::Tensor& probs) { return {}; }

  // Scale applied to content scores: 1/sqrt(d) (DeBERTa: 1/sqrt(3d)).
  virtual double scale(int64_t head_size) const { return 1.0 / std::sqrt(static_cast<double>(head_size)); }

  // True when content_scores is plain q k^T and there is no value term, so a fused kernel
  // (scaled_dot_product_attention with score_bias as its float mask) computes the same.
  virtual bool fusable() const { return true; }

  // Learned position parameters of this layer for plots (Figure 4); undefined if none.
  virtual torch::Tensor position_weights() { return {}; }

  // Names of this term's parameters that are biases by role whatever their shape, so never
  // weight-decayed (train/optim.h: 1-D tensors are biases already), e.g. transformer_xl's u, v.
  virtual std::vector<std::string> bias_parameters() const { return {}; }
};

class PositionMethodImpl : public torch::nn::Module {
 public:
  // learned_absolute: keep an [n, D] table added to the input (absolute, or add_absolute).
  PositionMethodImpl(const ModelOptions& options, bool learned_absolute);
  ~PositionMethodImpl() override = default;

  // Added to the token embeddings: [L, D], or undefined when the method adds nothing.
  // Refuses (UserError naming both lengths) when L exceeds a learned absolute table.
  virtual torch::Tensor input_embeddings(int64_t length);

  // Hooks for encoder layer `layer` (0-based), created once at model build.
  virtual std::shared_ptr<PositionTermImpl> make_layer_term(int64_t layer) = 0;

  // Position-only additive logit bias, the same in every layer (t5_bias, alibi): [1, H|1, L, L],
  // already scaled, in `dtype`. BertModel::encode builds it once per forward and hands it to
  // every layer in place of the term's score_bias, so it is neither rebuilt per layer nor
  // materialised per sequence (it broadcasts over the batch). Undefined for other methods.
  // Its last dimension is contiguous (stride 1), as CUDA's fused attention kernels need.
  torch::Tensor position_bias(int64_t length, const torch::Device& device, torch::ScalarType dtype) {
    auto bias = shared_bias(length, device, dtype);
    if (bias.defined()) ++bias_builds_;
    return bias;
  }
  int64_t bias_builds() const { return bias_builds_; }  // builds since construction (tests)

  // Short description for the build log, e.g. "m4 (k=127, per head)".
  virtual std::string describe() const = 0;

  // The model.attention keys this method reads, besides those every method reads (method,
  // add_absolute, backend). A non-default value of any other key draws a warning at build:
  // it would silently do nothing.
  virtual std::vector<std::string> option_keys() const = 0;

  const ModelOptions& options() const { return options_; }
  int64_t head_size() const { return options_.hidden / options_.heads; }
  // Effective clipping distance k: attention.max_relative, or n - 1 when that is 0.
  int64_t clip_distance() const;
  // Rows of a per-layer relative table: 1 when shared across heads, else H.
  int64_t table_heads() const { return options_.attention.share_across_heads ? 1 : options_.heads; }

  torch::Tensor absolute_table;  // [n, D] or undefined

 protected:
  // The method's position_bias; methods with one override it (default: none).
  virtual torch::Tensor shared_bias(int64_t length, const torch::Device& device, torch::ScalarType dtype) {
    return {};
  }
  ModelOptions options_;

 private:
  int64_t bias_builds_ = 0;
};

// m1 and m2 (Huang et al. 2020, eqs. 11–13): a learned scalar per relative slot gates the
// content score, e_ij = (q_i . k_j) * w[slot(i, j)] (the core applies 1/sqrt(d)), with
//   unsigned (m1): slot = min(|j - i|, k), k + 1 scalars;
//   signed   (m2): slot = clip(j - i, k) + k, 2k + 1 scalars;
// per layer, per head unless shared. Scalars start at 1 (plain attention). The gate is
// [H|1, L, L], never [L, L, d]. The two methods differ only in the slot, so they share it.
class ScalarGateMethod : public PositionMethodImpl {
 public:
  ScalarGateMethod(const ModelOptions& options, std::string name, bool signed_distance);
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t layer) override;
  std::vector<std::string> option_keys() const override { return {"max_relative", "share_across_heads"}; }
  std::string describe() const override;

 private:
  std::string name_;
  bool signed_;
};

// Tensors that depend only on lengths, sizes and the device (relative slots, a skew block's
// table rows, rotation tables), built once per process and then shared by every layer and
// step: on a GPU each build is a few microsecond-long kernels (4 per skew block: ~380 a
// BERT-base m4 forward; 10 per layer for RoPE's tables). Built outside inference mode, so a
// first build during an evaluation still serves training's autograd. Callers never write
// into them. Bounded: a run sees a few lengths. Keyed by the device's type and index and five
// integers, the first of which names the kind (one of PositionTensorKind).
enum PositionTensorKind : int64_t { kRelativeIndex, kSkewSlots, kNegatedIndex, kRotationTables, kLogBucketRows };
torch::Tensor cached_position_tensor(const std::array<int64_t, 5>& key, const torch::Device& device,
                                    const std::function<torch::Tensor()>& build);

// clip(j - i, k) + k for i, j in [0, L): [L, L] int64, the index into a (2k+1)-row table.
torch::Tensor relative_index(int64_t length, int64_t k, const torch::Device& device);

// Gathers per-distance scores into an [.., L, L] matrix. x: [B, H, L, 2k+1] where
// x[..., i, r] is position i against relative slot r; returns y[..., i, j] = x[..., i, idx[i, j]].
torch::Tensor gather_relative(const torch::Tensor& x, const torch::Tensor& idx);

// gather_relative for a bf16/fp16 x ([B, H, L, R]; idx [L, L]) whose backward sums each slot's
// gradient in fp32 (a clipped end's sum has up to L - k terms) and returns it rounded once to
// x's dtype; neither pass makes an fp32 [B, H, L, L]: the backward widens `chunk_bytes` of the
// incoming gradient at a time.
torch::Tensor gather_relative_wide(const torch::Tensor& x, const torch::Tensor& idx,
                                   int64_t chunk_bytes = int64_t{32} << 20);

// Reach of a clipped table at length L: distances |j - i| <= L - 1, so rows beyond
// min(k, L - 1) are never read. Methods narrow their (2k+1)-row tables to this window so
// that short sequences do not pay for a long table.
inline int64_t relative_reach(int64_t k, int64_t length) { return std::min(k, std::max<int64_t>(length - 1, 0)); }

// Rows [k - reach, k + reach] of a table whose dimension `dim` holds relative slots -k..k.
torch::Tensor narrow_relative(const torch::Tensor& table, int64_t dim, int64_t k, int64_t reach);

// Key-side gather: x: [B, H, L, R] where x[..., j, r] is key j against slot r; returns
// y[..., i, j] = x[..., j, idx[i, j]].
torch::Tensor gather_relative_keys(const torch::Tensor& x, const torch::Tensor& idx);

// Query-side relative scores without any [L, L, d] tensor:
//   y[b, h, i, j] = x[b, h, i] . table[h, clip(j - i, k) + k]
// x: [B, H, L, d]; table: [H|1, 2k+1, d] (slots for distances -k..k); returns [B, H, L, L].
// Short reaches multiply by the table and gather; long ones (the default k = n - 1) skew: x
// times the table rows of every distance its queries reach (clipped rows repeated), read back
// as [L, L] through a strided view: no gather, no scatter in backward. `blocks` splits
// the queries into that many blocks, each multiplying by just the L + L/blocks - 1 rows its
// distances reach (fewer FLOPs, more kernels); 0 = the default: 4 (bench/results/attention_cpu.md),
// unless set_relative_skew_blocks says otherwise.
torch::Tensor relative_scores(const torch::Tensor& x, const torch::Tensor& table, int64_t k, int64_t blocks = 0);

// Key-side relative scores: y[b, h, i, j] = x[b, h, j] . table[h, clip(j - i, k) + k]
// (m4's k_j . w term, DeBERTa's p2c): the query-side scores at negated distances, transposed.
torch::Tensor relative_key_scores(const torch::Tensor& x, const torch::Tensor& table, int64_t k, int64_t blocks = 0);

// Overrides the default of `blocks` above for every later call in the process (0 = the default
// again): the benchmarks' --relative-blocks, to compare layouts on one device.
void set_relative_skew_blocks(int64_t blocks);

// T5's bidirectional log buckets (Raffel et al. 2019) of relative distances rel = j - i
// (any integer tensor): half the buckets for r > 0, exact below buckets/4, logarithmic up
// to max_distance, then the last bucket. Same shape as rel, int64.
torch::Tensor t5_relative_bucket(const torch::Tensor& rel, int64_t buckets, int64_t max_distance);

// DeBERTa v2's log buckets (He et al. 2021) of relative distances rel (any integer tensor):
// r itself for |r| <= buckets/2, then logarithmic, reaching +-(buckets - 1) at |r| = log_end
// and growing past it (callers clip). Computed in fp32, as transformers does. Same shape, int64.
torch::Tensor deberta_log_bucket(const torch::Tensor& rel, int64_t buckets, int64_t log_end);

// ALiBi head slopes (Press et al. 2021): geometric 2^(-8h/H) for H a power of two, else
// those of the nearest lower power of two followed by every other slope of twice that. [H], fp64.
torch::Tensor alibi_slopes(int64_t heads);

// Sinusoidal table of Vaswani et al. (eqs. 1–2) for positions `positions` ([P], float): [P, D].
torch::Tensor sinusoid_table(const torch::Tensor& positions, int64_t dim);

}  // namespace rpe

// transformer_xl: relative attention of Dai et al. 2019 (the paper's eq. 10):
//   e_ij = ((q_i + u) . k_j + (q_i + v) . (R_{i-j} W^R)) / sqrt(d)
// R: sinusoid encodings of the signed distance i - j (fixed), W^R: [D, D] per layer, u, v:
// [H, d] per layer (xl_uv_bias; the paper saw instability with them, so they can be turned
// off, and start at 0). Distances are clipped at max_relative when it is set; by default
// they are not (the sinusoid extrapolates). The position term is (Q + v) P^T with
// P = R W^R, laid out as [L, L] by relative_scores; no [L, L, d] tensor.
#include "model/attention/position_method.h"

namespace rpe {
namespace {

class TransformerXlTerm : public PositionTermImpl {
 public:
  TransformerXlTerm(const ModelOptions& o, int64_t clip)
      : clip_(clip), heads_(o.heads), d_(o.hidden / o.heads), hidden_(o.hidden) {
    r_proj_ = register_parameter("r_proj", torch::randn({o.hidden, o.hidden}) * o.init_std);  // W^R [D, H*d]
    if (o.attention.xl_uv_bias) {
      u_ = register_parameter("u", torch::zeros({o.heads, 1, d_}));  // [H, 1, d]
      v_ = register_parameter("v", torch::zeros({o.heads, 1, d_}));  // [H, 1, d]
    }
  }

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k) override {
    const int64_t L = q.size(2);
    const int64_t reach = clip_ > 0 ? relative_reach(clip_, L) : std::max<int64_t>(L - 1, 0);
    auto p = projected(reach, q.device(), q.scalar_type());  // [H, 2k'+1, d], slot s: i-j = s-k'
    auto qv = v_.defined() ? q + v_.to(q.dtype()) : q;        // [B, H, L, d]
    // Slot of (i, j) is clip(i-j) + k': reversing the table indexes it by clip(j-i) + k'.
    auto bias = relative_scores(qv, p.flip(1), reach);  // [B, H, L, L]
    if (u_.defined()) bias = bias + torch::matmul(u_.to(q.dtype()), k.transpose(-2, -1));  // + u . k_j, [B, H, 1, L]
    return bias * scale(d_);
  }

  // P = R W^R per head for the distances -n+1..n-1 (or -k..k): [H, 2k+1, d], for plots.
  torch::Tensor position_weights() override {
    return projected(clip_ > 0 ? clip_ : default_reach_, r_proj_.device(), r_proj_.scalar_type());
  }
  int64_t default_reach_ = 0;

  // u and v ([H, 1, d]) are Dai et al.'s global content and position biases (r_w_bias, r_r_bias
  // in Hugging Face's XLNet, which the paper's HF no-decay list of "bias" names exempts).
  std::vector<std::string> bias_parameters() const override {
    return u_.defined() ? std::vector<std::string>{"u", "v"} : std::vector<std::string>{};
  }

 private:
  // R_{delta} W^R for delta = -reach..reach, split by head: [H, 2 reach + 1, d].
  torch::Tensor projected(int64_t reach, const torch::Device& device, torch::ScalarType dtype) {
    auto delta = torch::arange(-reach, reach + 1, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    auto r = sinusoid_table(delta, hidden_).to(dtype);                     // [2k'+1, D]
    auto p = torch::matmul(r, r_proj_.to(dtype));                          // [2k'+1, H*d]
    return p.view({2 * reach + 1, heads_, d_}).permute({1, 0, 2});        // [H, 2k'+1, d]
  }

  int64_t clip_, heads_, d_, hidden_;
  torch::Tensor r_proj_, u_, v_;
};

class TransformerXlMethod : public PositionMethodImpl {
 public:
  explicit TransformerXlMethod(const ModelOptions& o) : PositionMethodImpl(o, false) { clip_distance(); }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    auto term = std::make_shared<TransformerXlTerm>(options_, options_.attention.max_relative);
    term->default_reach_ = options_.max_position - 1;
    return term;
  }
  std::vector<std::string> option_keys() const override { return {"max_relative", "xl_uv_bias"}; }
  std::string describe() const override {
    const auto& a = options_.attention;
    return std::string("transformer_xl (") + (a.max_relative > 0 ? "k=" + std::to_string(a.max_relative) : "unclipped") +
           (a.xl_uv_bias ? ", u/v biases)" : ", no u/v biases)");
  }
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_transformer_xl(const ModelOptions& o) {
  return std::make_shared<TransformerXlMethod>(o);
}

}  // namespace rpe

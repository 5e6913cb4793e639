// deberta: disentangled attention of He et al. 2020 (content-to-content, content-to-position
// and position-to-content), with clipped relative distances:
//   e_ij = (q_i . k_j + q_i . P^K_{d(i,j)} + k_j . P^Q_{d(j,i)}) / sqrt(3d),
//   d(i,j) = clip(i - j, k) + k,   P^K = P W^{K,r},   P^Q = P W^{Q,r}
// P: relative embeddings [2k+1, D] shared by all layers (owned by the model-level method,
// only read by the layers); W^{K,r}, W^{Q,r}: [D, D] per layer, split into heads. The c2p
// and p2c terms are Q P^K^T and K P^Q^T laid out as [L, L] by relative_scores; no [L, L, d] tensor.
// Not modelled: DeBERTa's log buckets, LayerNorm on P and the enhanced mask decoder. p2c reads P^Q
// at the paper's d(j,i) (eq. 4); Microsoft's code, as transformers ports it, at d(i,j) (ctest
// hf_deberta_parity checks both terms against transformers, docs/attention.md).
#include "model/attention/position_method.h"

namespace rpe {
namespace {

class DebertaMethod;

class DebertaTerm : public PositionTermImpl {
 public:
  DebertaTerm(std::shared_ptr<DebertaMethod> owner, const ModelOptions& o, int64_t k);
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k) override;
  double scale(int64_t head_size) const override { return 1.0 / std::sqrt(3.0 * static_cast<double>(head_size)); }
  torch::Tensor position_weights() override;

 private:
  std::shared_ptr<DebertaMethod> owner_;  // holds P; not registered here (no duplicate)
  int64_t k_, heads_, d_;
  torch::Tensor key_proj_, query_proj_;  // [D, D]
};

class DebertaMethod : public PositionMethodImpl {
 public:
  explicit DebertaMethod(const ModelOptions& o) : PositionMethodImpl(o, false) {
    rel_embeddings = register_parameter("rel_embeddings", torch::randn({2 * clip_distance() + 1, o.hidden}) * o.init_std);
  }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<DebertaTerm>(std::static_pointer_cast<DebertaMethod>(shared_from_this()), options_,
                                         clip_distance());
  }
  std::vector<std::string> option_keys() const override { return {"max_relative"}; }
  std::string describe() const override {
    return "deberta (k=" + std::to_string(clip_distance()) + ", c2p + p2c, relative table shared by layers)";
  }
  torch::Tensor rel_embeddings;  // P: [2k+1, D]
};

DebertaTerm::DebertaTerm(std::shared_ptr<DebertaMethod> owner, const ModelOptions& o, int64_t k)
    : owner_(std::move(owner)), k_(k), heads_(o.heads), d_(o.hidden / o.heads) {
  key_proj_ = register_parameter("pos_key_proj", torch::randn({o.hidden, o.hidden}) * o.init_std);
  query_proj_ = register_parameter("pos_query_proj", torch::randn({o.hidden, o.hidden}) * o.init_std);
}

torch::Tensor DebertaTerm::score_bias(const torch::Tensor& q, const torch::Tensor& k) {
  const int64_t L = q.size(2), reach = relative_reach(k_, L), slots = 2 * reach + 1;
  auto p = narrow_relative(owner_->rel_embeddings, 0, k_, reach).to(q.dtype());  // [2k'+1, D]
  auto per_head = [&](const torch::Tensor& w) {  // [2k'+1, D] x [D, D] -> [H, 2k'+1, d], pre-scaled
    return torch::matmul(p, w.to(q.dtype()) * scale(d_)).view({slots, heads_, d_}).permute({1, 0, 2});
  };
  // c2p: q_i . P^K at clip(i-j) + k', i.e. the reversed table at clip(j-i) + k'.
  auto c2p = relative_scores(q, per_head(key_proj_).flip(1), reach);  // [B, H, L, L]
  // p2c: k_j . P^Q at clip(j-i) + k', read from key j's row.
  auto p2c = relative_key_scores(k, per_head(query_proj_), reach);  // [B, H, L, L]
  return c2p + p2c;
}

torch::Tensor DebertaTerm::position_weights() { return owner_->rel_embeddings; }

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_deberta(const ModelOptions& o) {
  return std::make_shared<DebertaMethod>(o);
}

}  // namespace rpe

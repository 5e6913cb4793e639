// m2: Huang et al. 2020, method 2 (eq. 13 with eq. 12): the signed version of m1,
//   e_ij = (q_i . k_j) * w_{clip(j-i,k)} / sqrt(d),   w = (w_{-k}, ..., w_k)
// per layer and head (share_across_heads: per layer), k = n - 1 by default (2n - 1
// scalars as in the paper). Scalars start at 1 (plain attention). Gate: [H|1, L, L].
#include "model/attention/position_method.h"

namespace rpe {
namespace {

class M2Term : public PositionTermImpl {
 public:
  M2Term(int64_t table_heads, int64_t k) : k_(k) {
    table_ = register_parameter("w", torch::ones({table_heads, 2 * k + 1}));  // [H|1, 2k+1]
  }

  torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k) override {
    const int64_t L = q.size(2);
    auto idx = relative_index(L, k_, q.device());                                      // [L, L]
    auto gate = table_.to(q.dtype()).index_select(1, idx.flatten()).view({-1, L, L});  // [H|1, L, L]
    return torch::matmul(q, k.transpose(-2, -1)) * gate;                               // [B, H, L, L]
  }

  bool fusable() const override { return false; }  // multiplicative: not a float mask
  torch::Tensor position_weights() override { return table_; }

 private:
  int64_t k_;
  torch::Tensor table_;
};

class M2Method : public PositionMethodImpl {
 public:
  explicit M2Method(const ModelOptions& o) : PositionMethodImpl(o, false) { clip_distance(); }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<M2Term>(table_heads(), clip_distance());
  }
  std::vector<std::string> option_keys() const override { return {"max_relative", "share_across_heads"}; }
  std::string describe() const override {
    return "m2 (k=" + std::to_string(clip_distance()) +
           (options_.attention.share_across_heads ? ", shared across heads)" : ", per head)");
  }
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_m2(const ModelOptions& o) {
  return std::make_shared<M2Method>(o);
}

}  // namespace rpe

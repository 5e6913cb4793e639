// m1: Huang et al. 2020, method 1 (eqs. 11–12): a learned scalar per absolute distance
// gates the content score multiplicatively,
//   e_ij = (q_i . k_j) * w_{|j-i|} / sqrt(d),   w = (w_0, ..., w_{n-1})
// per layer and head (share_across_heads: per layer). The paper does not clip; distances
// beyond the table (L > n, or max_relative = k set) use its last entry w_k. Scalars start
// at 1 so the method starts as plain attention. The gate is [H|1, L, L], never [L, L, d].
#include "model/attention/position_method.h"

namespace rpe {
namespace {

class M1Term : public PositionTermImpl {
 public:
  M1Term(int64_t table_heads, int64_t k) : k_(k) {
    table_ = register_parameter("w", torch::ones({table_heads, k + 1}));  // [H|1, k+1]
  }

  torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k) override {
    const int64_t L = q.size(2);
    auto distance = (relative_index(L, k_, q.device()) - k_).abs();            // [L, L], min(|j-i|, k)
    auto gate = table_.to(q.dtype()).index_select(1, distance.flatten()).view({-1, L, L});  // [H|1, L, L]
    return torch::matmul(q, k.transpose(-2, -1)) * gate;                        // [B, H, L, L]
  }

  bool fusable() const override { return false; }  // multiplicative: not a float mask
  torch::Tensor position_weights() override { return table_; }

 private:
  int64_t k_;
  torch::Tensor table_;
};

class M1Method : public PositionMethodImpl {
 public:
  explicit M1Method(const ModelOptions& o) : PositionMethodImpl(o, false) { clip_distance(); }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<M1Term>(table_heads(), clip_distance());
  }
  std::vector<std::string> option_keys() const override { return {"max_relative", "share_across_heads"}; }
  std::string describe() const override {
    return "m1 (k=" + std::to_string(clip_distance()) +
           (options_.attention.share_across_heads ? ", shared across heads)" : ", per head)");
  }
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_m1(const ModelOptions& o) {
  return std::make_shared<M1Method>(o);
}

}  // namespace rpe

// m4: Huang et al. 2020, method 4 (eqs. 16–17), the paper's best:
//   e_ij = (q_i . k_j + q_i . w_{clip(j-i,k)} + k_j . w_{clip(j-i,k)}) / sqrt(d)
// w: (2k+1) x d per layer, per head unless share_across_heads. Computed without any
// [L, L, d] tensor: Q W^T and K W^T are [B, H, L, 2k'+1] (k' = min(k, L-1), the rows a
// length-L sequence can reach), then gathered by clip(j-i, k') + k'.
#include "model/attention/position_method.h"

namespace rpe {
namespace {

class M4Term : public PositionTermImpl {
 public:
  M4Term(int64_t table_heads, int64_t k, int64_t d, double init_std) : k_(k), d_(d) {
    table_ = register_parameter("w", torch::randn({table_heads, 2 * k + 1, d}) * init_std);  // [H|1, 2k+1, d]
  }

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k) override {
    const int64_t L = q.size(2), reach = relative_reach(k_, L);
    auto idx = relative_index(L, reach, q.device());                                      // [L, L]
    auto wt = narrow_relative(table_, 1, k_, reach).to(q.dtype()).transpose(-2, -1);     // [H|1, d, 2k'+1]
    auto q_term = gather_relative(torch::matmul(q, wt), idx);        // [B, H, L, L]: q_i . w_{r(i,j)}
    auto k_term = gather_relative_keys(torch::matmul(k, wt), idx);   // [B, H, L, L]: k_j . w_{r(i,j)}
    return (q_term + k_term) * scale(d_);
  }

  torch::Tensor position_weights() override { return table_; }

 private:
  int64_t k_, d_;
  torch::Tensor table_;
};

class M4Method : public PositionMethodImpl {
 public:
  explicit M4Method(const ModelOptions& o) : PositionMethodImpl(o, false) { clip_distance(); }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<M4Term>(table_heads(), clip_distance(), head_size(), options_.init_std);
  }
  std::string describe() const override {
    return "m4 (k=" + std::to_string(clip_distance()) +
           (options_.attention.share_across_heads ? ", shared across heads)" : ", per head)");
  }
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_m4(const ModelOptions& o) {
  return std::make_shared<M4Method>(o);
}

}  // namespace rpe

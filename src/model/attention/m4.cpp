// m4: Huang et al. 2020, method 4 (eqs. 16–17), the paper's best:
//   e_ij = (q_i . k_j + q_i . w_{clip(j-i,k)} + k_j . w_{clip(j-i,k)}) / sqrt(d)
// w: (2k+1) x d per layer, per head unless share_across_heads. Computed without any
// [L, L, d] tensor: both terms are products with the table rows a length-L sequence
// reaches, laid out as [L, L] by relative_scores (gather or blocked skew).
#include "model/attention/clipped_table_method.h"

namespace rpe {
namespace {

class M4Term : public PositionTermImpl {
 public:
  M4Term(int64_t table_heads, int64_t k, int64_t d, double init_std) : k_(k), d_(d) {
    table_ = register_parameter("w", torch::randn({table_heads, 2 * k + 1, d}) * init_std);  // [H|1, 2k+1, d]
  }

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k) override {
    // fp32 under autocast too: relative_scores casts the rows for its GEMMs after its index steps.
    auto w = table_ * scale(d_);  // [H|1, 2k+1, d]; scaling the table spares an [L, L] pass
    return relative_scores(q, w, k_) + relative_key_scores(k, w, k_);  // [B, H, L, L]: q_i . w_r + k_j . w_r
  }

  torch::Tensor position_weights() override { return table_; }

 private:
  int64_t k_, d_;
  torch::Tensor table_;
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_m4(const ModelOptions& o) {
  return std::make_shared<ClippedTableMethod<M4Term>>(o, "m4");
}

}  // namespace rpe

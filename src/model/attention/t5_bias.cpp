// t5_bias: the relative attention bias of T5 (Raffel et al. 2019):
//   e_ij = q_i . k_j / sqrt(d) + b_{bucket(j-i)}
// bucket(): bidirectional log buckets (t5_buckets, t5_max_distance; 32 and 128 by default).
// One table b: [buckets, H] (or [buckets, 1] with share_across_heads) shared by all layers,
// as in T5: the model-level method owns the parameter and each layer term only reads it,
// so it is counted and trained once. Distances beyond max_distance fall in the last bucket.
#include <cmath>

#include "model/attention/position_method.h"

namespace rpe {

torch::Tensor t5_relative_bucket(const torch::Tensor& rel, int64_t buckets, int64_t max_distance) {
  const int64_t half = buckets / 2;    // one half per direction
  const int64_t max_exact = half / 2;  // distances below this get their own bucket
  auto ret = (rel > 0).to(torch::kLong) * half;
  auto n = rel.abs().to(torch::kLong);
  auto ratio = torch::log(n.clamp_min(1).to(torch::kFloat64) / static_cast<double>(max_exact)) /
               std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact));
  auto large = (ratio * static_cast<double>(half - max_exact)).to(torch::kLong) + max_exact;  // floor (ratio >= 0)
  large = large.clamp_max(half - 1);
  return ret + torch::where(n < max_exact, n, large);
}

namespace {

class T5Method;

class T5Term : public PositionTermImpl {
 public:
  explicit T5Term(std::shared_ptr<T5Method> owner) : owner_(std::move(owner)) {}
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k) override;
  torch::Tensor position_weights() override;

 private:
  std::shared_ptr<T5Method> owner_;  // holds the shared table; not registered here (no duplicate)
};

class T5Method : public PositionMethodImpl {
 public:
  explicit T5Method(const ModelOptions& o) : PositionMethodImpl(o, false) {
    // The registry's t5_problem has checked the buckets and max distance (make_position_method).
    table = register_parameter("relative_attention_bias", torch::randn({o.attention.t5_buckets, table_heads()}) *
                                                              o.init_std);
  }

  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<T5Term>(std::static_pointer_cast<T5Method>(shared_from_this()));
  }

  std::vector<std::string> option_keys() const override { return {"share_across_heads", "t5_buckets", "t5_max_distance"}; }
  std::string describe() const override {
    const auto& a = options_.attention;
    return "t5_bias (" + std::to_string(a.t5_buckets) + " buckets, max distance " +
           std::to_string(a.t5_max_distance) + (a.share_across_heads ? ", shared across heads" : ", per head") +
           ", shared by layers)";
  }

  // [1, H|1, L, L]: b_{bucket(j-i)} for every (i, j).
  torch::Tensor bias(int64_t L, const torch::Device& device, torch::ScalarType dtype) const {
    auto pos = torch::arange(L, torch::TensorOptions().dtype(torch::kLong).device(device));
    auto bucket = t5_relative_bucket(pos.unsqueeze(0) - pos.unsqueeze(1), options_.attention.t5_buckets,
                                     options_.attention.t5_max_distance);  // [L, L]
    // Gathered head-major, so the result is contiguous: CUDA's fused attention kernels take a
    // mask only with unit stride along keys (a permuted [L, L, H] view falls back to the math one).
    // Gathered from the fp32 table and cast after: the gather's backward sums each bucket's
    // gradient (up to ~L^2/3 terms at the far buckets) in the table's dtype, and in bf16, on CUDA
    // one atomic add a term, that sum loses tens of percent.
    return table.t().index_select(1, bucket.flatten()).to(dtype).view({1, -1, L, L});  // [1, H|1, L, L]
  }

  torch::Tensor table;  // [buckets, H|1]

 protected:
  torch::Tensor shared_bias(int64_t L, const torch::Device& device, torch::ScalarType dtype) override {
    return bias(L, device, dtype);
  }
};

torch::Tensor T5Term::score_bias(const torch::Tensor& q, const torch::Tensor&) {
  return owner_->bias(q.size(2), q.device(), q.scalar_type());
}
torch::Tensor T5Term::position_weights() { return owner_->table; }

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_t5_bias(const ModelOptions& o) {
  return std::make_shared<T5Method>(o);
}

}  // namespace rpe

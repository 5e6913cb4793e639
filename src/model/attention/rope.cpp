// rope: rotary position embedding (Su et al. 2021). Each pair (q_{i,2t}, q_{i,2t+1}) is
// rotated by the angle i * theta_t, theta_t = rope_base^(-2t/d), and likewise k_j, so that
//   e_ij = R(i) q_i . R(j) k_j / sqrt(d) = q_i . R(j - i) k_j / sqrt(d)
// depends on j - i only. No parameters; needs an even head size.
#include <cmath>

#include "model/attention/position_method.h"
#include "util/errors.h"

namespace rpe {
namespace {

class RopeTerm : public PositionTermImpl {
 public:
  explicit RopeTerm(double base) : base_(base) {}

  void transform_qk(torch::Tensor& q, torch::Tensor& k) override {
    const int64_t L = q.size(2), d = q.size(3);
    auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(q.device());
    auto theta = torch::exp(torch::arange(0, d, 2, f64) * (-std::log(base_) / static_cast<double>(d)));  // [d/2]
    auto angle = torch::arange(L, f64).unsqueeze(1) * theta.unsqueeze(0);  // [L, d/2]
    auto cos = angle.cos().to(q.scalar_type()), sin = angle.sin().to(q.scalar_type());
    q = rotate(q, cos, sin);
    k = rotate(k, cos, sin);
  }

 private:
  // x: [B, H, L, d] viewed as pairs [B, H, L, d/2, 2]; returns the rotated [B, H, L, d].
  static torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
    auto pairs = x.unflatten(-1, {-1, 2});
    auto x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);  // [B, H, L, d/2]
    return torch::stack({x0 * cos - x1 * sin, x0 * sin + x1 * cos}, -1).flatten(-2);
  }
  double base_;
};

class RopeMethod : public PositionMethodImpl {
 public:
  explicit RopeMethod(const ModelOptions& o) : PositionMethodImpl(o, false) {
    require(head_size() % 2 == 0, "model.heads: rope needs an even head size, got hidden " + std::to_string(o.hidden) +
                                      " / heads " + std::to_string(o.heads) + " = " + std::to_string(head_size()));
    require(o.attention.rope_base > 1.0,
            "model.attention.rope_base: must be > 1, got " + std::to_string(o.attention.rope_base));
  }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<RopeTerm>(options_.attention.rope_base);
  }
  std::vector<std::string> option_keys() const override { return {"rope_base"}; }
  std::string describe() const override {
    return "rope (base " + std::to_string(static_cast<int64_t>(options_.attention.rope_base)) + ", no parameters)";
  }
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_rope(const ModelOptions& o) {
  return std::make_shared<RopeMethod>(o);
}

}  // namespace rpe

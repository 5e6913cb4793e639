// alibi: attention with linear biases (Press et al. 2021), symmetric as in MosaicBERT:
//   e_ij = q_i . k_j / sqrt(d) - m_h |j - i|
// m_h: fixed geometric slopes per head (alibi_slopes). No parameters; any length works.
// Distances are integers and the bias is formed in fp32 (never in the autocast dtype: bf16
// holds integers exactly only up to 256), then cast once to the logits' dtype. The slopes are
// a buffer of the model-level method, so they move with the model and cost no copy per forward.
#include <cmath>

#include "model/attention/position_method.h"

namespace rpe {

torch::Tensor alibi_slopes(int64_t heads) {
  auto power_of_two = [](int64_t n) {  // 2^(-8/n), 2^(-16/n), ..., 2^(-8)
    std::vector<double> s;
    for (int64_t h = 1; h <= n; ++h) s.push_back(std::pow(2.0, -8.0 * static_cast<double>(h) / static_cast<double>(n)));
    return s;
  };
  int64_t closest = 1;
  while (closest * 2 <= heads) closest *= 2;
  auto slopes = power_of_two(closest);
  auto extra = power_of_two(2 * closest);  // interleave: every other slope of the next power of two
  for (int64_t h = 0; static_cast<int64_t>(slopes.size()) < heads; h += 2) slopes.push_back(extra[h]);
  return torch::tensor(slopes, torch::kFloat64);
}

namespace {

class AlibiMethod : public PositionMethodImpl {
 public:
  explicit AlibiMethod(const ModelOptions& o) : PositionMethodImpl(o, false) {
    slopes = register_buffer("alibi_slopes", alibi_slopes(o.heads).to(torch::kFloat32));  // [H]
  }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override;
  std::vector<std::string> option_keys() const override { return {}; }
  std::string describe() const override { return "alibi (fixed slopes, no parameters)"; }

  // [1, H, L, L]: -m_h |j - i| in `dtype`, computed from int64 distances in at least fp32.
  torch::Tensor bias(int64_t L, const torch::Device& device, torch::ScalarType dtype) const {
    auto pos = torch::arange(L, torch::TensorOptions().dtype(torch::kLong).device(device));
    auto distance = (pos.unsqueeze(0) - pos.unsqueeze(1)).abs();                   // [L, L] int64, |j - i|
    const auto exact = at::promote_types(slopes.scalar_type(), torch::kFloat32);   // fp32 (fp64 in fp64 tests)
    auto m = slopes.to(device, exact).view({1, -1, 1, 1});                          // [1, H, 1, 1]
    return (-m * distance.to(exact)).to(dtype);                                     // [1, H, L, L]
  }

  torch::Tensor slopes;  // [H] buffer

 protected:
  torch::Tensor shared_bias(int64_t L, const torch::Device& device, torch::ScalarType dtype) override {
    return bias(L, device, dtype);
  }
};

class AlibiTerm : public PositionTermImpl {
 public:
  explicit AlibiTerm(std::shared_ptr<AlibiMethod> owner) : owner_(std::move(owner)) {}
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor&) override {
    return owner_->bias(q.size(2), q.device(), q.scalar_type());  // [1, H, L, L]
  }
  torch::Tensor position_weights() override { return {}; }  // fixed slopes, nothing learned

 private:
  std::shared_ptr<AlibiMethod> owner_;  // holds the slopes; not registered here (no duplicate buffer)
};

std::shared_ptr<PositionTermImpl> AlibiMethod::make_layer_term(int64_t) {
  return std::make_shared<AlibiTerm>(std::static_pointer_cast<AlibiMethod>(shared_from_this()));
}

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_alibi(const ModelOptions& o) {
  return std::make_shared<AlibiMethod>(o);
}

}  // namespace rpe

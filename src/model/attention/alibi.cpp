// alibi: attention with linear biases (Press et al. 2021), symmetric as in MosaicBERT:
//   e_ij = q_i . k_j / sqrt(d) - m_h |j - i|
// m_h: fixed geometric slopes per head (alibi_slopes). No parameters; any length works.
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

class AlibiTerm : public PositionTermImpl {
 public:
  explicit AlibiTerm(int64_t heads) : slopes_(alibi_slopes(heads)) {}

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor&) override {
    const int64_t L = q.size(2);
    auto pos = torch::arange(L, q.options());
    auto distance = (pos.unsqueeze(0) - pos.unsqueeze(1)).abs();                  // [L, L], |j - i|
    auto m = slopes_.to(q.options()).view({1, -1, 1, 1});                          // [1, H, 1, 1]
    return -m * distance;                                                          // [1, H, L, L]
  }

  torch::Tensor position_weights() override { return {}; }  // fixed slopes, nothing learned

 private:
  torch::Tensor slopes_;  // [H], fp64
};

class AlibiMethod : public PositionMethodImpl {
 public:
  explicit AlibiMethod(const ModelOptions& o) : PositionMethodImpl(o, false) {}
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<AlibiTerm>(options_.heads);
  }
  std::vector<std::string> option_keys() const override { return {}; }
  std::string describe() const override { return "alibi (fixed slopes, no parameters)"; }
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_alibi(const ModelOptions& o) {
  return std::make_shared<AlibiMethod>(o);
}

}  // namespace rpe

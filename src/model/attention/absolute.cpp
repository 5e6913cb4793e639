// absolute: learned position embeddings added to the token embeddings (Devlin et al. 2019;
// the paper's eq. 6, x_i = t_i + p_i). The attention itself is plain q_i . k_j / sqrt(d).
#include "model/attention/position_method.h"

namespace rpe {
namespace {

class AbsoluteMethod : public PositionMethodImpl {
 public:
  explicit AbsoluteMethod(const ModelOptions& o) : PositionMethodImpl(o, /*learned_absolute=*/true) {}
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<PositionTermImpl>();  // no per-layer position terms
  }
  std::vector<std::string> option_keys() const override { return {}; }
  std::string describe() const override {
    return "absolute (learned [" + std::to_string(options_.max_position) + ", " + std::to_string(options_.hidden) +
           "] table)";
  }
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_absolute(const ModelOptions& o) {
  return std::make_shared<AbsoluteMethod>(o);
}

}  // namespace rpe

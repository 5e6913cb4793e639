// sinusoid: fixed position encodings of Vaswani et al. 2017 (the paper's eqs. 1–2),
//   PE(p, 2i) = sin(p / 10000^(2i/D)),  PE(p, 2i+1) = cos(p / 10000^(2i/D)),
// added to the token embeddings (x_i = t_i + PE_i). No parameters; any length works.
// With add_absolute, a learned table is added on top (and limits L to max_position).
#include "model/attention/position_method.h"

namespace rpe {
namespace {

class SinusoidMethod : public PositionMethodImpl {
 public:
  explicit SinusoidMethod(const ModelOptions& o) : PositionMethodImpl(o, false) {
    // A buffer (not a parameter): follows the model to its device, costs nothing to train.
    table_ = register_buffer("sinusoid", table_for(o.max_position, torch::kCPU));  // [n, D]
  }

  torch::Tensor input_embeddings(int64_t length) override {
    auto table = length <= table_.size(0) ? table_.narrow(0, 0, length)
                                          : table_for(length, table_.device()).to(table_.dtype());  // [L, D], any L
    auto learned = PositionMethodImpl::input_embeddings(length);                  // [L, D] or undefined
    return learned.defined() ? learned + table : table;
  }

  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<PositionTermImpl>();  // plain q . k attention
  }
  std::vector<std::string> option_keys() const override { return {}; }
  std::string describe() const override { return "sinusoid (fixed, no parameters)"; }

 private:
  torch::Tensor table_for(int64_t length, const torch::Device& device) const {
    auto positions = torch::arange(length, torch::TensorOptions().dtype(torch::kFloat64).device(device));
    return sinusoid_table(positions, options_.hidden).to(torch::kFloat32);  // computed in fp64
  }
  torch::Tensor table_;
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_sinusoid(const ModelOptions& o) {
  return std::make_shared<SinusoidMethod>(o);
}

}  // namespace rpe

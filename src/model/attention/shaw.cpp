// shaw: relative position representations of Shaw et al. 2018 (the paper's eqs. 7–9):
//   e_ij = q_i . (k_j + w^K_{clip(j-i,k)}) / sqrt(d)
//   z_i  = sum_j a_ij (v_j + w^V_{clip(j-i,k)})          (value term, shaw_values: true)
// Tables [H|1, 2k+1, d] per layer ("key_table", "value_table"). No [L, L, d] tensor: the
// key term is Q W^K^T laid out as [L, L] by relative_scores; the value term sums
// the probabilities into their 2k'+1 relative slots (a scatter-add, [B, H, L, 2k'+1]) and
// multiplies by W^V.
#include "model/attention/position_method.h"

namespace rpe {
namespace {

class ShawTerm : public PositionTermImpl {
 public:
  ShawTerm(int64_t table_heads, int64_t k, int64_t d, bool values, double init_std) : k_(k), d_(d) {
    key_table_ = register_parameter("key_table", torch::randn({table_heads, 2 * k + 1, d}) * init_std);
    if (values) value_table_ = register_parameter("value_table", torch::randn({table_heads, 2 * k + 1, d}) * init_std);
  }

  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k) override {
    return relative_scores(q, key_table_ * scale(d_), k_);  // [B, H, L, L]; fp32 table: see m4
  }

  torch::Tensor value_term(const torch::Tensor& probs) override {
    if (!value_table_.defined()) return {};
    const int64_t L = probs.size(-1), reach = relative_reach(k_, L);
    auto idx = relative_index(L, reach, probs.device());  // [L, L]
    auto sizes = probs.sizes().vec();
    sizes.back() = 2 * reach + 1;
    // slots[b, h, i, r] = sum over j with clip(j-i) = r of a_ij: [B, H, L, 2k'+1], summed in fp32
    // at least (under autocast the probabilities are bf16/fp16, and CUDA's scatter_add adds
    // atomically in the tensor's type: a clipped end's slot sums ~L - k of them, which bf16 rounds
    // by percents); the wider copy of probs lives only for this step (scatter_add's backward gathers).
    const auto sum_type = probs.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    auto slots = torch::zeros(sizes, probs.options().dtype(sum_type))
                     .scatter_add(-1, idx.expand(probs.sizes()), probs.to(sum_type));
    auto wv = narrow_relative(value_table_, 1, k_, reach).to(sum_type);  // [H|1, 2k'+1, d]
    return torch::matmul(slots, wv).to(probs.scalar_type());             // [B, H, L, d]; autocast: its matmul's type
  }

  bool fusable() const override { return !value_table_.defined(); }
  torch::Tensor position_weights() override { return key_table_; }

 private:
  int64_t k_, d_;
  torch::Tensor key_table_, value_table_;
};

class ShawMethod : public PositionMethodImpl {
 public:
  explicit ShawMethod(const ModelOptions& o) : PositionMethodImpl(o, false) { clip_distance(); }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<ShawTerm>(table_heads(), clip_distance(), head_size(), options_.attention.shaw_values,
                                      options_.init_std);
  }
  std::vector<std::string> option_keys() const override { return {"max_relative", "share_across_heads", "shaw_values"}; }
  std::string describe() const override {
    return "shaw (k=" + std::to_string(clip_distance()) +
           (options_.attention.share_across_heads ? ", shared across heads" : ", per head") +
           (options_.attention.shaw_values ? ", with value term)" : ", keys only)");
  }
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_shaw(const ModelOptions& o) {
  return std::make_shared<ShawMethod>(o);
}

}  // namespace rpe

// rope: rotary position embedding (Su et al. 2021). Each pair (q_{i,2t}, q_{i,2t+1}) is
// rotated by the angle i * theta_t, theta_t = rope_base^(-2t/d), and likewise k_j, so that
//   e_ij = R(i) q_i . R(j) k_j / sqrt(d) = q_i . R(j - i) k_j / sqrt(d)
// depends on j - i only. No parameters; needs an even head size.
#include <fmt/format.h>

#include <bit>
#include <cmath>

#include "model/attention/position_method.h"
#include "util/errors.h"

namespace rpe {
namespace {

// cos and sin of i * theta_t for i < L, each repeated over its pair's two slots, the sine
// signed for the rotation: [3, L, d] = C = (c_0, c_0, c_1, c_1, ..), S = (-s_0, s_0, -s_1, s_1, ..)
// and -S, in the queries' dtype (computed in fp64). Built once per length, size, base, dtype and
// device, not in every layer of every forward.
torch::Tensor rotation_tables(int64_t L, int64_t d, double base, const torch::Device& device, torch::ScalarType dtype) {
  const std::array<int64_t, 5> key{kRotationTables, L, d, std::bit_cast<int64_t>(base), static_cast<int64_t>(dtype)};
  return cached_position_tensor(key, device, [&] {
    auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device);
    auto theta = torch::exp(torch::arange(0, d, 2, f64) * (-std::log(base) / static_cast<double>(d)));  // [d/2]
    // Each pair's angle twice and the sine's signs -1, 1, -1, .. by arithmetic on the device
    // (repeat_interleave reads its output size back from it; a host tensor is a copy to it).
    auto angle = (torch::arange(L, f64).unsqueeze(1) * theta.unsqueeze(0)).unsqueeze(-1).expand({L, d / 2, 2});
    angle = angle.reshape({L, d});
    auto sin = angle.sin() * (torch::arange(d, f64).remainder(2) * 2 - 1);
    return torch::stack({angle.cos(), sin, -sin}).to(dtype);  // [3, L, d]
  });
}

// x * C + swap(x) * S, swap exchanging each pair's two slots: pair (x0, x1) becomes
// (x0 c - x1 s, x1 c + x0 s). Three kernels (the swap's copy, a product, a fused multiply-add)
// where pairwise selects and a stack took seven, and backward as many more.
torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& C, const torch::Tensor& S) {
  auto swapped = x.unflatten(-1, {-1, 2}).flip(-1).flatten(-2);  // [B, H, L, d]
  return torch::addcmul(x * C, swapped, S);
}

// The rotation as one autograd node. Its adjoint is the rotation by -theta (C, -S), so
// backward is the same three kernels and keeps only the shared tables, not x.
class Rotation : public torch::autograd::Function<Rotation> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& tables) {
    ctx->saved_data["tables"] = tables;
    return rotate(x, tables[0], tables[1]);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto tables = ctx->saved_data["tables"].toTensor();
    return {rotate(grad[0], tables[0], tables[2]), torch::Tensor()};
  }
};

class RopeTerm : public PositionTermImpl {
 public:
  explicit RopeTerm(double base) : base_(base) {}

  void transform_qk(torch::Tensor& q, torch::Tensor& k) override {  // q, k: [B, H, L, d]
    auto tables = rotation_tables(q.size(2), q.size(3), base_, q.device(), q.scalar_type());
    q = Rotation::apply(q, tables);
    k = Rotation::apply(k, tables);
  }

 private:
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
    return fmt::format("rope (base {:g}, no parameters)", options_.attention.rope_base);
  }
};

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_rope(const ModelOptions& o) {
  return std::make_shared<RopeMethod>(o);
}

}  // namespace rpe

// Shared pieces of position methods: the learned absolute table and relative indexing.
#include "model/attention/position_method.h"

#include "util/errors.h"

namespace rpe {

PositionMethodImpl::PositionMethodImpl(const ModelOptions& options, bool learned_absolute)
    : options_(options) {
  if (learned_absolute || options.attention.add_absolute) {
    absolute_table = register_parameter(
        "absolute", torch::randn({options.max_position, options.hidden}) * options.init_std);
  }
}

torch::Tensor PositionMethodImpl::input_embeddings(int64_t length) {
  if (!absolute_table.defined()) return {};
  require(length <= options_.max_position,
          "sequence length " + std::to_string(length) + " exceeds model.max_position " +
              std::to_string(options_.max_position) +
              ": learned absolute position embeddings cannot extrapolate (use a relative method)");
  return absolute_table.narrow(0, 0, length);  // [L, D]
}

int64_t PositionMethodImpl::clip_distance() const {
  require(options_.attention.max_relative >= 0,
          "model.attention.max_relative: must be >= 0 (0 = max_position - 1), got " +
              std::to_string(options_.attention.max_relative));
  return options_.attention.max_relative > 0 ? options_.attention.max_relative : options_.max_position - 1;
}

torch::Tensor relative_index(int64_t length, int64_t k, const torch::Device& device) {
  auto pos = torch::arange(length, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto rel = pos.unsqueeze(0) - pos.unsqueeze(1);  // [L, L], rel[i, j] = j - i
  return rel.clamp(-k, k) + k;
}

torch::Tensor gather_relative(const torch::Tensor& x, const torch::Tensor& idx) {
  // x: [B, H, L, R]; idx: [L, L] -> expanded (a view, no copy) to [B, H, L, L].
  auto sizes = x.sizes().vec();
  sizes.back() = idx.size(1);
  return x.gather(-1, idx.expand(sizes));
}

torch::Tensor narrow_relative(const torch::Tensor& table, int64_t dim, int64_t k, int64_t reach) {
  return table.narrow(dim, k - reach, 2 * reach + 1);
}

torch::Tensor gather_relative_keys(const torch::Tensor& x, const torch::Tensor& idx) {
  // Row j of x at slot idx[i, j] = idx^T[j, i]: gather with idx^T, then swap the two axes.
  return gather_relative(x, idx.t()).transpose(-2, -1);  // [B, H, L, L] (a transposed view)
}

torch::Tensor sinusoid_table(const torch::Tensor& positions, int64_t dim) {
  // PE(p, 2i) = sin(p / 10000^(2i/D)), PE(p, 2i+1) = cos(p / 10000^(2i/D)).
  auto opts = positions.options();
  auto i = torch::arange(0, dim, 2, opts);
  auto inv_freq = torch::exp(i * (-std::log(10000.0) / static_cast<double>(dim)));  // [D/2]
  auto angles = positions.unsqueeze(1) * inv_freq.unsqueeze(0);                    // [P, D/2]
  auto table = torch::zeros({positions.size(0), dim}, opts);
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)}, angles.sin());
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                   angles.narrow(1, 0, dim / 2).cos());
  return table;
}

}  // namespace rpe

// Shared pieces of position methods: the learned absolute table and relative indexing.
#include "model/attention/position_method.h"

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "model/attention/clipped_table_method.h"
#include "model/attention/position_cache.h"
#include "model/attention/relative_layout.h"
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
              ": learned absolute position embeddings cannot extrapolate (" +
              (options_.attention.method == "absolute"
                   ? std::string("use a relative method")
                   : "this " + options_.attention.method + " model adds them: model.attention.add_absolute") +
              ")");
  return absolute_table.narrow(0, 0, length);  // [L, D]
}

int64_t PositionMethodImpl::clip_distance() const {
  require(options_.attention.max_relative >= 0,
          "model.attention.max_relative: must be >= 0 (0 = max_position - 1), got " +
              std::to_string(options_.attention.max_relative));
  return options_.attention.max_relative > 0 ? options_.attention.max_relative : options_.max_position - 1;
}

namespace {

class ScalarGateTerm : public PositionTermImpl {
 public:
  ScalarGateTerm(int64_t table_heads, int64_t k, bool signed_distance) : k_(k), signed_(signed_distance) {
    table_ = register_parameter("w", torch::ones({table_heads, signed_distance ? 2 * k + 1 : k + 1}));  // [H|1, slots]
  }

  torch::Tensor content_scores(const torch::Tensor& q, const torch::Tensor& k) override {
    const int64_t L = q.size(2);
    auto slot = relative_index(L, k_, q.device());   // [L, L], clip(j-i, k) + k
    if (!signed_) slot = (slot - k_).abs();          // [L, L], min(|j-i|, k)
    // The gate stays fp32, and so does the product under bf16/fp16 autocast: the gate starts at
    // 1, and a learned deviation below bf16's spacing there (2^-7) would vanish in a bf16 gate;
    // its backward sums each slot's gradient (up to 2L terms) in fp32.
    auto gate = table_.index_select(1, slot.flatten()).view({-1, L, L});  // [H|1, L, L]
    return torch::matmul(q, k.transpose(-2, -1)) * gate;                 // [B, H, L, L]
  }

  bool fusable() const override { return false; }  // multiplicative: not a float mask
  torch::Tensor position_weights() override { return table_; }

 private:
  int64_t k_;
  bool signed_;
  torch::Tensor table_;
};

}  // namespace

ScalarGateMethod::ScalarGateMethod(const ModelOptions& options, std::string name, bool signed_distance)
    : PositionMethodImpl(options, false), name_(std::move(name)), signed_(signed_distance) {
  clip_distance();  // validates max_relative
}

std::shared_ptr<PositionTermImpl> ScalarGateMethod::make_layer_term(int64_t) {
  return std::make_shared<ScalarGateTerm>(table_heads(), clip_distance(), signed_);
}

std::string describe_clipped(const PositionMethodImpl& method, const std::string& name) {
  return name + " (k=" + std::to_string(method.clip_distance()) +
         (method.options().attention.share_across_heads ? ", shared across heads)" : ", per head)");
}

std::string ScalarGateMethod::describe() const { return describe_clipped(*this, name_); }

namespace {
std::atomic<bool> keep_all_cached{false};  // a CUDA graph was captured: nothing cached is freed
}

void keep_cached_position_tensors() { keep_all_cached = true; }

torch::Tensor cached_position_tensor(const std::array<int64_t, 5>& key, const torch::Device& device,
                                    const std::function<torch::Tensor()>& build) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, std::array<int64_t, 5>>, torch::Tensor> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto id = std::make_tuple(static_cast<int>(device.type()), static_cast<int>(device.index()), key);
  if (auto it = cache.find(id); it != cache.end()) return it->second;
  const c10::InferenceMode no_inference(false);
  auto tensor = build();
  // A run sweeping lengths: start over rather than grow, unless a captured graph reads them.
  if (cache.size() >= 1024 && !keep_all_cached) cache.clear();
  cache.emplace(std::move(id), tensor);
  return tensor;
}

torch::Tensor relative_index(int64_t length, int64_t k, const torch::Device& device) {
  return cached_position_tensor({kRelativeIndex, length, k, 0, 0}, device, [&] {
    auto pos = torch::arange(length, torch::TensorOptions().dtype(torch::kLong).device(device));
    auto rel = pos.unsqueeze(0) - pos.unsqueeze(1);  // [L, L], rel[i, j] = j - i
    return rel.clamp(-k, k) + k;
  });
}

torch::Tensor gather_relative(const torch::Tensor& x, const torch::Tensor& idx) {
  // x: [B, H, L, R]; idx: [L, L] -> expanded (a view, no copy) to [B, H, L, L].
  auto sizes = x.sizes().vec();
  sizes.back() = idx.size(1);
  return x.gather(-1, idx.expand(sizes));
}

namespace {

// gather_relative_wide's autograd node. The forward gathers in x's dtype (a copy: exact); the
// backward widens the incoming gradient to fp32 for a chunk of (b, h) pairs at a time and
// scatter-adds it into an fp32 [B*H, L, R], cast to x's dtype once at the end. Before, x went
// through .to(kFloat) and gather: an fp32 [B, H, L, L] each way (~250 MB at B = 20, H = 12,
// L = 512), where gather's own backward in bf16 would add a clipped end's terms one rounding
// (on CUDA, atomic) add at a time.
class WideSumGather : public torch::autograd::Function<WideSumGather> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& idx,
                               int64_t chunk_bytes) {
    ctx->saved_data["slots"] = x.size(-1);
    ctx->saved_data["chunk_bytes"] = chunk_bytes;
    ctx->save_for_backward({idx});
    return gather_relative(x, idx);  // [B, H, L, L]
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto idx = ctx->get_saved_variables()[0];  // [L, L]
    const auto& g = grads[0];                         // [B, H, L, L]
    const int64_t B = g.size(0), H = g.size(1), L = g.size(2), R = ctx->saved_data["slots"].toInt();
    const auto rows = g.reshape({B * H, L, L});      // a view (also of the key side's transposed gradient)
    auto dx = torch::zeros({B * H, L, R}, g.options().dtype(torch::kFloat));  // [B*H, L, R]
    const int64_t chunk =
        std::max<int64_t>(1, ctx->saved_data["chunk_bytes"].toInt() / std::max<int64_t>(4 * L * L, 1));
    for (int64_t n0 = 0; n0 < B * H; n0 += chunk) {
      const int64_t n = std::min(chunk, B * H - n0);
      dx.narrow(0, n0, n).scatter_add_(-1, idx.expand({n, L, L}), rows.narrow(0, n0, n).to(torch::kFloat));
    }
    return {dx.view({B, H, L, R}).to(g.scalar_type()), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gather_relative_wide(const torch::Tensor& x, const torch::Tensor& idx, int64_t chunk_bytes) {
  TORCH_CHECK(x.dim() == 4 && idx.dim() == 2, "gather_relative_wide: x [B, H, L, R] and idx [L, L], got ", x.sizes(),
              " and ", idx.sizes());
  return WideSumGather::apply(x, idx, chunk_bytes);
}

torch::Tensor narrow_relative(const torch::Tensor& table, int64_t dim, int64_t k, int64_t reach) {
  return table.narrow(dim, k - reach, 2 * reach + 1);
}

torch::Tensor gather_relative_keys(const torch::Tensor& x, const torch::Tensor& idx) {
  // Row j of x at slot idx[i, j] = idx^T[j, i]: gather with idx^T, then swap the two axes.
  return gather_relative(x, idx.t()).transpose(-2, -1);  // [B, H, L, L] (a transposed view)
}

namespace {

// The skew's query blocks when a caller passes 0: 4 blocks of L/4 queries multiply by 1.25 L
// rows each instead of one block's 2 L; on the CPU m4's layer takes 1.21x absolute's time at
// L = 512 against 1.30x with one block (bench/results/attention_cpu.md). One block has fewer
// kernels and copies about as many bytes; the benchmarks' --relative-blocks sets it (the GPU
// check times both).
constexpr int64_t kDefaultSkewBlocks = 4;
std::atomic<int64_t> default_skew_blocks{kDefaultSkewBlocks};

// x . rows^T for x: [B, H, L, d] and rows: [H|1, W, d] -> [B, H, L, W], computed head-major.
// q and k arrive as views of the fused QKV projection ([B, L, 3, H, d] underneath); as
// [H, B*L, d] they are plain strided matrices the GEMM reads in place, and the table is read
// once per head. torch::matmul's broadcasting over B would copy x to [B*H, L, d] and the table
// B times over (and sum the table's gradient back over B).
torch::Tensor times_rows(const torch::Tensor& x, const torch::Tensor& rows) {
  const int64_t B = x.size(0), H = x.size(1), L = x.size(2), d = x.size(3), W = rows.size(-2);
  auto xh = x.transpose(0, 1).reshape({H, B * L, d});  // [H, B*L, d], a view where x's layout allows
  auto s = torch::matmul(xh, rows.to(x.scalar_type()).transpose(-2, -1));  // [H, B*L, W]; rows may be fp32
  return s.view({H, B, L, W}).transpose(0, 1);          // [B, H, L, W]; each [L, W] block row-major
}

// out[.., i, j] = s[.., i, j - i + R - 1] for s: [.., R, W] (row-major [R, W] blocks), whose
// column c holds distance c - (R - 1) from its row, W >= R + cols - 1: row i starts R - 1 - i
// columns in, at i * (W - 1) + R - 1, so the [R, cols] result is one strided view (row stride
// W - 1; rows do not overlap).
torch::Tensor skew_view(const torch::Tensor& s, int64_t cols) {
  auto sizes = s.sizes().vec();
  auto strides = s.strides().vec();
  const int64_t R = sizes.end()[-2], W = sizes.back();
  sizes.back() = cols;
  strides.end()[-2] = W - 1;
  return s.as_strided(sizes, strides, s.storage_offset() + R - 1);
}

// Scores of rows i0 .. i0+lb-1 of y[.., i, j] = x_i . table[clip(sign (j - i), k) + k] against
// every distance the block reaches, from -(i0+lb-1) to L-1-i0 (lb + L - 1 table rows, clipped
// rows repeated; zero rows pad them to a multiple of 8 for aligned GEMMs on tensor cores):
// [B, H, lb, W], whose column c holds distance c - (i0+lb-1), so key j of query i0+i' is at
// c = j - i' + lb - 1: the skew with R = lb. xb: those rows of x, [B, H, lb, d]; L: the keys.
torch::Tensor block_scores(const torch::Tensor& xb, const torch::Tensor& table, int64_t k, int64_t sign, int64_t i0,
                           int64_t L) {
  const int64_t lb = xb.size(2), C = lb + L - 1, W = (C + 7) / 8 * 8;
  auto slots = cached_position_tensor({kSkewSlots, i0, lb, L, sign * (k + 1)}, xb.device(), [&] {
    auto dist = torch::arange(-(i0 + lb - 1), L - i0, torch::TensorOptions().dtype(torch::kLong).device(xb.device()));
    return sign * dist.clamp(-k, k) + k;  // [C]
  });
  auto rows = table.index_select(-2, slots);                         // [H|1, C, d]
  rows = torch::constant_pad_nd(rows, {0, 0, 0, W - C});             // [H|1, W, d]
  return times_rows(xb, rows);                                       // [B, H, lb, W]
}

// y[.., i, j] = x_i . table[clip(sign (j - i), k) + k]: [B, H, L, L].
torch::Tensor signed_relative_scores(const torch::Tensor& x, const torch::Tensor& table, int64_t k, int64_t sign,
                                     int64_t blocks) {
  const int64_t L = x.size(2), reach = relative_reach(k, L);
  // The index steps below (the skew's rows, the gather) sum a clipped end's gradient over up to
  // L - k' terms in their input's dtype: in bf16 or fp16, on CUDA one atomic add a term, that sum
  // loses percents. So the skew's rows index the fp32 table and the gather's backward sums in fp32
  // (gather_relative_wide); the GEMMs (fp32 accumulation) stay in x's dtype.
  const bool reduced = c10::isReducedFloatingType(x.scalar_type());
  auto window = narrow_relative(table, -2, k, reach);  // [H|1, 2k'+1, d]
  if (reduced) window = window.to(torch::kFloat);
  if (blocks <= 0) blocks = default_skew_blocks.load();
  if (relative_layout_suits(L, reach) && x.is_cuda() && relative_layout_usable(x.device())) {
    // One GEMM with every slot's row (padded to a multiple of 8) and one kernel to lay it out as
    // [L, L]. The key side (sign < 0) is laid out in [i, j] order, y[i, j] = x_j . table[clip(j - i)],
    // contiguous: returned transposed here, relative_key_scores' transpose gives it back as is.
    const int64_t rows = 2 * reach + 1, W = (rows + 7) / 8 * 8;
    auto padded = torch::constant_pad_nd(window, {0, 0, 0, W - rows});     // [H|1, W, d]
    auto laid = relative_layout(times_rows(x, padded), reach, sign < 0);  // [B, H, L, L]
    return sign < 0 ? laid.transpose(-2, -1) : laid;
  }
  const int64_t block = (L + blocks - 1) / blocks;
  // Gather when the table is short next to the rows a skewed block multiplies by
  // (measured crossover on CPU at L = 512: k' between L/4 and L/2).
  if (4 * (2 * reach + 1) < 3 * (L + block - 1)) {
    auto idx = relative_index(L, reach, x.device());  // [L, L]: clip(j - i, k') + k'
    if (sign < 0)                                      // clip(i - j, k') + k', kept as well
      idx = cached_position_tensor({kNegatedIndex, L, reach, 0, 0}, x.device(), [&] { return 2 * reach - idx; });
    auto s = times_rows(x, window);                                    // [B, H, L, 2k'+1]
    return reduced ? gather_relative_wide(s, idx) : gather_relative(s, idx);
  }
  // The query blocks are one split of x (not a narrow each, whose gradients would each be a
  // zero x-sized tensor, summed after: the split's is one concatenation). Each block's skew is a
  // view; the concatenation of the views is the one copy (with one block, the copy that gives
  // the fused attention kernel aligned rows). Backward writes each block's slice of the
  // gradient into a zero tensor through the same view (autograd's as_strided backward), so
  // only one block's [B, H, lb, W] gradient is alive at a time.
  std::vector<torch::Tensor> parts;  // [B, H, lb, L] views each
  int64_t i0 = 0;
  for (const auto& xb : x.split(block, 2)) {
    parts.push_back(skew_view(block_scores(xb, window, reach, sign, i0, L), L));
    i0 += xb.size(2);
  }
  return torch::cat(parts, 2);  // [B, H, L, L]
}

}  // namespace

void set_relative_skew_blocks(int64_t blocks) { default_skew_blocks = blocks > 0 ? blocks : kDefaultSkewBlocks; }

torch::Tensor relative_scores(const torch::Tensor& x, const torch::Tensor& table, int64_t k, int64_t blocks) {
  return signed_relative_scores(x, table, k, 1, blocks);
}

torch::Tensor relative_key_scores(const torch::Tensor& x, const torch::Tensor& table, int64_t k, int64_t blocks) {
  // z[j, i] = x_j . table[clip(-(i - j), k) + k] = x_j . table[clip(j - i) + k]; y = z^T.
  return signed_relative_scores(x, table, k, -1, blocks).transpose(-2, -1);
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

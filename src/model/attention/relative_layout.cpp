// The relative-layout kernels on LibTorch tensors (see relative_layout.h): dtypes, strides and
// the stream for relative_layout_cuda.cu, the autograd node, and the check against ATen's
// gather before a device first uses them.
#include "model/attention/relative_layout.h"

#include <atomic>

#include "model/attention/position_method.h"

#ifdef RPE_WITH_RELATIVE_LAYOUT_CUDA
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/attention/relative_layout_kernels.h"
#include "util/kernel_check.h"
#endif

namespace rpe {

namespace {
std::atomic<bool> kernel_on{true};
}

void set_relative_layout_kernel(bool on) { kernel_on = on; }

torch::Tensor relative_layout_reference(const torch::Tensor& s, int64_t k, bool key_side) {
  auto idx = relative_index(s.size(2), k, s.device());  // [L, L]: clip(j - i, k) + k
  return key_side ? gather_relative_keys(s, idx) : gather_relative(s, idx);
}

#ifdef RPE_WITH_RELATIVE_LAYOUT_CUDA
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

rlk::Dtype dtype_of(const Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kDouble: return rlk::Dtype::f64;
    case torch::kFloat: return rlk::Dtype::f32;
    case torch::kBFloat16: return rlk::Dtype::bf16;
    case torch::kHalf: return rlk::Dtype::f16;
    default: TORCH_CHECK(false, "relative layout kernel: no ", t.scalar_type(), " version");
  }
}

rlk::Dims dims(const Tensor& s, int64_t k, bool key_side) {
  return {s.size(0), s.size(1), s.size(2), s.size(3), k, s.stride(0), s.stride(1), key_side};
}

void* stream_of(const Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

class RelativeLayoutFunction : public torch::autograd::Function<RelativeLayoutFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, Tensor s, int64_t k, bool key_side) {
    const int64_t L = s.size(2), W = s.size(3);
    TORCH_CHECK(k >= 0 && k < L && 2 * k + 1 <= W, "relative layout: reach ", k, " for length ", L, ", row ", W);
    if (s.stride(3) != 1 || s.stride(2) != W || !s.is_non_overlapping_and_dense()) s = s.contiguous();
    ctx->saved_data["k"] = k;
    ctx->saved_data["key_side"] = key_side;
    ctx->saved_data["sizes"] = s.sizes().vec();
    ctx->saved_data["strides"] = s.strides().vec();  // the gradient is laid out as s
    const c10::DeviceGuard guard(s.device());
    auto out = torch::empty({s.size(0), s.size(1), L, L}, s.options());
    const auto err = rlk::cuda_layout(dims(s, k, key_side), dtype_of(s), s.data_ptr(), out.data_ptr(), stream_of(s));
    TORCH_CHECK(err.empty(), "relative layout kernel: ", err);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto g = grads[0].contiguous();  // [B, H, L, L]
    const int64_t k = ctx->saved_data["k"].toInt();
    const bool key_side = ctx->saved_data["key_side"].toBool();
    auto ds = torch::empty_strided(ctx->saved_data["sizes"].toIntVector(), ctx->saved_data["strides"].toIntVector(),
                                   g.options());
    const c10::DeviceGuard guard(g.device());
    const auto err = rlk::cuda_layout_grad(dims(ds, k, key_side), dtype_of(g), g.data_ptr(), ds.data_ptr(), stream_of(g));
    TORCH_CHECK(err.empty(), "relative layout kernel: ", err);
    return {ds, Tensor(), Tensor()};
  }
};

// Layouts and gradients on `device` against the reference on the CPU: clipped and not, k = 0,
// padded rows, one tile and several, s strided as times_rows leaves it, both sides, in fp64,
// fp32, bf16 and fp16. The largest difference relative to the reference's largest value, in units
// of the dtype's tolerance.
double disagreement(const torch::Device& device) {
  // The first use may come under inference mode or no_grad (an evaluation): gradients all the same.
  const c10::InferenceMode no_inference(false);
  const torch::AutoGradMode grad_mode(true);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(20200928);  // not the global stream: training's draws stay
  double worst = 0;
  auto note = [&](const Tensor& got, const Tensor& want, double tol) {
    const double scale = std::max(1.0, want.abs().max().item<double>());
    worst = worse_disagreement(worst, (got.cpu().to(torch::kDouble) - want).abs().max().item<double>() / scale / tol);
  };
  struct Case {
    int64_t L, k, W;
  };
  // (70: several 32 x 32 tiles of the key side's kernels, and partial ones at the edges; 300:
  // rows longer than the query side's block, whose threads then take several elements each)
  for (const auto& c : {Case{11, 10, 24}, Case{11, 3, 8}, Case{9, 0, 8}, Case{13, 5, 16}, Case{70, 69, 144},
                        Case{70, 20, 48}, Case{300, 299, 600}})
    for (const bool key_side : {false, true}) {
      auto s = at::randn({3, 2, c.L, c.W}, gen, torch::kDouble).transpose(0, 1);  // [B, H, L, W], H-major
      auto g = at::randn({2, 3, c.L, c.L}, gen, torch::kDouble);
      for (const auto dt : {torch::kDouble, torch::kFloat, torch::kBFloat16, torch::kHalf}) {
        // Rounded once to the dtype from a float sum: within half a step, 2^-8 (bf16) or 2^-11 (fp16).
        const double tol = dt == torch::kBFloat16 ? 1e-2 : dt == torch::kHalf ? 2e-3 : dt == torch::kFloat ? 1e-6 : 1e-12;
        auto sr = s.to(dt).to(torch::kDouble).requires_grad_();  // the dtype's values, exactly
        auto want = relative_layout_reference(sr, c.k, key_side);
        auto want_grad = torch::autograd::grad({want}, {sr}, {g.to(dt).to(torch::kDouble)})[0];
        auto sd = s.to(dt).to(device).requires_grad_();
        auto got = relative_layout(sd, c.k, key_side);
        auto got_grad = torch::autograd::grad({got}, {sd}, {g.to(dt).to(device)})[0];
        note(got, want.detach(), tol);
        note(got_grad, want_grad, tol);
      }
    }
  return worst;
}

}  // namespace

bool relative_layout_kernel_built() { return true; }

bool relative_layout_usable(const torch::Device& device) {
  return kernel_on.load() && device.is_cuda() &&
         cuda_kernel_agrees("relative layout", device, "relative scores take the skew path there", disagreement);
}

torch::Tensor relative_layout(const torch::Tensor& s, int64_t k, bool key_side) {
  TORCH_CHECK(s.is_cuda() && s.dim() == 4, "relative layout kernel: a [B, H, L, W] CUDA tensor, got ", s.sizes(),
              " on ", s.device());
  return RelativeLayoutFunction::apply(s, k, key_side);
}

#else  // no CUDA kernels in this build

bool relative_layout_kernel_built() { return false; }

bool relative_layout_usable(const torch::Device&) { return false; }

torch::Tensor relative_layout(const torch::Tensor&, int64_t, bool) {
  TORCH_CHECK(false, "the relative layout kernel is not in this build (a CUDA LibTorch and nvcc build it)");
}

#endif

}  // namespace rpe

// m3's CUDA kernels on LibTorch tensors: layouts and dtypes for m3_cuda.cu, the stream, and a
// check against the equation before a device first uses them (declared in m3.h).
#include "model/attention/m3.h"

#ifdef RPE_WITH_M3_CUDA
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "model/attention/m3_kernels.h"
#include "util/kernel_check.h"
#endif

namespace rpe {

#ifdef RPE_WITH_M3_CUDA
namespace {

using m3_detail::compute_dtype;
using m3_detail::offset_rows;
using torch::Tensor;

m3k::Dims dims(const Tensor& q, const Tensor& w) {
  return {q.size(0) * q.size(1), q.size(1), w.size(0), q.size(2), q.size(3)};
}

void* stream_of(const Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

template <class T>
T* ptr(const Tensor& t) {
  return t.data_ptr<T>();
}

// e = sum_t q k w as the [B, H, L, L, d] product, in fp64: the check's reference.
Tensor equation(const Tensor& q, const Tensor& k, const Tensor& w, int64_t clip) {
  const int64_t L = q.size(2);
  auto rel = torch::arange(L, torch::kLong).unsqueeze(0) - torch::arange(L, torch::kLong).unsqueeze(1);  // j - i
  auto gate = w.index_select(1, (rel.clamp(-clip, clip) + clip).flatten()).view({w.size(0), L, L, w.size(2)});
  return (q.unsqueeze(3) * k.unsqueeze(2) * gate.unsqueeze(0)).sum(-1);
}

// Scores and gradients on `device` against the equation on the CPU, clipped and not, per-head
// and shared tables, in fp64 and in fp32 (what bf16 and fp32 training run); the largest
// difference relative to the reference's largest value.
double disagreement(const torch::Device& device) {
  // The first use may come under inference mode or no_grad (an evaluation, a prediction): the
  // reference's gradients need autograd all the same.
  const c10::InferenceMode no_inference(false);
  const torch::AutoGradMode grad_mode(true);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(20201020);  // not the global stream: training's draws stay
  const auto opts = torch::TensorOptions(torch::kDouble);
  double worst = 0;
  auto note = [&](const Tensor& got, const Tensor& want) {
    const double scale = std::max(1.0, want.abs().max().item<double>());
    worst = worse_disagreement(worst, (got.cpu().to(torch::kDouble) - want).abs().max().item<double>() / scale);
  };
  for (const auto& [clip, Hw] : {std::pair<int64_t, int64_t>{3, 3}, {20, 1}}) {
    auto q = at::randn({2, 3, 11, 5}, gen, opts), k = at::randn({2, 3, 11, 5}, gen, opts);
    auto w = at::randn({Hw, 2 * clip + 1, 5}, gen, opts), g = at::randn({2, 3, 11, 11}, gen, opts);
    auto qr = q.clone().requires_grad_(), kr = k.clone().requires_grad_(), wr = w.clone().requires_grad_();
    auto want = equation(qr, kr, wr, clip);
    auto want_grads = torch::autograd::grad({(want * g).sum()}, {qr, kr, wr});
    for (const auto dt : {torch::kDouble, torch::kFloat}) {
      const auto on = [&](const Tensor& t) { return t.to(device, dt); };
      note(m3_cuda_forward(on(q), on(k), on(w), clip), want.detach());
      auto got_grads = m3_cuda_grads(on(g), on(q), on(k), on(w), clip);
      for (int i = 0; i < 3; ++i) note(got_grads[i], want_grads[i]);
    }
  }
  return worst;
}

}  // namespace

bool m3_cuda_kernel_built() { return true; }

bool m3_cuda_usable(const torch::Device& device) {
  // fp64 and fp32 against the equation: relative to the reference's largest value, within 1e-5
  return cuda_kernel_agrees("m3", device, "m3 uses its band kernel there",
                            [](const torch::Device& d) { return disagreement(d) / 1e-5; });
}

Tensor m3_cuda_forward(const Tensor& q, const Tensor& k, const Tensor& w, int64_t clip) {
  const c10::DeviceGuard guard(q.device());
  const auto dt = compute_dtype(q);
  const int64_t L = q.size(2);
  auto qc = q.to(dt).contiguous();                                                                     // [B, H, L, d]
  auto kt = k.to(dt).transpose(-2, -1).contiguous();                                                   // [B, H, d, L]
  auto wxt = w.to(dt).index_select(1, offset_rows(L, clip, w.device())).transpose(1, 2).contiguous();  // [Hw, d, W]
  auto e = torch::empty({q.size(0), q.size(1), L, L}, qc.options());
  const auto n = dims(q, w);
  const std::string err =
      dt == torch::kDouble
          ? m3k::cuda_scores(n, ptr<double>(qc), ptr<double>(kt), ptr<double>(wxt), ptr<double>(e), stream_of(q))
          : m3k::cuda_scores(n, ptr<float>(qc), ptr<float>(kt), ptr<float>(wxt), ptr<float>(e), stream_of(q));
  TORCH_CHECK(err.empty(), "m3's CUDA kernel: ", err);
  return e.to(q.scalar_type());
}

std::array<Tensor, 3> m3_cuda_grads(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& w, int64_t clip) {
  const c10::DeviceGuard guard(q.device());
  const auto dt = compute_dtype(q);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), d = q.size(3);
  auto gc = g.to(dt).contiguous();  // [B, H, L, L]
  auto qc = q.to(dt).contiguous(), kc = k.to(dt).contiguous();
  auto rows = offset_rows(L, clip, w.device());
  auto wd = w.to(dt);
  auto wx = wd.index_select(1, rows).contiguous();  // [Hw, W, d]
  auto gq = torch::empty_like(qc), gk = torch::empty_like(kc);
  auto gwx = torch::empty({B * H, 2 * L - 1, d}, qc.options());  // per (batch, head)
  const auto n = dims(q, w);
  const std::string err = dt == torch::kDouble
                              ? m3k::cuda_grads(n, ptr<double>(gc), ptr<double>(qc), ptr<double>(kc), ptr<double>(wx),
                                                ptr<double>(gq), ptr<double>(gk), ptr<double>(gwx), stream_of(q))
                              : m3k::cuda_grads(n, ptr<float>(gc), ptr<float>(qc), ptr<float>(kc), ptr<float>(wx),
                                                ptr<float>(gq), ptr<float>(gk), ptr<float>(gwx), stream_of(q));
  TORCH_CHECK(err.empty(), "m3's CUDA kernel: ", err);
  auto gw_rows = gwx.view({B, H, 2 * L - 1, d}).sum(0);  // [H, W, d]
  if (w.size(0) == 1) gw_rows = gw_rows.sum(0, /*keepdim=*/true);
  auto gw = torch::zeros_like(wd).index_add_(1, rows, gw_rows);  // offsets beyond +-k add into the clipped rows
  return {gq.to(q.scalar_type()), gk.to(k.scalar_type()), gw.to(w.scalar_type())};
}

#else  // no CUDA kernels in this build

bool m3_cuda_kernel_built() { return false; }

bool m3_cuda_usable(const torch::Device&) { return false; }

torch::Tensor m3_cuda_forward(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, int64_t) {
  TORCH_CHECK(false, "m3's CUDA kernel is not in this build (a CUDA LibTorch and nvcc build it)");
}

std::array<torch::Tensor, 3> m3_cuda_grads(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                           const torch::Tensor&, int64_t) {
  TORCH_CHECK(false, "m3's CUDA kernel is not in this build (a CUDA LibTorch and nvcc build it)");
}

#endif

}  // namespace rpe

// The fused post-LN add & norm (add_norm.h): its autograd function, the engines behind it and
// the dispatch between it and the unfused composite.
#include "model/add_norm.h"

#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>

#include <atomic>

#include "model/add_norm_kernels.h"
#include "util/kernel_check.h"

#ifdef RPE_WITH_ADD_NORM_CUDA
#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace rpe {
namespace {

using add_norm_detail::Engine;
using torch::Tensor;

std::atomic<bool> fused_enabled{true};

bool update_dtype_supported(torch::ScalarType t) {
  return t == torch::kFloat || t == torch::kBFloat16 || t == torch::kHalf;
}

// The forward's results, rows of [N, D]: z = x + drop(u) (saved), y = LN(z), y_low = y in u's
// dtype (undefined unless asked for), the rows' mean and 1 / sqrt(biased variance + eps).
struct Rows {
  Tensor z, y, y_low, mean, rstd;
};

// What the kernels compute, row by row, in ATen ops. x, u [N, D].
Rows aten_forward(const Tensor& x, const Tensor& u, const Tensor& keep, double scale, const Tensor& w, const Tensor& b,
                  double eps, bool low) {
  auto v = u.to(torch::kFloat);
  // Multiplied by 0 where dropped, as torch::dropout does: an inf or NaN there gives NaN (a
  // non-finite step), not a silent 0.
  if (keep.defined()) v = v * (keep.to(torch::kFloat) * scale);
  auto z = x + v;
  auto mean = z.mean(-1);
  auto rstd = ((z - mean.unsqueeze(-1)).square().mean(-1) + eps).rsqrt();
  auto y = (z - mean.unsqueeze(-1)) * rstd.unsqueeze(-1) * w + b;
  return {z, y, low ? y.to(u.scalar_type()) : Tensor(), mean, rstd};
}

// dz = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w, dy the sum of both outputs' gradients
// (dy_low: undefined when y_low was not made or not used); {dx, du (in u's dtype), dw, db}.
std::array<Tensor, 4> aten_backward(const Tensor& dy_stream, const Tensor& dy_low, const Tensor& z, const Tensor& mean,
                                    const Tensor& rstd, const Tensor& w, const Tensor& keep, double scale,
                                    torch::ScalarType u_dtype) {
  auto dy = dy_low.defined() ? dy_stream + dy_low.to(torch::kFloat) : dy_stream;
  auto xhat = (z - mean.unsqueeze(-1)) * rstd.unsqueeze(-1);
  auto g = dy * w;
  auto dz = rstd.unsqueeze(-1) * (g - g.mean(-1, true) - xhat * (g * xhat).mean(-1, true));
  auto du = keep.defined() ? dz * (keep.to(torch::kFloat) * scale) : dz;
  return {dz, du.to(u_dtype), (dy * xhat).sum(0), dy.sum(0)};
}

#ifdef RPE_WITH_ADD_NORM_CUDA
addnorm::Dtype kernel_dtype(torch::ScalarType t) {
  return t == torch::kBFloat16 ? addnorm::Dtype::bf16 : t == torch::kHalf ? addnorm::Dtype::f16 : addnorm::Dtype::f32;
}
void* stream_of(const Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
// The mask's bytes: bool and uint8 masks alike hold 0 or 1 in one byte an element.
const uint8_t* bytes(const Tensor& keep) {
  TORCH_CHECK(!keep.defined() || keep.element_size() == 1, "add & norm: a one-byte mask");
  return static_cast<const uint8_t*>(ptr_or_null(keep));
}

Rows cuda_forward(const Tensor& x, const Tensor& u, const Tensor& keep, double scale, const Tensor& w, const Tensor& b,
                  double eps, bool low) {
  // The kernel takes N and D from x and reads every other input by them, unchecked: a mismatch
  // would be an illegal address, which ends the process's CUDA context (no fallback after it).
  const auto on_x = [&](const Tensor& t) { return !t.defined() || t.device() == x.device(); };
  TORCH_CHECK(x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat,
              "add & norm's CUDA kernel: x, weight and bias in fp32");
  TORCH_CHECK(u.scalar_type() == torch::kFloat || u.scalar_type() == torch::kBFloat16 || u.scalar_type() == torch::kHalf,
              "add & norm's CUDA kernel: an fp32, bf16 or fp16 update, not ", u.scalar_type());
  TORCH_CHECK(u.sizes() == x.sizes() && (!keep.defined() || keep.sizes() == x.sizes()) && w.numel() == x.size(1) &&
                  b.numel() == x.size(1),
              "add & norm's CUDA kernel: update and mask of x's shape ", x.sizes(), ", weight and bias of its width");
  TORCH_CHECK(x.is_cuda() && on_x(u) && on_x(keep) && on_x(w) && on_x(b), "add & norm's CUDA kernel: inputs on one CUDA device");
  const c10::DeviceGuard guard(x.device());
  const addnorm::Rows n{x.size(0), x.size(1)};
  Rows r{torch::empty_like(x), torch::empty_like(x), low ? torch::empty_like(u) : Tensor(),
         torch::empty({n.N}, x.options()), torch::empty({n.N}, x.options())};
  const auto err = addnorm::cuda_forward(n, x.data_ptr<float>(), u.data_ptr(), kernel_dtype(u.scalar_type()),
                                         bytes(keep), static_cast<float>(scale), w.data_ptr<float>(),
                                         b.data_ptr<float>(), static_cast<float>(eps), r.z.data_ptr<float>(),
                                         r.y.data_ptr<float>(), ptr_or_null(r.y_low), r.mean.data_ptr<float>(),
                                         r.rstd.data_ptr<float>(), stream_of(x));
  TORCH_CHECK(err.empty(), "add & norm's CUDA kernel: ", err);
  return r;
}

std::array<Tensor, 4> cuda_backward(const Tensor& dy, const Tensor& dy_low, const Tensor& z, const Tensor& mean,
                                    const Tensor& rstd, const Tensor& w, const Tensor& keep, double scale,
                                    torch::ScalarType u_dtype) {
  const c10::DeviceGuard guard(z.device());
  const addnorm::Rows n{z.size(0), z.size(1)};
  TORCH_CHECK(!dy_low.defined() || dy_low.scalar_type() == u_dtype, "add & norm: y_low's gradient in u's dtype");
  auto dx = torch::empty_like(z), du = torch::empty(z.sizes(), z.options().dtype(u_dtype));
  auto parts = torch::empty({2, addnorm::backward_parts(n.N), n.D}, z.options());  // dw, db per row block
  const auto err = addnorm::cuda_backward(n, dy.data_ptr<float>(), ptr_or_null(dy_low), z.data_ptr<float>(),
                                          mean.data_ptr<float>(), rstd.data_ptr<float>(), w.data_ptr<float>(),
                                          bytes(keep), static_cast<float>(scale), dx.data_ptr<float>(),
                                          du.data_ptr(), kernel_dtype(u_dtype), parts[0].data_ptr<float>(),
                                          parts[1].data_ptr<float>(), stream_of(z));
  TORCH_CHECK(err.empty(), "add & norm's CUDA kernel: ", err);
  auto sums = parts.sum(1);  // [2, D]
  return {dx, du, sums[0], sums[1]};
}
#else
[[noreturn]] void not_built() { TORCH_CHECK(false, "add & norm's CUDA kernel is not in this build"); }
Rows cuda_forward(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&, const Tensor&, double, bool) {
  not_built();
}
std::array<Tensor, 4> cuda_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                    const Tensor&, const Tensor&, double, torch::ScalarType) {
  not_built();
}
#endif

// Saves z (fp32) and the row statistics, not the update, the sum or the normalised rows.
// Outputs {y} or, with `low`, {y, y_low}.
struct AddNormFunction : torch::autograd::Function<AddNormFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const Tensor& x,
                                                const Tensor& u, const Tensor& keep, double scale, const Tensor& w,
                                                const Tensor& b, double eps, bool on_kernel, bool low) {
    const int64_t D = x.size(-1);
    auto x2 = x.contiguous().view({-1, D}), u2 = u.contiguous().view({-1, D});
    auto k2 = keep.numel() > 0 ? keep.contiguous().view({-1, D}) : Tensor();  // empty: no dropout
    auto r = on_kernel ? cuda_forward(x2, u2, k2, scale, w.contiguous(), b.contiguous(), eps, low)
                       : aten_forward(x2, u2, k2, scale, w, b, eps, low);
    ctx->save_for_backward({r.z, r.mean, r.rstd, w, k2});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["u_dtype"] = static_cast<int64_t>(u.scalar_type());
    ctx->saved_data["kernel"] = on_kernel;
    ctx->saved_data["shape"] = x.sizes().vec();
    if (!low) return {r.y.view(x.sizes())};
    return {r.y.view(x.sizes()), r.y_low.view(x.sizes())};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& z = saved[0];
    const auto rows = [&](const Tensor& g) { return g.contiguous().view({-1, z.size(1)}); };
    // An output nothing read has an undefined gradient: y's counts as zeros, y_low's as none.
    auto dy = grads[0].defined() ? rows(grads[0].to(torch::kFloat)) : torch::zeros_like(z);
    auto dy_low = grads.size() > 1 && grads[1].defined() ? rows(grads[1]) : Tensor();
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto u_dtype = static_cast<torch::ScalarType>(ctx->saved_data["u_dtype"].toInt());
    auto [dx, du, dw, db] =
        ctx->saved_data["kernel"].toBool()
            ? cuda_backward(dy, dy_low, z, saved[1], saved[2], saved[3].contiguous(), saved[4], scale, u_dtype)
            : aten_backward(dy, dy_low, z, saved[1], saved[2], saved[3], saved[4], scale, u_dtype);
    const auto shape = ctx->saved_data["shape"].toIntVector();
    return {dx.view(shape), du.view(shape), Tensor(), Tensor(), dw, db, Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

namespace add_norm_detail {

// How far the kernels are from the ATen engine on `device`: the largest difference relative to
// the largest reference value, over the outputs and every gradient, divided by its tolerance
// (passes below 1). fp32 results agree to reduction order: 1e-4. Results rounded to bf16 (y_low;
// du of a bf16 update) may land one bf16 step apart where the fp32 values before rounding straddle
// a boundary: 1e-2 (a step is 2^-8 of the value; a wrong index or scale is far larger).
// An fp32 update, and bf16 and fp16 ones with y_low made and read, with and without dropout, at
// widths that leave lanes and warps idle (80, 768) and row counts that leave a block part-filled;
// 8300 rows take the backward's loop over several row blocks per part (over 8192 rows, as every
// BERT-base step has: B·L = 32k to 131k); 17 leaves most of a warp idle, 4096 (the widest row
// the kernel takes, addnorm::kMaxWidth) fills 32 KiB of the backward's shared memory.
double disagreement(const torch::Device& device, Engine engine) {
  const c10::InferenceMode no_inference(false);  // the first use may come under no_grad
  const torch::AutoGradMode grad_mode(true);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(20171206);  // not the global stream
  double worst = 0;
  for (const auto& [N, D] : {std::pair<int64_t, int64_t>{37, 80}, {300, 768}, {8300, 80}, {3, 17}, {5, 4096}}) {
    for (const auto ut : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      for (const bool drop : {false, true}) {
        const bool low = ut != torch::kFloat;
        const auto on = [&](const Tensor& t) { return t.to(device); };
        auto x = on(at::randn({N, D}, gen)), u = on(at::randn({N, D}, gen).to(ut)), g = on(at::randn({N, D}, gen));
        auto w = on(at::rand({D}, gen) + 0.5), b = on(at::randn({D}, gen));
        auto keep = drop ? on(at::rand({N, D}, gen) > 0.1) : Tensor();
        std::vector<Tensor> outs;
        for (const auto e : {engine, Engine::aten}) {
          std::vector<Tensor> leaves{x.clone().requires_grad_(), u.clone().requires_grad_(),
                                     w.clone().requires_grad_(), b.clone().requires_grad_()};
          auto r = add_norm_detail::fused(leaves[0], leaves[1], keep, 1 / 0.9, leaves[2], leaves[3], 1e-12, e, low);
          auto loss = (r.y * g).sum();
          if (low) loss = loss + (r.y_low.to(torch::kFloat) * g.flip(1)).sum();
          auto grads = torch::autograd::grad({loss}, leaves);
          outs.push_back(r.y.detach());
          outs.push_back(low ? r.y_low.detach() : r.y.detach());
          for (auto& t : grads) outs.push_back(t);
        }
        const size_t half = outs.size() / 2;
        for (size_t i = 0; i < half; ++i) {
          const auto want = outs[half + i].to(torch::kFloat), got = outs[i].to(torch::kFloat);
          const double tol = outs[half + i].scalar_type() == torch::kFloat ? 1e-4 : 1e-2;
          const double s = std::max(1.0, want.abs().max().item<double>());
          worst = worse_disagreement(worst, (got - want).abs().max().item<double>() / s / tol);
        }
      }
    }
  }
  return worst;
}

AddNormOutput fused(const Tensor& x, const Tensor& update, const Tensor& keep, double scale, const Tensor& weight,
                    const Tensor& bias, double eps, Engine engine, bool low) {
  // An undefined tensor cannot enter autograd::Function::apply: no mask goes in as an empty one.
  auto mask = keep.defined() ? keep : torch::empty({0}, x.options().dtype(torch::kUInt8));
  auto out = AddNormFunction::apply(x, update, mask, scale, weight, bias, eps, engine == Engine::cuda, low);
  return {out[0], low ? out[1] : Tensor()};
}

Tensor composite(const Tensor& x, const Tensor& update, const Tensor& keep, double scale, const Tensor& weight,
                 const Tensor& bias, double eps) {
  auto dropped = keep.defined() ? update * keep * scale : update;
  return torch::layer_norm(x + dropped.to(x.scalar_type()), {x.size(-1)}, weight, bias, eps);
}

}  // namespace add_norm_detail

void set_fused_add_norm(bool enabled) { fused_enabled = enabled; }

#ifdef RPE_WITH_ADD_NORM_CUDA
bool add_norm_kernel_built() { return true; }
#else
bool add_norm_kernel_built() { return false; }
#endif

bool add_norm_kernel_usable(const torch::Device& device) {
  return add_norm_kernel_built() &&
         cuda_kernel_agrees("add & norm", device, "the unfused path runs there",
                            [](const torch::Device& d) { return add_norm_detail::disagreement(d, Engine::cuda); });
}

AddNormOutput add_norm(const Tensor& x, const Tensor& update, double dropout, bool training, torch::nn::LayerNorm norm,
                       bool low) {
  const auto& w = norm->weight;
  const auto& b = norm->bias;
  // Every precondition of cuda_forward, so that what the kernel cannot take falls back rather than
  // throwing (a broadcast update, one on another device).
  const bool kernel = fused_enabled && x.is_cuda() && x.scalar_type() == torch::kFloat &&
                      update.sizes() == x.sizes() && update.device() == x.device() &&
                      update_dtype_supported(update.scalar_type()) && w.defined() && b.defined() &&
                      w.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat &&
                      x.size(-1) <= addnorm::kMaxWidth && add_norm_kernel_usable(x.device());
  if (!kernel) return {norm->forward(x + torch::dropout(update, dropout, training).to(x.scalar_type())), Tensor()};
  const bool drop = training && dropout > 0;
  Tensor keep;
  if (drop) keep = torch::empty(update.sizes(), update.options().dtype(torch::kUInt8)).bernoulli_(1 - dropout);
  const double scale = drop && dropout < 1 ? 1 / (1 - dropout) : drop ? 0.0 : 1.0;
  return add_norm_detail::fused(x, update, keep, scale, w, b, norm->options.eps(), Engine::cuda,
                                low && update.scalar_type() != x.scalar_type());
}

}  // namespace rpe

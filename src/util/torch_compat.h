// The LibTorch API differences across 2.x that rpe-train meets, in one place, so the rest of the
// code reads as written against the current API. Checked by compiling against the headers of
// 2.0 to 2.4 besides the pinned 2.11 (docs/layout.md, "LibTorch versions").
//   * Autocast: 2.4 made it device-generic (is_autocast_enabled(type), get/set_autocast_dtype);
//     before, CUDA and CPU had functions of their own.
//   * c10::Event::synchronize() arrived in 2.4; before, a finished event is waited for by query().
//   * Optimizer::state() is keyed by the parameter's TensorImpl* from 2.2 on; before, by that
//     address printed as a string. ProcessGroupNCCL::shutdown() arrived in 2.2.
//   * Tensor::const_data_ptr arrived in 2.1, and so did post-accumulate-grad hooks; before, the
//     same moment is a post hook on the parameter's AccumulateGrad node.
//   * scaled_dot_product_attention takes a scale from 2.1 on; c10::optional is std::optional
//     from 2.2 on (before, ATen's optional arguments do not take a std::optional).
#pragma once
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/TensorOptions.h>
#include <c10/core/Event.h>
#include <c10/util/string_utils.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/version.h>

#include <cmath>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

// True when the LibTorch compiled against is 2.x with x < minor.
#define RPE_TORCH_BEFORE(minor) (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < (minor))

namespace rpe::compat {

// The key of a parameter's slot in torch::optim::Optimizer::state(), from its TensorImpl.
inline auto optimizer_state_key(c10::TensorImpl* param) {
#if RPE_TORCH_BEFORE(2)
  return c10::guts::to_string(param);
#else
  return static_cast<void*>(param);
#endif
}
inline auto optimizer_state_key(const at::Tensor& param) { return optimizer_state_key(param.unsafeGetTensorImpl()); }

// Read-only pointer to a tensor's data (no copy-on-write materialisation where that exists).
template <typename T>
const T* const_data_ptr(const at::Tensor& t) {
#if RPE_TORCH_BEFORE(1)
  return t.data_ptr<T>();
#else
  return t.const_data_ptr<T>();
#endif
}

// at::scaled_dot_product_attention with an explicit softmax scale and an undefined `mask`
// meaning none. Before 2.1 the kernel always scales by 1/sqrt(d), so q is prescaled to match.
inline at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               const at::Tensor& mask, double dropout_p, double scale) {
#if RPE_TORCH_BEFORE(2)
  const c10::optional<at::Tensor> m = mask.defined() ? c10::optional<at::Tensor>(mask) : c10::nullopt;
#else
  const std::optional<at::Tensor> m = mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt;
#endif
#if RPE_TORCH_BEFORE(1)
  const double d = static_cast<double>(q.size(-1));
  return at::scaled_dot_product_attention(q * (scale * std::sqrt(d)), k, v, m, dropout_p, false);
#else
  return at::scaled_dot_product_attention(q, k, v, m, dropout_p, false, scale);
#endif
}

// Calls `fn` each time a backward has accumulated a gradient into `param.grad()` (on the
// autograd thread) through a post hook on the parameter's AccumulateGrad node: the pre-2.1 way
// (DDP's reducer did this), kept callable everywhere so a test runs it on any LibTorch.
// Returns the function that removes the hook.
inline std::function<void()> on_accumulate_grad_node(const at::Tensor& param, std::function<void()> fn) {
  struct Hook : torch::autograd::FunctionPostHook {
    explicit Hook(std::function<void()> f) : f(std::move(f)) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list&) override {
      f();
      return outputs;
    }
    std::function<void()> f;
  };
  // The parameter holds its accumulator weakly; the remover keeps it alive, so later graphs use it.
  std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(param);
  const auto key = acc->add_post_hook(std::make_unique<Hook>(std::move(fn)));
  return [acc, key] { acc->del_post_hook(key); };
}

// The same through a post-accumulate-grad hook (one per parameter) from 2.1 on, else the above.
inline std::function<void()> on_gradient_accumulated(const at::Tensor& param, std::function<void()> fn) {
#if RPE_TORCH_BEFORE(1)
  return on_accumulate_grad_node(param, std::move(fn));
#else
  struct Hook : torch::autograd::PostAccumulateGradHook {
    explicit Hook(std::function<void()> f) : f(std::move(f)) {}
    void operator()(const torch::autograd::Variable&) override { f(); }
    std::function<void()> f;
  };
  torch::autograd::impl::set_post_acc_grad_hooks(param, std::make_unique<Hook>(std::move(fn)));
  return [param] { torch::autograd::impl::set_post_acc_grad_hooks(param, nullptr); };
#endif
}

// Whether ATen operator `name` (e.g. "aten::_fused_adamw_") has a kernel for `device`'s backend:
// some fused kernels reached the CPU only in later versions (_fused_adamw_ in 2.4).
inline bool has_kernel(const char* name, const c10::Device& device) {
  const auto op = c10::Dispatcher::singleton().findSchema({name, ""});
  return op && op->hasKernelForDispatchKey(c10::computeDispatchKey(c10::nullopt, c10::kStrided, device));
}

inline bool autocast_enabled(at::DeviceType type) {
#if RPE_TORCH_BEFORE(4)
  return type == at::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#else
  return at::autocast::is_autocast_enabled(type);
#endif
}

inline at::ScalarType get_autocast_dtype(at::DeviceType type) {
#if RPE_TORCH_BEFORE(4)
  return type == at::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#else
  return at::autocast::get_autocast_dtype(type);
#endif
}

inline void set_autocast(at::DeviceType type, bool enabled, at::ScalarType dtype) {
#if RPE_TORCH_BEFORE(4)
  if (type == at::kCUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
#else
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, enabled);
#endif
}

// Blocks until the work recorded by `event` is done.
inline void wait(const c10::Event& event) {
#if RPE_TORCH_BEFORE(4)
  while (!event.query()) std::this_thread::yield();
#else
  event.synchronize();
#endif
}

}  // namespace rpe::compat

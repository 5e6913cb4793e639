// The saved-tensor hooks that rebuild a fused SDPA node's mask in backward (see saved_mask.h).
#include "model/saved_mask.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/autocast_guard.h"
#include "util/torch_compat.h"

#if !RPE_TORCH_BEFORE(11)
#include <torch/csrc/autograd/generated/Functions.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>
#endif

namespace rpe {

#if !RPE_TORCH_BEFORE(11)
namespace {

namespace gen = torch::autograd::generated;

// Lets the mask go when the node saves it and makes it again when the node's backward reads it.
// A tensor other than the mask itself (SDPA padded or broadcast it into a copy or view of another
// layout) is kept as it came: the rebuilt mask would not have its layout.
class RebuiltMask final : public torch::autograd::SavedVariableHooks {
 public:
  RebuiltMask(const torch::Tensor& mask, std::function<torch::Tensor()> rebuild)
      : rebuild_(std::move(rebuild)), device_(mask.device()), dtype_(mask.scalar_type()), sizes_(mask.sizes().vec()),
        data_(mask.data_ptr()) {
    const auto type = mask.device().type();
    autocast_ = compat::autocast_enabled(type) ? compat::get_autocast_dtype(type) : at::kFloat;
  }

  void call_pack_hook(const at::Tensor& saved) override {
    const bool ours = saved.data_ptr() == data_ && saved.sizes() == sizes_ && saved.is_contiguous();
    if (!ours) kept_ = saved;
  }

  at::Tensor call_unpack_hook() override {
    if (kept_.defined()) return kept_;
    const torch::NoGradGuard no_grad;
    const AutocastGuard autocast(device_, autocast_);
    auto mask = rebuild_();
    TORCH_CHECK(mask.defined() && mask.sizes() == sizes_ && mask.scalar_type() == dtype_ && mask.device() == device_,
                "rebuilding the attention mask for backward: got ", mask.defined() ? mask.sizes() : at::IntArrayRef{},
                ", expected ", at::IntArrayRef(sizes_), " ", dtype_, " on ", device_);
    return mask.contiguous();
  }

  bool rebuilds() const { return !kept_.defined(); }

 private:
  std::function<torch::Tensor()> rebuild_;
  torch::Device device_;
  at::ScalarType dtype_, autocast_ = at::kFloat;
  std::vector<int64_t> sizes_;
  const void* data_;
  torch::Tensor kept_;
};

// The mask the node behind `context` keeps for its backward; null for a node that keeps none.
torch::autograd::SavedVariable* saved_mask_of(torch::autograd::Node* node) {
  // By name, then static_cast: the generated node types' RTTI is not part of LibTorch's interface.
  const std::string name = node->name();
  if (name == "ScaledDotProductEfficientAttentionBackward0")
    return &static_cast<gen::ScaledDotProductEfficientAttentionBackward0*>(node)->attn_bias_;
  if (name == "ScaledDotProductCudnnAttentionBackward0")
    return &static_cast<gen::ScaledDotProductCudnnAttentionBackward0*>(node)->attn_bias_;
  if (name == "ScaledDotProductFlashAttentionForCpuBackward0")
    return &static_cast<gen::ScaledDotProductFlashAttentionForCpuBackward0*>(node)->attn_mask_;
  return nullptr;
}

}  // namespace

bool rebuild_mask_in_backward(const torch::Tensor& context, const torch::Tensor& mask,
                              std::function<torch::Tensor()> rebuild) {
  const auto node = context.grad_fn();
  if (!node || !mask.defined()) return false;
  auto* saved = saved_mask_of(node.get());
  if (saved == nullptr) return false;
  auto hooks = std::make_unique<RebuiltMask>(mask, std::move(rebuild));
  const RebuiltMask* registered = hooks.get();
  saved->register_hooks(std::move(hooks));  // calls the pack hook, then drops the node's reference
  return registered->rebuilds();
}

#else  // before LibTorch 2.11 the node's saved mask stays: the generated nodes it reads are 2.11's

bool rebuild_mask_in_backward(const torch::Tensor&, const torch::Tensor&, std::function<torch::Tensor()>) {
  return false;
}

#endif

}  // namespace rpe

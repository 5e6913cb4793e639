// The unfused attention's softmax and dropout-then-values (see probabilities.h).
#include "model/attention/probabilities.h"

#include "util/torch_compat.h"

namespace rpe {
namespace {

// m1-m3's logits are fp32 on purpose (their gates' deviations from 1 are finer than bf16), so
// their P would be fp32 on the CPU too; the other methods' logits are bf16.
class KeptSoftmax : public torch::autograd::Function<KeptSoftmax> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               c10::ScalarType kept) {
    auto p = at::_softmax(logits, -1, /*half_to_float=*/false).to(kept);  // _softmax: on no autocast list
    ctx->saved_data["logits_dtype"] = static_cast<int64_t>(logits.scalar_type());
    ctx->save_for_backward({p});
    return p;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto p = ctx->get_saved_variables()[0];
    const auto logits_dtype = static_cast<c10::ScalarType>(ctx->saved_data["logits_dtype"].toInt());
    // dL/dlogits = p (g - sum(g p)), its sums in fp32 inside the kernel, then in the logits' type.
    auto g = at::_softmax_backward_data(grads[0].to(p.scalar_type()), p, -1, p.scalar_type());
    return {g.to(logits_dtype), torch::Tensor()};
  }
};

// The dropped P is made again in backward from P and the mask (probabilities.h).
class DroppedValues : public torch::autograd::Function<DroppedValues> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& probs,
                                                const torch::Tensor& v, double p) {
    auto [dropped, keep] = at::native_dropout(probs, p, /*train=*/true);  // as torch::dropout draws on CUDA
    auto context = at::matmul(dropped, v);
    ctx->save_for_backward({probs, keep, v});
    ctx->saved_data["scale"] = 1.0 / (1.0 - p);
    return {context, dropped};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &probs = saved[0], &keep = saved[1], &v = saved[2];
    const double scale = ctx->saved_data["scale"].toDouble();
    torch::Tensor grad_probs, grad_v;
    if (grads[0].defined()) {
      grad_v = at::native_dropout_backward(probs, keep, scale).transpose(-2, -1).matmul(grads[0]);
      grad_probs = grads[0].matmul(v.transpose(-2, -1));  // dL/d(dropped P)
    }
    if (grads[1].defined()) grad_probs = grad_probs.defined() ? grad_probs + grads[1] : grads[1];
    if (grad_probs.defined()) grad_probs = at::native_dropout_backward(grad_probs, keep, scale);
    return {grad_probs, grad_v, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor softmax_kept_in_autocast_type(const torch::Tensor& logits) {
  const auto type = logits.device().type();
  // Without autocast, or for fp64 logits (which autocast leaves alone), the plain softmax.
  if (!compat::autocast_enabled(type) || logits.scalar_type() == torch::kDouble) return torch::softmax(logits, -1);
  return KeptSoftmax::apply(logits, compat::get_autocast_dtype(type));
}

std::pair<torch::Tensor, torch::Tensor> dropout_then_values(const torch::Tensor& probs, const torch::Tensor& v,
                                                            double p) {
  if (p <= 0) return {torch::matmul(probs, v), probs};
  if (p >= 1) {  // everything dropped
    auto none = torch::dropout(probs, p, true);
    return {torch::matmul(none, v), none};
  }
  auto out = DroppedValues::apply(probs, v, p);
  return {out[0], out[1]};
}

}  // namespace rpe

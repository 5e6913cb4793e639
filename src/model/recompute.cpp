// Activation checkpointing: an autograd function whose forward runs a piece of the model and
// keeps its inputs, and whose backward runs the piece again and backpropagates through that
// second graph (a reentrant backward).
#include "model/recompute.h"

#include <ATen/Context.h>
#include <ATen/core/ivalue.h>

#include <mutex>
#include <utility>
#include <vector>

#include "util/autocast_guard.h"
#include "util/errors.h"
#include "util/torch_compat.h"

namespace rpe {

Recompute parse_recompute(const std::string& value) {
  if (value == "none") return Recompute::none;
  if (value == "attention") return Recompute::attention;
  if (value == "layers") return Recompute::layers;
  if (value == "bias") return Recompute::bias;
  throw UserError("train.activation_checkpointing: must be none, attention, layers or bias, got '" + value + "'");
}

std::string describe_recompute(Recompute what) {
  switch (what) {
    case Recompute::attention: return "each layer's attention core recomputed in backward";
    case Recompute::layers: return "each encoder layer recomputed in backward";
    case Recompute::bias: return "each layer's position bias rebuilt in backward, not kept by the fused attention kernel";
    case Recompute::none: break;
  }
  return "";
}

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The random generators a forward may draw from: the CPU's, and the device's (dropout, SDPA's
// dropout and the fused add & norm's mask all take the device's default generator).
std::vector<at::Generator> generators_of(const torch::Device& device) {
  std::vector<at::Generator> g{at::detail::getDefaultCPUGenerator()};
  if (device.type() != torch::kCPU) g.push_back(at::globalContext().defaultGenerator(device));
  return g;
}

std::vector<Tensor> states_of(std::vector<at::Generator>& generators) {
  std::vector<Tensor> states;
  for (auto& g : generators) {
    const std::lock_guard<std::mutex> lock(g.mutex());
    states.push_back(g.get_state());
  }
  return states;
}

void set_states(std::vector<at::Generator>& generators, const std::vector<Tensor>& states) {
  for (size_t i = 0; i < generators.size(); ++i) {
    const std::lock_guard<std::mutex> lock(generators[i].mutex());
    generators[i].set_state(states[i]);
  }
}

// One recomputed call: what its backward needs besides the saved inputs.
struct Call : torch::CustomClassHolder {
  RecomputedFn fn;
  std::vector<bool> input_defined;   // an undefined input enters apply as an empty tensor
  std::vector<bool> output_defined;  // only defined outputs leave it
  torch::Device device = torch::kCPU;
  at::ScalarType autocast = at::kFloat;  // the forward pass's autocast type on `device` (kFloat: none)
  std::vector<at::Generator> generators;
  std::vector<Tensor> rng;  // the generators' states when the forward pass began
};

// Sets the generators back to the forward pass's states for its lifetime, then to where they
// were: the draws after this backward are those they would have been without it.
class RngReplay {
 public:
  explicit RngReplay(Call& call) : call_(call), now_(states_of(call.generators)) { set_states(call_.generators, call_.rng); }
  ~RngReplay() { set_states(call_.generators, now_); }
  RngReplay(const RngReplay&) = delete;
  RngReplay& operator=(const RngReplay&) = delete;

 private:
  Call& call_;
  std::vector<Tensor> now_;
};

// fn on fresh leaves made from the inputs (requires_grad as `needs` says; undefined where the
// input was), with autograd on, under the forward pass's autocast state.
struct Pass {
  variable_list leaves, outputs;
};
Pass run(const Call& call, const variable_list& inputs, const std::function<bool(size_t)>& needs) {
  Pass p;
  for (size_t i = 0; i < inputs.size(); ++i)
    p.leaves.push_back(call.input_defined[i] ? inputs[i].detach().requires_grad_(needs(i)) : Tensor());
  const torch::AutoGradMode grad(true);
  const AutocastGuard autocast(call.device, call.autocast);
  p.outputs = call.fn(p.leaves);
  return p;
}

struct RecomputedFunction : torch::autograd::Function<RecomputedFunction> {
  // inputs: a TensorList, which apply takes for a list of inputs (a std::vector would be one argument that is no tensor).
  static variable_list forward(AutogradContext* ctx, at::TensorList input_list, c10::intrusive_ptr<Call> call) {
    const variable_list inputs = input_list.vec();
    ctx->save_for_backward(inputs);
    call->rng = states_of(call->generators);
    // With autograd on as in the recomputation (see recompute.h); its graph is dropped on return.
    auto p = run(*call, inputs, [&](size_t i) { return inputs[i].requires_grad(); });
    variable_list out;
    for (const auto& t : p.outputs) {
      call->output_defined.push_back(t.defined());
      if (t.defined()) out.push_back(t.detach());
    }
    ctx->saved_data["call"] = c10::IValue::make_capsule(std::move(call));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto holder = ctx->saved_data["call"].toCapsule();
    auto& call = static_cast<Call&>(*holder);
    Pass p;
    {
      const RngReplay replay(call);
      p = run(call, ctx->get_saved_variables(), [&](size_t i) { return ctx->needs_input_grad(i); });
    }
    // grads[k] belongs to the k-th defined output; one nothing read has none and is left out.
    variable_list outs, out_grads;
    for (size_t i = 0, k = 0; i < p.outputs.size(); ++i) {
      if (!call.output_defined[i]) continue;
      if (grads[k].defined()) {
        outs.push_back(p.outputs[i]);
        out_grads.push_back(grads[k]);
      }
      ++k;
    }
    if (!outs.empty()) torch::autograd::backward(outs, out_grads);
    variable_list input_grads;
    for (const auto& leaf : p.leaves) input_grads.push_back(leaf.defined() ? leaf.grad() : Tensor());
    input_grads.emplace_back();  // the call
    return input_grads;
  }
};

}  // namespace

variable_list recomputed(const RecomputedFn& fn, const variable_list& inputs) {
  bool any = false;
  for (const auto& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any || !torch::GradMode::is_enabled()) return fn(inputs);
  auto call = c10::make_intrusive<Call>();
  call->fn = fn;
  variable_list in;
  for (const auto& t : inputs) {
    call->input_defined.push_back(t.defined());
    if (t.defined()) call->device = t.device();
  }
  for (const auto& t : inputs) in.push_back(t.defined() ? t : torch::empty({0}, torch::TensorOptions().device(call->device)));
  const auto type = call->device.type();
  call->autocast = compat::autocast_enabled(type) ? compat::get_autocast_dtype(type) : at::kFloat;
  call->generators = generators_of(call->device);
  auto out = RecomputedFunction::apply(at::TensorList(in), call);
  variable_list result;
  for (size_t i = 0, k = 0; i < call->output_defined.size(); ++i) result.push_back(call->output_defined[i] ? out[k++] : Tensor());
  return result;
}

}  // namespace rpe

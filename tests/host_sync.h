// Catches host synchronisations by the ops that cause them, on the CPU as on CUDA: while a
// HostSyncWatch lives, every ATen op this thread dispatches (at any depth, the autograd
// engine's threads included: they inherit this thread's callbacks) whose result the host must
// wait for is recorded when it touches a tensor on the watched device:
//   _local_scalar_dense (item(), operator bool, is_nonzero), nonzero, masked_select, unique*,
//   repeat_interleave (its output size), bincount, histc, equal;
//   on CUDA also a blocking copy_ between host and device (either way: the host waits).
// On the CPU nothing really waits, but the same code on CUDA would: that is what the tests
// check without a GPU (scripts/gpu_check.sh runs them on CUDA too). Host-side work that uses
// such ops on host tensors (a task building its next batch) runs under HostSyncWatch::Pause.
#pragma once
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace rpe::test {

class HostSyncWatch {
 public:
  explicit HostSyncWatch(torch::Device device) {
    auto& s = state();
    s.device = device;
    s.syncs.clear();
    s.paused = false;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&HostSyncWatch::enter, &HostSyncWatch::leave)
            .needsInputs(true)
            .scopes({at::RecordScope::FUNCTION}));
  }
  ~HostSyncWatch() { at::removeCallback(handle_); }
  HostSyncWatch(const HostSyncWatch&) = delete;
  HostSyncWatch& operator=(const HostSyncWatch&) = delete;

  // The ops recorded so far, in order, each with the ops it ran inside
  // ("aten::item>aten::_local_scalar_dense", ...).
  std::vector<std::string> syncs() const {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().syncs;
  }
  size_t count() const { return syncs().size(); }
  std::string list() const {
    std::string s;
    for (const auto& n : syncs()) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? "none" : s;
  }

  // Not watched while it lives (host-side batch building).
  class Pause {
   public:
    Pause() : was_(state().paused.exchange(true)) {}
    ~Pause() { state().paused = was_; }

   private:
    bool was_;
  };

 private:
  // One per process (one watch at a time): the autograd engine's device threads run the
  // callback too and must record into the same list.
  struct State {
    torch::Device device = torch::kCPU;
    std::vector<std::string> syncs;
    std::atomic<bool> paused{false};
    std::mutex mutex;
  };
  static State& state() {
    static State s;
    return s;
  }
  // This thread's ops being dispatched, outermost first ("aten::where>aten::nonzero").
  static std::vector<std::string>& stack() {
    thread_local std::vector<std::string> ops;
    return ops;
  }
  static void record(const std::string& what) {
    std::string path;
    for (const auto& op : stack()) path += (path.empty() ? "" : ">") + op;
    std::lock_guard<std::mutex> lock(state().mutex);
    state().syncs.push_back(path + what);
  }
  static bool on_device(const c10::IValue& v, const torch::Device& d) {
    return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == d.type();
  }
  static std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& fn) {
    // Kernels that are one device kernel on CUDA but loops with reads on the CPU: what runs
    // inside them is theirs. _fused_adamw_ reads found_inf per tensor on the CPU; on CUDA the
    // kernel reads it on the device (that is why ForeachAdamW::step_if uses it).
    static const std::unordered_set<std::string> kOneKernel = {"aten::_fused_adamw_", "aten::_fused_adam_"};
    static const std::unordered_set<std::string> kSyncOps = {
        "aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique", "aten::_unique2",
        "aten::unique_dim", "aten::unique_consecutive", "aten::repeat_interleave", "aten::bincount",
        "aten::histc", "aten::equal"};
    auto& s = state();
    auto& ops = stack();
    const std::string name = fn.name();
    const bool inside_one_kernel =
        std::any_of(ops.begin(), ops.end(), [](const std::string& op) { return kOneKernel.count(op) > 0; });
    ops.push_back(name);
    if (s.paused || inside_one_kernel) return nullptr;
    const auto inputs = fn.inputs();
    if (kSyncOps.count(name)) {
      if (std::any_of(inputs.begin(), inputs.end(), [&](const c10::IValue& v) { return on_device(v, s.device); }))
        record("");
    } else if (name == "aten::copy_" && !s.device.is_cpu() && inputs.size() >= 3 && !inputs[2].toBool()) {
      // copy_(self, src, non_blocking = false) between the host and the device: CUDA waits for
      // the stream after it, both ways (to the device only a pinned, non-blocking copy does not)
      const bool host_dst = inputs[0].isTensor() && inputs[0].toTensor().is_cpu();
      const bool host_src = inputs[1].isTensor() && inputs[1].toTensor().is_cpu();
      if (host_dst && on_device(inputs[1], s.device)) record(" (to the host)");
      if (host_src && on_device(inputs[0], s.device)) record(" (to the device, blocking)");
    }
    return nullptr;
  }
  static void leave(const at::RecordFunction&, at::ObserverContext*) { stack().pop_back(); }
  at::CallbackHandle handle_;
};

}  // namespace rpe::test

// Bucketed gradient all-reduce overlapped with backward, through hooks that fire once a
// parameter's gradient is accumulated (compat::on_gradient_accumulated).
#pragma once
#include <torch/torch.h>

#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "dist/collectives.h"

namespace rpe::dist {

// Overlapped bucketed all-reduce (DataParallel's gradient sync). Buckets hold consecutive parameters of
// one dtype in reverse registration order, up to bucket_bytes each. A parameter's gradient may
// be accumulated more than once in a backward: activation checkpointing backpropagates each
// recomputed piece on its own, so a parameter that several pieces read (DeBERTa's relative
// table, read by every layer) gets one accumulation per piece. So the first armed step only
// counts each parameter's accumulations and launches nothing during backward; in later steps a
// parameter's gradient is final at its counted accumulation, and then counts its bucket down
// (one that gets more than counted is refused: its bucket may have gone out without it). A
// refusal does not throw: every bucket has still gone out once, so the ranks' collectives stay
// lined up; finish() waits for them as usual and returns true, and the caller makes the step
// fail on every rank through a collective it runs anyway (the engine: its statistics'
// all-reduce), where the refusing rank alone has the reason (refusal()).
// Buckets launch strictly in index order (every rank issues the same collectives in the same
// order, whatever order backward finishes them in). Parameters that backward never reaches (a
// fine-tuning task leaves the MLM head unused) would hold their bucket back forever, so the
// first armed step records them and later steps do not wait for them (the graph is static:
// one that reaches such a parameter later is refused); one reached by an earlier micro-batch
// of the step has its gradient final before the armed backward and goes out as it is. Such a
// parameter is all-reduced as zeros (every rank's buckets line up); where no rank reached it,
// it is left without a gradient, as one process leaves it, so the optimizer does not step it
// (no weight decay, no state): the number of ranks changes nothing but speed. Those reached by
// no rank leave the buckets after the first step (the ranks agree on them), so later steps do
// not all-reduce their zeros.
class GradSync {
 public:
  // Buckets the requires_grad parameters of `params` and hooks each one (unhooked on destruction).
  GradSync(const std::vector<torch::Tensor>& params, int64_t bucket_bytes, Collectives& c, int64_t world);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Before the backward of a step's last micro-batch: its hooks launch the buckets.
  void arm();
  // After that backward: launches what it did not reach, waits, writes the averaged gradients.
  // True when this rank refused the step's gradients (a parameter accumulated more often than
  // in the first step: the averages are not the step's), which the caller must not apply.
  [[nodiscard]] bool finish();
  // This rank's first refusal (a std::runtime_error saying which count), null when none.
  std::exception_ptr refusal() const { return refusal_; }
  int64_t launched_in_backward() const { return launched_in_backward_; }
  int64_t reduced_elements() const { return reduced_elements_; }  // all-reduced by the last finish()

 private:
  struct Bucket {
    std::vector<size_t> members;  // indices into params_
    int64_t pending = 0;          // gradients not yet final in the armed backward
    torch::Tensor flat;           // [sum of numels], the all-reduce buffer
    c10::intrusive_ptr<c10d::Work> work;
  };

  void on_gradient(size_t index);  // runs on the autograd thread
  int64_t launch_ready();          // launches the ready buckets at the head of the order
  void launch(size_t k);
  void find_unused_everywhere();   // first armed step: which parameters no rank touched
  void drop_unused_everywhere();   // after it: rebuckets without them (same layout on every rank)

  Collectives& c_;
  int64_t world_;
  std::vector<torch::Tensor> params_;  // requires_grad parameters, reverse registration order
  std::vector<std::function<void()>> unhook_;  // one per parameter
  std::vector<size_t> bucket_of_;  // kNoBucket for parameters reached by no rank (after step 1)
  std::vector<int64_t> fires_;     // accumulations of each gradient in the armed backward
  std::vector<int64_t> expected_;  // fires_ of the first armed step (empty before it; 0: unreached there)
  std::vector<bool> touched_;  // a gradient in any micro-batch of the step (armed or not)
  std::vector<bool> unused_everywhere_;  // no gradient in the whole first step on any rank (agreed then)
  std::vector<Bucket> buckets_;
  std::mutex mutex_;
  size_t next_ = 0;
  bool armed_ = false;
  int64_t launched_in_backward_ = 0;
  int64_t reduced_elements_ = 0;
  std::exception_ptr refusal_;
};

}  // namespace rpe::dist

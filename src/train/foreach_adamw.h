// AdamW (Loshchilov & Hutter 2019) exactly as LibTorch's torch::optim::AdamW computes it, op for
// op, but over each parameter group at once with the _foreach kernels. LibTorch's C++ AdamW
// (which has no foreach/fused switch; Python's has) runs ~7 kernels per tensor: ~1,400 launches
// per BERT-base step, as long as a step's matrix work at small batches. Here each op is one
// multi-tensor launch per ~100 tensors on CUDA (a per-tensor loop on CPU, bitwise the same as
// AdamW's). The state is AdamW's own (AdamWParamState), so checkpoints load in either class.
// Per tensor p with gradient g at step t (lr, betas b1 b2, eps, weight decay wd of its group):
//   p = p (1 - lr wd)                                (decoupled weight decay, before the update)
//   m = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2
//   p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Tensors without a gradient are skipped (not decayed), as AdamW does; amsgrad runs AdamW's loop.
#pragma once
#include <torch/optim/adamw.h>

namespace rpe {

class ForeachAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace rpe

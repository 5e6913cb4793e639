// The collectives a data-parallel step needs, on flat contiguous tensors: one small interface
// over c10d's backends (NCCL, Gloo: dist/data_parallel.cpp), used by the gradient sync
// (dist/grad_sync.h) and DataParallel.
#pragma once
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <string>

namespace rpe::dist {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual std::string name() const = 0;
  virtual void all_reduce_sum(torch::Tensor& flat) = 0;
  // Starts an all-reduce (sum) of `flat` and returns at once; wait() before reading it.
  virtual c10::intrusive_ptr<c10d::Work> all_reduce_async(torch::Tensor& flat) = 0;
  virtual void wait(const std::string& what, const c10::intrusive_ptr<c10d::Work>& work) = 0;
  virtual void broadcast_from_0(torch::Tensor& flat) = 0;
  virtual void barrier() = 0;
  // After a failure that leaves the group unusable: it is not shut down (that could block).
  virtual void mark_failed() = 0;
};

}  // namespace rpe::dist

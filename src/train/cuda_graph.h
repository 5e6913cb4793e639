// CUDA graphs: GPU work recorded once and then replayed as one launch, so the host no longer
// launches its kernels one by one (an eager BERT-base training step launches ~2,000). Used by
// the engine for each micro-batch's forward and backward (train.cuda_graphs:
// train/micro_step_graph.h) and by rpe-bench-model for a whole step (--graph-methods).
//
// Capture follows PyTorch's rules for capturing training: warm-up runs on a side stream first
// (lazily created cuBLAS workspaces and optimizer state must not be created inside the capture),
// the allocator's cache emptied (a capture cannot hand cached blocks back), then the work is
// recorded on that stream, allocating from the graph's private memory pool. Dropout stays random
// per replay: capture registers the default CUDA generator, whose seed and offset the graph
// reads from device memory at each replay. What the recorded work reads and writes must live at
// fixed addresses: inputs are copied into the tensors it was recorded with.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>

namespace rpe {

class CudaGraph {
 public:
  // Whether this build can capture graphs (a CUDA LibTorch, 2.1 or newer).
  static bool built();

  // Runs `warm` `warmup` >= 1 times on a side stream, then `prepare` (e.g. resetting what the
  // warm-ups changed), empties the allocator's cache, runs `before_capture`, and records `body`.
  // `share_pool_with`: a graph whose memory pool this one shares (graphs replayed one after the
  // other, never at once). c10::Error when capture fails; PyTorch may then leave the process's
  // CUDA generator in capture mode, so a caller stops its CUDA work.
  CudaGraph(const torch::Device& device, const std::function<void()>& warm, int warmup,
            const std::function<void()>& prepare, const std::function<void()>& body,
            const std::function<void()>& before_capture = [] {}, const CudaGraph* share_pool_with = nullptr);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Replays the recorded work on the current stream (asynchronous, like any launch).
  void replay();

 private:
  struct Impl;  // at::cuda::CUDAGraph, whose header needs CUDA's
  std::unique_ptr<Impl> impl_;
};

}  // namespace rpe

// One whole training step (forward, loss, backward, optimizer update) captured as a CUDA graph
// and replayed, for rpe-bench-model's "rpe-graph" rows: how much of the eager step's time is the
// host launching ~2,000 kernels one by one, measured on the same model and batch as the eager
// row. Training itself does not use it yet (its batches change shape: the masked-token count).
//
// The pattern of PyTorch's "whole-network capture": warm-up steps on a side stream (cuBLAS
// handles, workspaces, the optimizer's state are created outside the capture), gradients set
// to none, then one step captured; its backward allocates the gradients from the graph's
// private memory pool, where every replay writes them afresh. Dropout's random numbers stay
// fresh per replay: capture_begin registers the default CUDA generator, whose seed and offset
// the graph reads from device memory. Inputs and the learning rate are fixed (a benchmark).
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>

#if __has_include(<ATen/cuda/CUDAGraph.h>)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#define RPE_BENCH_CUDA_GRAPH 1
#endif

namespace rpe::bench {

inline bool cuda_graphs_built() {
#ifdef RPE_BENCH_CUDA_GRAPH
  return true;
#else
  return false;
#endif
}

// Captures `body` (one step that neither zeroes nor reads back anything) after `warmup` >= 1
// eager runs of `eager_step` (the same step with its zero_grad: they create the optimizer's
// state, which a capture would otherwise re-create at every replay), and returns the replay.
// `zero_grad` sets the gradients to none just before the capture, and `before_capture` runs
// right before it (e.g. resetting the peak-memory count: replays allocate nothing, the capture
// allocates the step's memory in the graph's pool). Throws c10::Error where capture fails; the
// CUDA state may then be unusable for more capture or dropout in this process (PyTorch leaves
// its generator in capture mode), so a caller runs no CUDA work after a failure.
inline std::function<void()> capture_step(const torch::Device& device, const std::function<void()>& eager_step,
                                          const std::function<void()>& zero_grad, const std::function<void()>& body,
                                          int warmup, const std::function<void()>& before_capture) {
  TORCH_CHECK(warmup >= 1, "capture_step: at least one eager warm-up step (it creates the optimizer's state)");
#ifdef RPE_BENCH_CUDA_GRAPH
  const auto index = device.has_index() ? device.index() : c10::cuda::current_device();
  auto graph = std::make_shared<at::cuda::CUDAGraph>();
  torch::cuda::synchronize(index);
  {
    // Capture needs a stream other than the legacy default one; warming up there too keeps
    // lazily created per-stream state (cuBLAS workspaces) out of the capture.
    c10::cuda::CUDAStreamGuard side(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index));
    for (int i = 0; i < warmup; ++i) eager_step();
    zero_grad();
    torch::cuda::synchronize(index);
    // As torch.cuda.graph does: during a capture the allocator cannot hand cached blocks back to
    // make room, so the eager steps' cache goes first.
    c10::cuda::CUDACachingAllocator::emptyCache();
    before_capture();
    graph->capture_begin();
    try {
      body();
    } catch (...) {  // end the stream's capture, or every later CUDA call on it fails too
      try {
        graph->capture_end();
      } catch (...) {
      }
      throw;
    }
    graph->capture_end();
    torch::cuda::synchronize(index);
  }
  return [graph] { graph->replay(); };
#else
  (void)device, (void)eager_step, (void)zero_grad, (void)body, (void)before_capture;
  TORCH_CHECK(false, "this build has no CUDA graphs (a CPU LibTorch)");
#endif
}

}  // namespace rpe::bench

// train.cuda_graphs: each micro-batch's forward and backward replayed as one CUDA graph
// (train/cuda_graph.h) instead of ~2,000 kernel launches from the host. The rest of the step
// (gradient norm, clipping, the fused optimizer update: a few dozen launches) stays eager.
//
// A graph reads and writes fixed addresses, so
//   - the batch is copied into the input tensors the graph was recorded with (device to device,
//     asynchronous), and so is the step's loss scale W / N;
//   - the graph's backward accumulates into the gradient tensors that existed at capture: they
//     are zeroed in place each step (zero_grad), never set to none;
//   - its sums [loss x scale / W, correct, tokens] land in a fixed [3] tensor, added by the caller.
// Shapes must repeat (Task::fixed_shapes: MLM pads its selection to a fixed capacity); a batch
// with a padding mask takes a second graph (the masked attention kernels), sharing the first's
// memory pool. Each graph is captured at its first batch: warm-up runs of the same work (whose
// gradients are then zeroed and whose random draws are undone: the run's dropout stream is the
// one an uncaptured run would draw, up to the order within a replay), then the capture, then
// the replay that does the batch's work.
#pragma once
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "train/cuda_graph.h"
#include "train/engine.h"

namespace rpe {

class MicroStepGraphs {
 public:
  // emulate: no capture, the graph's body run directly on the same fixed tensors (CPU tests).
  MicroStepGraphs(Task& task, std::vector<torch::Tensor> params, const torch::Device& device,
                  at::ScalarType autocast_type, int64_t world, bool emulate);

  // Zeroes the gradients in place (the graphs accumulate into these very tensors).
  void zero_grad();

  // Forward and backward of `batch` (on the device) with its loss times `scale` ([ ] W / N);
  // returns its [3] float64 sums on the device: loss x scale / W, correct, tokens.
  torch::Tensor run(const MicroBatch& batch, const torch::Tensor& scale);

 private:
  struct Graph {
    MicroBatch inputs;     // the tensors the graph reads (copies of the batch's)
    torch::Tensor scale;   // [ ] float64
    torch::Tensor sums;    // [3] float64, written by the graph
    std::unique_ptr<CudaGraph> graph;  // null when emulated
  };
  Graph& graph_for(const MicroBatch& batch);
  void body(Graph& g);

  Task& task_;
  std::vector<torch::Tensor> params_;
  torch::Device device_;
  at::ScalarType autocast_type_;
  int64_t world_;
  bool emulate_;
  std::map<std::string, Graph> graphs_;  // by the batch's shapes
};

}  // namespace rpe

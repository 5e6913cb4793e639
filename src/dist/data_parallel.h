// Multi-process data parallelism through c10d; all distributed code of rpe-train lives here.
// One process per device. Ranks meet through a c10d::TCPStore at MASTER_ADDR:MASTER_PORT,
// parameters are broadcast from rank 0, and after the last micro-batch of an optimizer step the
// gradients are averaged in buckets:  g <- (1/W) * sum_r g_r  (W = world size). Accumulation
// micro-steps never communicate (the trainer calls average_gradients once per optimizer step).
//
// Backends: NCCL for CUDA devices (ProcessGroupNCCL). For CPU, ProcessGroupGloo, LibTorch's
// own Gloo; the PyPI wheel ships no gloo headers, so they come from Debian's libgloo-dev
// (declarations only: the implementation is LibTorch's). Without them the CPU fallback is a
// store all-reduce over the same TCPStore: each rank publishes its bucket, every rank sums all
// buckets in rank order (so all ranks get bitwise identical results). Every collective waits at
// most train.dist_timeout_s: a rank that died makes the others fail with a clear error.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace rpe::dist {

// Where this process sits, from the launcher's environment: torchrun (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT), else Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID),
// else Open MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK). MASTER_ADDR/PORT default to
// 127.0.0.1:29500. UserError for malformed or inconsistent values.
struct LaunchEnv {
  int64_t rank = 0, world = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  std::string launcher = "single process";  // torchrun | slurm | mpirun | single process
  bool agent_store = false;  // torchrun's agent already hosts the TCPStore (TORCHELASTIC_USE_AGENT_STORE)
  int64_t restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: store keys are per attempt
  bool distributed() const { return world > 1; }
};
LaunchEnv detect_launch_env();

class Collectives;  // backend, see data_parallel.cpp

class DataParallel {
 public:
  // Single process: every call below is a no-op.
  DataParallel();
  // Joins the group described by `env` on `device` (cuda -> NCCL, cpu -> Gloo or store).
  DataParallel(const LaunchEnv& env, const torch::Device& device, double timeout_s, double bucket_mb);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }
  bool distributed() const { return world_ > 1; }
  std::string backend_name() const;

  // Copies rank 0's parameters and buffers to every rank.
  void broadcast_parameters(torch::nn::Module& model);
  // The one call the trainer makes per optimizer step: grads <- mean over ranks, bucketed.
  // Parameters without a gradient get a zero one so every rank's buckets line up.
  void average_gradients(const std::vector<torch::Tensor>& params);
  // Element-wise sum over ranks of a few float64 statistics (loss sums, token counts).
  std::vector<double> sum(const std::vector<double>& values);
  void barrier();
  // In-place element-wise sum over ranks of a tensor on this rank's device, through the process
  // group (no host copy with NCCL/Gloo); a no-op in a single process.
  void all_reduce_sum(torch::Tensor& t);

 private:
  int64_t rank_ = 0, world_ = 1;
  int64_t bucket_bytes_ = 25 << 20;
  torch::Device device_ = torch::kCPU;  // where collective buffers live (CUDA for NCCL)
  std::unique_ptr<Collectives> impl_;
};

}  // namespace rpe::dist

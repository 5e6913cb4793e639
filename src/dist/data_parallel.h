// Multi-process data parallelism through c10d; all distributed code of rpe-train is in src/dist/.
// One process per device. Ranks meet through a c10d::TCPStore at MASTER_ADDR:MASTER_PORT,
// parameters are broadcast from rank 0, and gradients are averaged in buckets of about
// train.bucket_mb:  g <- (1/W) * sum_r g_r  (W = world size). The engine overlaps this with
// the backward pass of the last micro-batch of an optimizer step (gradient hooks, as DDP):
// a bucket is all-reduced asynchronously as soon as backward has produced all its gradients,
// buckets launch in the same order on every rank, and accumulation micro-steps never
// communicate. average_gradients is the same average after backward (reference, tests).
//
// Backends: NCCL for CUDA devices (ProcessGroupNCCL; the build finds NCCL at configure time,
// see CMakeLists.txt), Gloo for CPU (ProcessGroupGloo, LibTorch's own Gloo; the PyPI wheel
// ships no gloo headers, so they come from Debian's libgloo-dev, declarations only). A build
// without the backend a run needs fails with one line saying so. Every collective waits at
// most train.dist_timeout_s: a rank that died makes the others fail, with Gloo by a one-line
// error, with NCCL by its watchdog's abort and report (waiting on NCCL work only orders the GPU
// stream). A rank that stops on an error of its own aborts its NCCL communicators rather than
// shutting them down (which would wait for the others), so it exits at once with its error.
#pragma once
#include <torch/torch.h>

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class Store;
}

namespace rpe::dist {

// Where this process sits, from the launcher's environment: torchrun (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT), else Open MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK),
// else Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID). MASTER_ADDR/PORT default to
// 127.0.0.1:29500. UserError for malformed or inconsistent values.
struct LaunchEnv {
  int64_t rank = 0, world = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  std::string launcher = "single process";  // torchrun | slurm | mpirun | single process
  bool agent_store = false;  // torchrun's agent already hosts the TCPStore (TORCHELASTIC_USE_AGENT_STORE)
  int64_t restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: store keys are per attempt
  // The launcher's job id (TORCHELASTIC_RUN_ID, PMIX_NAMESPACE or Open MPI's job id, Slurm's
  // job.step; "" if none): the store keys are the job's own, so the ranks of a second job that
  // reach this job's store on a shared port wait for their own instead of joining it.
  std::string job;
  // RPE_TRAIN_GROUP_OF_ONE=1: a process group (NCCL on a GPU, Gloo on the CPU) even for one
  // process, so that a machine with one GPU runs the whole multi-process path (rendezvous,
  // broadcast, the all-reduce overlapped with backward, checks across ranks), collectives of
  // one rank. Training is the same as without it: the mean of one gradient is itself.
  bool group_of_one = false;
  bool distributed() const { return world > 1 || group_of_one; }
  int64_t group_ranks() const { return distributed() ? world : 0; }  // 0: no process group
};
LaunchEnv detect_launch_env();

class Collectives;  // the backend (dist/collectives.h)
class GradSync;     // overlapped bucketed all-reduce (dist/grad_sync.h)

class DataParallel {
 public:
  // Single process: every call below is a no-op.
  DataParallel();
  // Joins the group described by `env`: meets the other ranks (dist/rendezvous.h), where each
  // runs `choose_device` and they agree on it (a rank that fails to choose, or chooses another
  // kind of device than rank 0, stops every rank at once), then creates the backend for that
  // device (cuda -> NCCL, cpu -> Gloo). Single process: only calls `choose_device`.
  DataParallel(const LaunchEnv& env, const std::function<torch::Device()>& choose_device, double timeout_s,
               double bucket_mb);
  // The same on a device given (tests).
  DataParallel(const LaunchEnv& env, const torch::Device& device, double timeout_s, double bucket_mb);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int64_t rank() const { return rank_; }
  int64_t world() const { return world_; }
  bool distributed() const { return impl_ != nullptr; }  // in a process group (of one rank or more)
  const torch::Device& device() const { return device_; }  // this rank's training device
  std::string backend_name() const;

  // Copies rank 0's parameters and buffers to every rank.
  void broadcast_parameters(torch::nn::Module& model);
  // grads <- mean over ranks, bucketed, after backward. Parameters without a gradient get a
  // zero one so every rank's buckets line up.
  void average_gradients(const std::vector<torch::Tensor>& params);

  // The same average overlapped with backward. attach_gradient_hooks registers a
  // post-accumulate-grad hook on every parameter that requires a gradient (buckets in reverse
  // order: backward produces the last layers' gradients first); arm_gradient_sync before the
  // backward of the last micro-batch makes the hooks launch each bucket's all-reduce once its
  // gradients are final; finish_gradient_sync after that backward launches what is left (zero
  // gradients for parameters backward did not reach), waits and divides by W. No-ops in a
  // single process. The hooks are removed when this object goes.
  void attach_gradient_hooks(const std::vector<torch::Tensor>& params);
  void arm_gradient_sync();
  // True when this rank refused the step's gradients (dist/grad_sync.h): they must not be
  // applied, and every rank must learn it through a collective the caller runs anyway; the
  // reason is gradient_sync_refusal() on this rank (null on the others, and before any refusal).
  [[nodiscard]] bool finish_gradient_sync();
  std::exception_ptr gradient_sync_refusal() const;
  // Buckets whose all-reduce started inside the last armed backward (overlap, for tests).
  int64_t buckets_launched_in_backward() const;
  // Gradient elements all-reduced by the last finish_gradient_sync (for tests).
  int64_t gradient_elements_reduced() const;
  // Element-wise sum over ranks of a few float64 statistics (loss sums, token counts).
  std::vector<double> sum(const std::vector<double>& values);
  // Every rank's `mine` (the same length on every rank), rank after rank: [W x n]. One sum in
  // which each rank fills its own row and leaves the others 0 (x + 0 is exact).
  std::vector<double> gather(const std::vector<double>& mine);
  // True on every rank when `mine` is true on any rank (a decision only rank 0 makes, shared).
  bool any(bool mine);
  void barrier();
  // The job's store (dist/rendezvous.h; null in a single process), for waits that no
  // collective's timeout may bound (dist/rank0_only.h), and a number for each such wait's keys:
  // the calls come in the same order on every rank, so the n-th has the same keys everywhere.
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  int64_t next_store_call() { return store_calls_++; }
  double timeout_s() const { return timeout_s_; }  // train.dist_timeout_s
  // The group is left unclosed when this object goes, as after a failed collective (a waiting
  // rank that gave up on rank 0 while a store call of its own may still hang).
  void abandon_group();
  // In-place element-wise sum over ranks of a tensor on this rank's device, through the process
  // group (no host copy with NCCL/Gloo); a no-op in a single process.
  void all_reduce_sum(torch::Tensor& t);

 private:
  int64_t rank_ = 0, world_ = 1;
  int64_t bucket_bytes_ = 25 << 20;
  double timeout_s_ = 0.0;
  int64_t store_calls_ = 0;
  c10::intrusive_ptr<c10d::Store> store_;
  torch::Device device_ = torch::kCPU;  // where collective buffers live (CUDA for NCCL)
  std::unique_ptr<Collectives> impl_;
  std::unique_ptr<GradSync> sync_;
};

// The NCCL version this build uses ("2.28.9"), or why there is none ("none (CPU build)").
std::string nccl_version();

}  // namespace rpe::dist

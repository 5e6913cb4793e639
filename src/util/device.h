// Device selection: "auto" picks CUDA when LibTorch sees a GPU, else CPU. The one place that
// decides which device and attention backend a run uses (pretraining and fine-tuning alike).
#pragma once
#include <torch/torch.h>
#include <string>

namespace rpe {

// Parses "auto", "cpu", "cuda", "cuda:N"; UserError for anything else or a missing GPU, naming
// `key`, the option the name came from.
torch::Device resolve_device(const std::string& name, const std::string& key = "train.device");

// The device of one training process: resolve_device(name), except that in a process group
// (`group_ranks`: its world size; 0 outside any) "auto" or "cuda" gives rank-local process
// `local_rank` GPU rank_gpu(local_rank, visible GPUs) -- NCCL needs a GPU index -- and that
// "cuda:N" is refused in a group of several (every rank on one GPU). Says so in the log when
// "auto" ends on the CPU (no GPU visible), so a missing GPU is never silent.
torch::Device training_device(const std::string& name, int64_t local_rank, int64_t group_ranks,
                              const std::string& key = "train.device");

// The GPU index of rank-local process `local_rank` when `visible` GPUs are visible to it:
// local_rank itself (torchrun: every process sees the node's GPUs), or 0 when it sees exactly
// one (a launcher that gives each process its own GPU through CUDA_VISIBLE_DEVICES, as Slurm's
// --gpus-per-task=1 does). UserError when it sees more than one but fewer than local_rank + 1.
int64_t rank_gpu(int64_t local_rank, int64_t visible);

// Whether the attention runs LibTorch's fused SDPA kernels: on CUDA unless
// model.attention.backend is "plain".
bool use_fused_attention(const torch::Device& device, const std::string& backend);

// One line describing the LibTorch build and the devices it sees (for --version and logs).
std::string describe_runtime();

}  // namespace rpe

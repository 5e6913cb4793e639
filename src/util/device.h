// Device selection: "auto" picks CUDA when LibTorch sees a GPU, else CPU.
#pragma once
#include <torch/torch.h>
#include <string>

namespace rpe {

// Parses "auto", "cpu", "cuda", "cuda:N"; UserError for anything else or a missing GPU.
torch::Device resolve_device(const std::string& name);

// One line describing the LibTorch build and the devices it sees (for --version and logs).
std::string describe_runtime();

}  // namespace rpe

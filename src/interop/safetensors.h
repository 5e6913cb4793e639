// safetensors reader and writer (the Hugging Face weight format):
//   [u64 little-endian N][N bytes of JSON header][data buffer]
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end)}
// with offsets relative to the data buffer, plus an optional "__metadata__" map of
// strings. Supported dtypes: F32, F16, BF16 (HF BERT checkpoints), F64, I64, I32.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace rpe {

struct SafetensorsFile {
  std::map<std::string, torch::Tensor> tensors;  // CPU, dtype as stored
  std::map<std::string, std::string> metadata;   // "__metadata__", may be empty
};

// Reads every tensor of `file`. Any malformation (truncated file, header that is not JSON,
// unknown dtype, offsets outside the buffer or disagreeing with the shape, overlaps) is a
// one-line UserError naming the file and, where there is one, the tensor.
SafetensorsFile read_safetensors(const std::filesystem::path& file);

// Writes `tensors` (any device, made contiguous on CPU) in the order given, atomically.
// The header is padded with spaces to a multiple of 8 bytes so the data stays aligned.
// A failed write throws std::system_error "cannot write FILE: <errno text>" (ENOSPC, EFBIG,
// ...) and leaves no file behind.
void write_safetensors(const std::filesystem::path& file,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// "F32", "F16", "BF16", ... for a torch dtype (UserError for others).
std::string safetensors_dtype_name(torch::ScalarType dtype);

}  // namespace rpe

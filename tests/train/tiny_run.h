// Shared fixture of the training tests: a small corpus cut from data/sample/corpus.txt, a
// sentencepiece model trained on it once per test binary, and a config of a 2-layer,
// hidden-32 BERT that trains a step in milliseconds on one CPU thread.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/data_test_util.h"  // user_error, temporary folders

namespace rpe::test {

// Folder with corpus.txt, tokenizer.model and base.yaml (created on first use).
const std::filesystem::path& tiny_data_dir();

// The tiny config with `overrides` ("train.max_steps=6") applied.
Config tiny_config(const std::vector<std::string>& overrides = {});

// A fresh, empty folder under the test temp dir.
std::filesystem::path fresh_dir(const std::string& name);

// The rows of a JSON-lines file (metrics.jsonl), in order.
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file);

// The CPU, and the GPU when there is one (scripts/gpu_check.sh runs such tests there), its
// CUDA kernels' one-time checks done.
std::vector<torch::Device> devices_to_test();

}  // namespace rpe::test

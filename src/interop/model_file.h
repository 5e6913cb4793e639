// A model-only checkpoint at a chosen path, written by train/checkpoint.h's write_checkpoint
// ("model/<param>", "config", "version", "step" = 0; no optimizer or loader state; checksum
// embedded), so load_checkpoint and read_checkpoint_config read (and verify) it unchanged.
// Written by import-hf and by tools that create a model outside a training run.
#pragma once
#include <filesystem>
#include <string>

#include "config/config.h"
#include "model/bert.h"

namespace rpe {

void save_model_file(const std::filesystem::path& file, torch::nn::Module& model, const std::string& config_yaml);

struct LoadedModel {
  Config config;  // the embedded, resolved config
  BertModel model{nullptr};
};

// Builds the model from the checkpoint's embedded config and loads its parameters (CPU).
LoadedModel load_model_file(const std::filesystem::path& file);

}  // namespace rpe

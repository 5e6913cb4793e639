// A model-only checkpoint at a chosen path: the same archive layout as
// train/checkpoint.h ("model/<param>", "config", "version", "step" = 0) without optimizer
// or loader state, so load_checkpoint and read_checkpoint_config read it unchanged.
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

// Model-only checkpoint files, written and read by train/checkpoint.cpp.
#include "interop/model_file.h"

#include "train/checkpoint.h"

namespace rpe {
namespace fs = std::filesystem;

void save_model_file(const fs::path& file, torch::nn::Module& model, const std::string& config_yaml) {
  write_checkpoint(file, model, nullptr, /*state=*/nullptr, config_yaml);
}

LoadedModel load_model_file(const fs::path& file) {
  LoadedModel out;
  out.config = config_from_yaml(read_checkpoint_config(file), file.string() + " (embedded config)");
  out.model = BertModel(out.config.model);
  load_checkpoint(file, *out.model, nullptr);
  out.model->eval();
  return out;
}

}  // namespace rpe

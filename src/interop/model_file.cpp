// Model-only checkpoint files (layout shared with train/checkpoint.cpp).
#include "interop/model_file.h"

#include "rpe/version.h"
#include "train/checkpoint.h"
#include "util/atomic_file.h"

namespace rpe {
namespace fs = std::filesystem;

void save_model_file(const fs::path& file, torch::nn::Module& model, const std::string& config_yaml) {
  torch::serialize::OutputArchive archive;
  for (const auto& p : model.named_parameters()) archive.write("model/" + p.key(), p.value());
  for (const auto& b : model.named_buffers()) archive.write("model/" + b.key(), b.value(), /*is_buffer=*/true);
  archive.write("step", c10::IValue(int64_t{0}));
  archive.write("config", c10::IValue(config_yaml));
  archive.write("version", c10::IValue(std::string(kVersion) + "+" + kGitRevision));
  write_atomic_with(file, [&](const fs::path& tmp) { archive.save_to(tmp.string()); });
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

// hf_probe's fine-tuned model commands (see hf_probe.cpp): a random kept model of a task, and
// its head's logits for one sequence, for the parity of export-hf's QA and classification
// models with transformers (tests/interop/hf_heads_parity.py).
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "finetune/glue_data.h"
#include "finetune/heads.h"
#include "finetune/saved_model.h"
#include "util/errors.h"

namespace fs = std::filesystem;

namespace rpe::probe {

// Random values everywhere, so a tensor mapped to the wrong place changes the logits.
void randomize_all(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.named_parameters()) {
    const bool norm_weight = p.key().find("norm.weight") != std::string::npos;
    p.value().normal_(norm_weight ? 1.0 : 0.0, norm_weight ? 0.2 : 0.1);
  }
}

int init_finetuned(const Config& cfg, const std::string& task, const fs::path& out_dir, int64_t seed) {
  torch::manual_seed(seed);
  using namespace finetune;
  SavedModelInfo info;
  info.task = task;
  info.metric = selection_metric(task);
  if (info.squad()) {
    QaModel model(cfg.model);
    randomize_all(*model);
    save_finetuned_model(out_dir, *model, cfg, cfg.data.tokenizer_model, info);
    return 0;
  }
  info.labels = glue_task(task).labels;
  info.outputs = info.labels.empty() ? 1 : static_cast<int64_t>(info.labels.size());
  ClassifierModel model(cfg.model, info.outputs);
  randomize_all(*model);
  save_finetuned_model(out_dir, *model, cfg, cfg.data.tokenizer_model, info);
  return 0;
}

namespace {
std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) ids.push_back(std::stoll(item));
  require(!ids.empty(), "no ids given");
  return ids;
}
}  // namespace

int print_head_logits(const fs::path& model_dir, const std::string& ids_text, const std::string& types_text) {
  using namespace finetune;
  const SavedModel saved = read_saved_model(model_dir);
  const auto ids = torch::tensor(parse_ids(ids_text), torch::kLong).unsqueeze(0);      // [1, L]
  const auto types = torch::tensor(parse_ids(types_text), torch::kLong).unsqueeze(0);  // [1, L]
  require(ids.sizes() == types.sizes(), "ids and token types differ in length");
  const Batch batch{ids, torch::zeros_like(ids, torch::kBool), types};
  torch::NoGradGuard no_grad;
  torch::Tensor logits;
  if (saved.info.squad()) {
    QaModel model(saved.cfg.model);
    load_saved_weights(saved, *model);
    model->eval();
    logits = model->forward(batch)[0];  // [L, 2]
  } else {
    ClassifierModel model(saved.cfg.model, saved.info.outputs);
    load_saved_weights(saved, *model);
    model->eval();
    logits = model->forward(batch)[0].unsqueeze(0);  // [1, C]
  }
  logits = logits.to(torch::kDouble).contiguous();
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t i = 0; i < logits.size(0); ++i)
    rows.push_back(std::vector<double>(logits[i].data_ptr<double>(), logits[i].data_ptr<double>() + logits.size(1)));
  std::cout << nlohmann::json{{"logits", rows}}.dump() << "\n";
  return 0;
}

}  // namespace rpe::probe

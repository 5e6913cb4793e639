// Fine-tuned models as transformers BertForQuestionAnswering / BertForSequenceClassification
// (see export_hf.h).
#include "finetune/export_hf.h"

#include <algorithm>
#include <map>
#include <set>

#include "finetune/heads.h"
#include "finetune/saved_model.h"
#include "interop/hf_bert.h"
#include "interop/hf_folder.h"
#include "model/attention/registry.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using nlohmann::json;

bool is_saved_model_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::exists(dir / "task.json", ec);
}

namespace {

// Encoder tensors under "bert." (ours: "bert.<name>"), without the MLM head's "cls." links.
void add_encoder(const ModelOptions& m, torch::OrderedDict<std::string, torch::Tensor>& params,
                 std::vector<std::pair<std::string, torch::Tensor>>& tensors, std::set<std::string>& linked) {
  for (const auto& link : hf_tensor_links(m)) {
    const std::string ours = "bert." + link.ours;
    linked.insert(ours);  // cls.* links (the pretraining MLM head) are accounted for: they are dropped
    if (link.hf.rfind("bert.", 0) == 0) tensors.emplace_back(link.hf, to_hf_layout(params[ours].detach(), link));
  }
  if (m.attention.method != "absolute")  // HF builds this table for every type; relative types ignore it
    tensors.emplace_back("bert.embeddings.position_embeddings.weight", torch::zeros({m.max_position, m.hidden}));
}

// The vocabulary the folder carries. --vocab is refused for these folders (the model is bound to
// the tokenizer it was fine-tuned with), so a missing one is said as such, with the way back.
HfVocab carried_vocab(const SavedModel& saved) {
  const fs::path tokenizer = saved.cfg.data.tokenizer_model;
  std::error_code ec;
  if (!fs::is_regular_file(tokenizer, ec))
    throw UserError(tokenizer.string() + ": missing from the fine-tuned model folder (it carries the tokenizer it was "
                    "trained with): copy " + tokenizer.filename().string() + " back from the pretraining run");
  return hf_vocab(saved.cfg, saved.dir / "model.pt");
}

// Relative methods clip distances at model.max_position - 1, so fine-tuning may run longer
// windows; HF indexes its unclipped distance table directly and cannot run them.
void warn_long_windows(const SavedModel& saved) {
  const Config& cfg = saved.cfg;
  if (method_info(cfg.model.attention.method).hf_distance_table.empty() ||
      cfg.finetune.max_seq_len <= cfg.model.max_position)
    return;  // absolute tables refuse longer windows at fine-tuning already
  log::warn("export", "{}: fine-tuned on windows of up to {} tokens (finetune.max_seq_len), but HF BERT takes at most "
            "max_position_embeddings = {}: transformers fails on longer inputs, and truncating to {} tokens gives "
            "other predictions than rpe-train predict", saved.dir.string(), cfg.finetune.max_seq_len,
            cfg.model.max_position, cfg.model.max_position);
}

}  // namespace

void export_hf_finetuned(const fs::path& model_dir, const fs::path& out_dir) {
  const SavedModel saved = read_saved_model(model_dir);
  const ModelOptions& m = saved.cfg.model;
  const std::string blocker = hf_export_blocker(m);
  if (!blocker.empty()) throw UserError(model_dir.string() + ": cannot export to Hugging Face BERT: " + blocker);
  const HfVocab vocab = carried_vocab(saved);  // first: a missing one leaves no partial folder
  warn_long_windows(saved);
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::set<std::string> linked;
  torch::OrderedDict<std::string, torch::Tensor> params;
  json config = hf_config_from(m);
  if (saved.info.squad()) {
    QaModel model(m);
    load_saved_weights(saved, *model);
    params = model->named_parameters();
    add_encoder(m, params, tensors, linked);
    for (const char* name : {"qa_outputs.weight", "qa_outputs.bias"}) {
      tensors.emplace_back(name, params[name].detach());
      linked.insert(name);
    }
    config["architectures"] = json::array({"BertForQuestionAnswering"});
  } else {
    ClassifierModel model(m, saved.info.outputs);
    load_saved_weights(saved, *model);
    params = model->named_parameters();
    add_encoder(m, params, tensors, linked);
    const std::map<std::string, std::string> head = {{"pooler.weight", "bert.pooler.dense.weight"},
                                                     {"pooler.bias", "bert.pooler.dense.bias"},
                                                     {"classifier.weight", "classifier.weight"},
                                                     {"classifier.bias", "classifier.bias"}};
    for (const auto& [ours, hf] : head) {
      tensors.emplace_back(hf, params[ours].detach());
      linked.insert(ours);
    }
    config["architectures"] = json::array({"BertForSequenceClassification"});
    config["num_labels"] = saved.info.outputs;
    json id2label = json::object(), label2id = json::object();
    for (size_t i = 0; i < saved.info.labels.size(); ++i) {
      id2label[std::to_string(i)] = saved.info.labels[i];
      label2id[saved.info.labels[i]] = static_cast<int64_t>(i);
    }
    if (saved.info.labels.empty()) id2label["0"] = "score", label2id["score"] = 0;
    config["id2label"] = id2label;
    config["label2id"] = label2id;
    config["problem_type"] = saved.info.labels.empty() ? "regression" : "single_label_classification";
  }
  // Every parameter must have a home (or be the dropped MLM head); nothing may vanish silently.
  for (const auto& p : params) {
    const bool mlm_head = p.key().rfind("bert.mlm_", 0) == 0;
    if (!linked.count(p.key()) && !mlm_head)
      throw UserError(model_dir.string() + ": cannot export to Hugging Face BERT: parameter '" + p.key() +
                      "' has no counterpart there");
  }
  // Fine-tuned with finetune.token_types: false, the model saw type 0 everywhere; HF's tokenizer
  // and pipelines pass type 1 for the second segment. Every row set to row 0 makes the export
  // compute what the model computed, whatever types HF passes.
  if (!saved.cfg.finetune.token_types)
    for (auto& [name, t] : tensors)
      if (name == "bert.embeddings.token_type_embeddings.weight") t = t[0].unsqueeze(0).expand_as(t).clone();
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  config["finetuned_task"] = saved.info.task;
  write_hf_folder(out_dir, tensors, config, vocab, saved.cfg);
  log::info("export", "{} -> {}: {} {} as {}", model_dir.string(), out_dir.string(), saved.info.task,
            m.attention.method, config["architectures"][0].get<std::string>());
}

}  // namespace rpe::finetune

// Saved fine-tuned models (see saved_model.h).
#include "finetune/saved_model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

#include "finetune/glue_data.h"
#include "train/checkpoint.h"
#include "train/checkpoint_file.h"
#include "util/atomic_file.h"
#include "util/atomic_writer.h"
#include "util/errors.h"
#include "util/input_file.h"
#include "util/json_text.h"
#include "util/file_tree.h"
#include "util/log.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr int kFormat = 1;

std::string tokenizer_name(const Config& cfg) {
  return cfg.data.tokenizer == "wordpiece" ? "vocab.txt" : "tokenizer.model";
}

std::string crc_text(uint32_t crc) { return fmt::format("{:08x}", crc); }

// task.json's field `key` as a T (`kind` says which, for the message).
template <class T> T task_field(const json& j, const char* key, const char* kind, const fs::path& file) {
  if (!j.is_object() || !j.contains(key)) throw UserError(file.string() + ": field '" + key + "' is missing");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    std::string value = j.at(key).dump();
    if (value.size() > 40) value = value.substr(0, 40) + "...";
    throw UserError(file.string() + ": field '" + key + "' must be " + kind + ", got " + value);
  }
}

// The tokenizer copied in is the one the model was fine-tuned with (its bytes' CRC-32, kept in
// task.json): another of as many pieces would map every word to other ids, silently.
void check_carried_tokenizer(const fs::path& task_file, const json& j, const fs::path& tokenizer) {
  std::error_code ec;
  if (!j.contains("tokenizer_crc32") || !fs::is_regular_file(tokenizer, ec)) return;  // older folders; a missing file is said where it is read
  const auto kept = task_field<std::string>(j, "tokenizer_crc32", "a string", task_file);
  const std::string now = crc_text(file_crc32(tokenizer));
  if (now != kept)
    throw UserError(tokenizer.string() + ": not the tokenizer this model was fine-tuned with (CRC-32 " + now + ", " +
                    task_file.filename().string() + " records " + kept + "): copy back the one from its run");
}

}  // namespace

void save_finetuned_model(const fs::path& dir, torch::nn::Module& model, Config cfg, const fs::path& tokenizer_file,
                          const SavedModelInfo& info) {
  const fs::path tmp = make_staging_folder(dir);
  const std::string tok = tokenizer_name(cfg);
  const std::string tokenizer_bytes = read_file(tokenizer_file);
  write_file_atomic(tmp / tok, tokenizer_bytes);
  cfg.data.tokenizer_model = tok;  // relative: the folder can be moved or copied as a whole
  const std::string yaml = to_yaml(cfg);
  write_checkpoint(tmp / "model.pt", model, nullptr, nullptr, yaml);
  write_file_atomic(tmp / "config.yaml", yaml);
  const json task = {{"format", kFormat},      {"task", info.task},     {"labels", info.labels},
                     {"outputs", info.outputs}, {"select", info.select}, {"step", info.step},
                     {"metric", info.metric},   {"value", info.value},   {"tokenizer_crc32", crc_text(crc32_update(0, tokenizer_bytes.data(), tokenizer_bytes.size()))}};
  write_file_atomic(tmp / "task.json", task.dump(2) + "\n");
  replace_folder(tmp, dir);
}

namespace {
// The head's outputs and labels are the task's (SQuAD: start/end logits; GLUE: its classes, or
// one score): checked before a model is built from them, so a corrupt task.json is an error
// naming it, not an allocation of a head of any size.
void check_head_shape(const fs::path& task_file, const SavedModelInfo& info) {
  const bool squad = info.task.rfind("squad", 0) == 0;
  std::vector<std::string> labels;
  if (!squad) {
    try {
      labels = glue_task(info.task).labels;
    } catch (const UserError& e) {
      throw UserError(task_file.string() + ": task: " + e.what());
    }
  }
  const int64_t outputs = squad ? 2 : std::max<int64_t>(1, static_cast<int64_t>(labels.size()));
  if (info.outputs != outputs)
    throw UserError(task_file.string() + ": outputs " + std::to_string(info.outputs) + ", but task " + info.task +
                    " has " + std::to_string(outputs));
  if (info.labels != labels)
    throw UserError(task_file.string() + ": labels do not match task " + info.task + "'s");
}
}  // namespace

SavedModel read_saved_model(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UserError("--model " + dir.string() + ": not a saved model folder (expected seed<N>/model/ of a fine-tuning run)");
  for (const char* name : {"task.json", "model.pt"})
    if (!input_exists(dir / name))  // a link loop is no missing file: its own error
      throw UserError((dir / name).string() + ": missing (not a saved fine-tuned model folder)");
  SavedModel out;
  out.dir = dir;
  const fs::path task_file = dir / "task.json";
  const json j = read_json_file(task_file);  // UserError naming the file for malformed JSON
  if (const int format = task_field<int>(j, "format", "an integer", task_file); format != kFormat)
    throw UserError(task_file.string() + ": format " + std::to_string(format) + " is not supported (expected " +
                    std::to_string(kFormat) + ")");
  out.info.task = task_field<std::string>(j, "task", "a string", task_file);
  out.info.labels = task_field<std::vector<std::string>>(j, "labels", "a list of strings", task_file);
  out.info.outputs = task_field<int64_t>(j, "outputs", "an integer", task_file);
  out.info.select = task_field<std::string>(j, "select", "a string", task_file);
  out.info.step = task_field<int64_t>(j, "step", "an integer", task_file);
  out.info.metric = task_field<std::string>(j, "metric", "a string", task_file);
  out.info.value = task_field<double>(j, "value", "a number", task_file);
  check_head_shape(task_file, out.info);
  const fs::path weights = dir / "model.pt";
  out.cfg = config_from_yaml(read_checkpoint_config(weights), weights.string() + " (embedded config)");
  out.cfg.data.tokenizer_model = (dir / out.cfg.data.tokenizer_model).string();
  check_carried_tokenizer(task_file, j, out.cfg.data.tokenizer_model);
  return out;
}

void load_saved_weights(const SavedModel& saved, torch::nn::Module& model) {
  load_checkpoint(saved.dir / "model.pt", model, nullptr);
}

std::string selection_metric(const std::string& task) {
  if (task == "squad" || task == "squad_v1" || task == "squad_v2") return "f1";
  if (task == "cola") return "mcc";
  if (task == "stsb") return "pearson";
  if (task == "mrpc" || task == "qqp") return "f1";
  if (task == "mnli") return "dev_matched/accuracy";
  return "accuracy";
}

ModelKeeper::ModelKeeper(fs::path dir, SavedModelInfo base, const Config& cfg, fs::path tokenizer_file)
    : dir_(std::move(dir)), tokenizer_(std::move(tokenizer_file)), kept_(std::move(base)), cfg_(cfg) {
  kept_.select = cfg.finetune.select;
}

bool ModelKeeper::offer(int64_t step, double value, bool final, torch::nn::Module& model) {
  const bool best = cfg_.finetune.select == "best";
  const bool improves = !saved_ || value > kept_.value;
  if ((best && improves) || (!best && final)) {
    kept_.step = step;
    kept_.value = value;
    save_finetuned_model(dir_, model, cfg_, tokenizer_, kept_);
    saved_ = true;
    since_best_ = 0;
    log::info("finetune", "kept the model of step {} ({} {:.2f}) in {}", step, kept_.metric, value, dir_.string());
    return false;
  }
  if (best && !final) ++since_best_;
  const int64_t patience = cfg_.finetune.early_stopping;
  if (best && patience > 0 && since_best_ >= patience) {
    log::info("finetune", "early stopping at step {}: {} evaluations without a better {} than {:.2f} (step {})", step,
              since_best_, kept_.metric, kept_.value, kept_.step);
    stopped_ = true;
    return true;
  }
  return false;
}

json ModelKeeper::state() const {
  return {{"saved", saved_}, {"step", kept_.step}, {"value", kept_.value}, {"since_best", since_best_},
          {"stopped", stopped_}};
}

void ModelKeeper::restore(const json& state) {
  try {
    saved_ = state.at("saved").get<bool>();
    kept_.step = state.at("step").get<int64_t>();
    kept_.value = state.at("value").get<double>();
    since_best_ = state.at("since_best").get<int64_t>();
    stopped_ = state.at("stopped").get<bool>();
  } catch (const json::exception& e) {
    throw UserError("the checkpoint's model keeper state " + state.dump() + " is not one this version reads: " + e.what());
  }
}

bool ModelKeeper::stopped_in(const std::string& state) {
  if (state.empty()) return false;
  const json j = json::parse(state, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("stopped", false);
}

}  // namespace rpe::finetune

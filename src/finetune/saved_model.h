// A fine-tuned model on disk: what a fine-tuning seed keeps and what `predict` and `export-hf`
// read. One folder (seed<N>/model/):
//   model.pt         the whole task model, encoder + head (qa_outputs, or pooler + classifier),
//                    with the resolved config embedded; checksummed like every checkpoint
//   config.yaml      the same resolved config, for people
//   tokenizer.model  the tokenizer (vocab.txt for WordPiece), so the folder stands alone
//   task.json        {"format": 1, "task", "labels", "outputs", "select", "step", "metric",
//                     "value", "tokenizer_crc32"}: what the head predicts, why these weights,
//                     and the CRC-32 of the tokenizer file's bytes (a replaced copy is refused)
// The folder is replaced as a whole (a new folder beside it, swapped in by replace_folder), so a
// reader never sees the weights of one evaluation with the task.json of another, and a crash
// while saving leaves the previous model in place (on file systems without an atomic exchange,
// it may be left beside it, and the next save puts it back).
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"

namespace rpe::finetune {

struct SavedModelInfo {
  std::string task;                 // squad_v1 | squad_v2 | a GLUE task name
  std::vector<std::string> labels;  // GLUE class names in id order; empty for SQuAD and STS-B
  int64_t outputs = 2;              // head outputs: 2 (SQuAD start/end), classes, or 1 (STS-B)
  std::string select = "final";     // finetune.select that chose these weights
  int64_t step = 0;                 // optimizer step of the weights
  std::string metric;               // the dev metric that ranked them (e.g. f1, accuracy)
  double value = 0.0;               // its value at `step`
  bool squad() const { return task == "squad_v1" || task == "squad_v2"; }
};

// Writes the folder `dir` (see above), replacing an existing one only once the new one is
// complete. `tokenizer_file` is copied in; the embedded config points at the copy.
void save_finetuned_model(const std::filesystem::path& dir, torch::nn::Module& model, Config cfg,
                          const std::filesystem::path& tokenizer_file, const SavedModelInfo& info);

struct SavedModel {
  std::filesystem::path dir;
  Config cfg;  // data.tokenizer_model points into dir
  SavedModelInfo info;
};

// Reads task.json and the config of a saved model folder (verifying model.pt's checksum);
// UserError naming the folder or file when something is missing or malformed.
SavedModel read_saved_model(const std::filesystem::path& dir);

// Loads model.pt's weights into `model` (built from read_saved_model's config).
void load_saved_weights(const SavedModel& saved, torch::nn::Module& model);

// The dev metric that ranks fine-tuned models of `task`: SQuAD f1; GLUE the task's main
// metric (CoLA mcc, STS-B pearson, MRPC/QQP f1, MNLI matched accuracy, others accuracy).
std::string selection_metric(const std::string& task);

// Keeps the model of one seed: offered every evaluation, it saves the weights that
// finetune.select asks for and counts evaluations without improvement for early stopping.
class ModelKeeper {
 public:
  ModelKeeper(std::filesystem::path dir, SavedModelInfo base, const Config& cfg, std::filesystem::path tokenizer_file);
  // An evaluation at `step` scored `value`; `final` for the one after the last step. Saves
  // when select is best and the value improves (ties keep the earlier model), or when select
  // is final and this is the final evaluation. Returns true when early stopping says stop.
  bool offer(int64_t step, double value, bool final, torch::nn::Module& model);
  const SavedModelInfo& kept() const { return kept_; }
  bool has_model() const { return saved_; }
  const std::filesystem::path& dir() const { return dir_; }
  // What it has decided so far, for a checkpoint: {"saved", "step", "value", "since_best",
  // "stopped"} (stopped: early stopping ended the training); restore() takes it back on
  // `finetune --resume` (the model folder holds the weights it names, or is saved again when
  // the resumed run repeats the evaluation that saved it). UserError for a malformed state.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);
  // Whether a checkpoint's keeper state (ModelKeeper::state, as text; "" = none) says that
  // early stopping ended its training: readable on every rank, which hold no keeper.
  static bool stopped_in(const std::string& state);

 private:
  std::filesystem::path dir_, tokenizer_;
  SavedModelInfo kept_;
  Config cfg_;
  bool saved_ = false;
  bool stopped_ = false;
  int64_t since_best_ = 0;
};

}  // namespace rpe::finetune

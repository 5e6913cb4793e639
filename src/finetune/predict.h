// `rpe-train predict squad|glue`: a saved fine-tuned model (saved_model.h) on new inputs.
//   squad  SQuAD JSON -> predictions.json (the --out file), nbest_predictions.json and, for a
//          SQuAD 2.0 model, null_odds.json beside it; EM/F1 when the input has answers
//   glue   a GLUE TSV (train/dev with labels, or test/AX without) -> the GLUE submission TSV
//          (index, prediction as a label name; STS-B a score); the metrics when labelled
// Batched (finetune.eval_batch_size), under the model's precision and train.device. An --out
// whose outputs (those this model writes) would overwrite --input is refused (UserError)
// before the input is read.
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace rpe::finetune {

struct PredictRequest {
  std::string kind;  // squad | glue
  std::filesystem::path model_dir, input, out;
  std::string device;  // "" = the saved config's train.device (auto: CUDA when present)
  bool overwrite = false;  // replace output files that exist (never the input or the model's)
};

struct PredictOutcome {
  std::string task;
  int64_t examples = 0;
  std::vector<std::pair<std::string, double>> metrics;  // empty for unlabelled inputs
  std::vector<std::filesystem::path> files;             // written
};

PredictOutcome predict(const PredictRequest& request);

}  // namespace rpe::finetune

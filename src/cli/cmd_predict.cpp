// rpe-train predict squad|glue: a saved fine-tuned model (seed<N>/model/ of a fine-tuning run)
// on new inputs, written in the official formats (see finetune/predict.h).
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "finetune/predict.h"
#include "util/errors.h"

namespace rpe::cli {
namespace {

int run_predict(const finetune::PredictRequest& req) {
  check_output_file("--out", req.out);  // writable before every window is scored, not after
  const auto out = finetune::predict(req);
  for (const auto& f : out.files) std::cout << "wrote " << f.string() << "\n";
  // Shortest text that reads back as the same double: scores compare exactly with results.json.
  for (const auto& [k, v] : out.metrics) std::cout << fmt::format("{} {} {}\n", out.task, k, v);
  return 0;
}

void add_kind(CLI::App* parent, Runner& run, const std::string& kind, const std::string& help,
              const std::string& input_help, const std::string& out_help) {
  auto* cmd = parent->add_subcommand(kind, help);
  auto req = std::make_shared<finetune::PredictRequest>();
  req->kind = kind;
  cmd->add_option("--model", req->model_dir, "Saved model folder (a fine-tuning run's seed<N>/model)")->required();
  cmd->add_option("--input", req->input, input_help)->required();
  cmd->add_option("--out", req->out, out_help)->required();
  cmd->add_option("--device", req->device, "cpu | cuda | cuda:N | auto (default: the model's train.device)");
  cmd->add_flag("--overwrite", req->overwrite, "Replace output files that exist (never the input or the model's files)");
  cmd->callback([&run, req] { run = [req] { return run_predict(*req); }; });
}

}  // namespace

void add_predict(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("predict", "Predict with a saved fine-tuned model (SQuAD JSON or GLUE TSV)");
  cmd->require_subcommand(1);
  add_kind(cmd, run, "squad", "SQuAD JSON -> predictions.json, nbest_predictions.json (+ null_odds.json for 2.0)",
           "SQuAD JSON file (with answers: EM/F1 are printed)",
           "predictions.json to write (nbest_predictions.json, null_odds.json go beside it)");
  add_kind(cmd, run, "glue", "GLUE TSV (dev or test, e.g. AX with an MNLI model) -> GLUE submission TSV",
           "GLUE .tsv file of the model's task (with labels: the metrics are printed)",
           "Submission .tsv to write (index, prediction)");
}

}  // namespace rpe::cli

// rpe-train predict squad|glue: a saved fine-tuned model (seed<N>/model/ of a fine-tuning run)
// on new inputs, written in the official formats (see finetune/predict.h).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <system_error>
#include <vector>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "finetune/predict.h"
#include "util/errors.h"

namespace rpe::cli {
namespace {
namespace fs = std::filesystem;

// True when `a` and `b` name one file: the same inode when both exist (links, "./x", "../d/x"),
// else the same path once made absolute and normalised.
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  const fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) return false;
  const fs::path cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

// The predictions would overwrite the input they are made from, and the run would still exit
// 0: refused before anything is read. SQuAD writes nbest_predictions.json (and, for 2.0,
// null_odds.json) beside --out as well.
void refuse_overwriting_input(const finetune::PredictRequest& req) {
  std::vector<fs::path> outputs{req.out};
  if (req.kind == "squad")
    for (const char* name : {"nbest_predictions.json", "null_odds.json"}) outputs.push_back(req.out.parent_path() / name);
  for (const auto& o : outputs)
    if (same_file(o, req.input))
      throw UserError("--out " + req.out.string() + ": predict would write " + o.string() + ", which is the --input file " +
                      req.input.string() + "; choose another --out");
}

int run_predict(const finetune::PredictRequest& req) {
  check_output_file("--out", req.out);  // writable before every window is scored, not after
  refuse_overwriting_input(req);
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

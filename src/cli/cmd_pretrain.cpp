// rpe-train pretrain: MLM pretraining of the configured model in a run folder.
// A run folder is never overwritten silently: an existing one needs --resume or --overwrite.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "config/config.h"
#include "dist/data_parallel.h"
#include "train/run_dir.h"
#include "train/trainer.h"
#include "util/log.h"

namespace rpe::cli {
namespace fs = std::filesystem;

namespace {
struct PretrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string run_dir;
  bool resume = false;
  bool overwrite = false;
};

int run_pretrain(const PretrainArgs& a) {
  const Config cfg = load_config(a.config, a.sets);
  const fs::path dir = a.run_dir.empty() ? fs::path(cfg.run.root) / cfg.run.name : fs::path(a.run_dir);
  // Under torchrun/Slurm/mpirun only rank 0 logs at info level (and readies the run folder).
  const auto env = dist::detect_launch_env();
  if (env.rank != 0) log::set_rank(static_cast<int>(env.rank));
  RunDirRequest folder{a.resume, a.overwrite};
  for (const auto& files : {cfg.data.train_files, cfg.data.valid_files})  // --overwrite never deletes an input
    folder.inputs.insert(folder.inputs.end(), files.begin(), files.end());
  for (const std::string& input : {cfg.data.tokenizer_model, cfg.data.shards, cfg.init.checkpoint})
    if (!input.empty()) folder.inputs.emplace_back(input);
  const PretrainResult r = pretrain(cfg, dir, folder);
  if (env.rank != 0) return r.steps > 0 ? 0 : 1;
  const auto loss = [](double v) { return std::isnan(v) ? std::string("none") : fmt::format("{:g}", v); };
  std::cout << "run folder: " << r.run_dir.string() << "\n"
            << "final MLM loss (train): " << loss(r.final_loss) << " (first logged: " << loss(r.first_loss) << ")"
            << (std::isnan(r.final_loss) ? ": every step was skipped, none updated the weights" : "") << "\n"
            << "held-out MLM loss: " << loss(r.valid_loss)
            << (std::isnan(r.valid_loss) ? " (nothing held out, or no held-out token masked)" : ", accuracy: " + loss(r.valid_accuracy)) << "\n";
  return 0;
}
}  // namespace

void add_pretrain(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("pretrain", "Pretrain a BERT encoder with masked language modelling");
  auto a = std::make_shared<PretrainArgs>();
  cmd->add_option("--config", a->config, "Experiment YAML file")->required();
  cmd->add_option("--set", a->sets, "Override a key: a.b.c=value (repeatable)");
  cmd->add_option("--run-dir", a->run_dir, "Run folder (default: run.root/run.name)")->check(empty_path_check);
  cmd->add_flag("--resume", a->resume, "Continue the run in an existing run folder from its latest checkpoint");
  cmd->add_flag("--overwrite", a->overwrite, "Delete an existing run folder first")->excludes("--resume");
  cmd->callback([&run, a] { run = [a] { return run_pretrain(*a); }; });
}

}  // namespace rpe::cli

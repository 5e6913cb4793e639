// rpe-train finetune squad|glue: fine-tune a pretrained encoder and evaluate it with the
// official metrics; --seeds 1,2,3 runs several seeds in one command (seed<N>/ subfolders).
// With no options, `rpe-train finetune squad` takes the paper's SQuAD v1.1 settings
// (configs/finetune/squad_v1.yaml) on the newest finished pretraining run under runs/.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "config/config.h"
#include "dist/data_parallel.h"
#include "finetune/finetune.h"
#include "finetune/glue_data.h"
#include "train/run_dir.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe::cli {
namespace fs = std::filesystem;
namespace {

struct FinetuneArgs {
  std::string config, init, seeds, run_dir, task, runs = "runs";
  std::vector<std::string> sets;
  bool overwrite = false;
  bool resume = false;
};

std::vector<int64_t> parse_seeds(const std::string& text) {
  std::vector<int64_t> seeds;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      seeds.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw UserError("--seeds " + text + ": expected comma-separated integers, e.g. 1,2,3");
    }
    // Each seed trains into seed<N>/: a repeat would train again over its own folder.
    if (std::count(seeds.begin(), seeds.end() - 1, seeds.back()) > 0)
      throw UserError("--seeds " + text + ": seed " + std::to_string(seeds.back()) + " appears twice");
  }
  return seeds;
}

// --init when none is given: the newest finished pretraining run (printed, with the reason).
std::string default_init(const std::string& runs) {
  const auto run = newest_finished_run(runs);
  if (!run)
    throw UserError("no finished pretraining run under " + runs + "/ (a run folder with summary.json and a checkpoint): " +
                    "pretrain one first, e.g. `rpe-train pretrain --config base_method4.yaml`, or pass --init RUN");
  std::cout << "--init " << run->string() << " (the newest finished pretraining run under " << runs
            << "/; pass --init to choose another)\n";
  return run->string();
}

int run(const FinetuneArgs& a, const std::string& kind) {
  finetune::FinetuneRequest req;
  req.config_file = a.config.empty() ? (kind == "squad" ? "squad_v1.yaml" : "glue.yaml") : a.config;
  req.seeds = parse_seeds(a.seeds);
  req.run_dir = a.run_dir;
  req.overwrite = a.overwrite;
  req.resume = a.resume;
  req.sets = a.sets;
  // The subcommand (and --task) name the task: a --set of it as well (finetune.task=x, or a
  // finetune={task: x, ...} mapping) would silently win or lose; so would one replacing the
  // whole section (the task with it, or a scalar the task's own --set would then replace).
  for (const auto& set : a.sets) {
    if (assignment_sets(set, "finetune.task"))
      throw UserError("--set " + set + ": the task is named by `finetune squad` or `finetune glue --task NAME`, "
                      "not by --set");
    if (set.rfind("finetune=", 0) == 0)
      throw UserError("--set " + set + ": set the section's keys one by one (finetune.lr=...), not the whole "
                      "section: its task is the subcommand's");
  }
  if (kind == "squad") {
    req.sets.push_back("finetune.task=squad");
  } else if (!a.task.empty()) {
    if (a.task == "squad") throw UserError("--task squad: use `rpe-train finetune squad`");
    // Checked here so the message names --task, not the --set it becomes below.
    const auto glue = finetune::glue_task_names();
    if (std::find(glue.begin(), glue.end(), a.task) == glue.end())
      throw UserError("--task " + a.task + ": unknown GLUE task (valid: " + join(glue) + ")");
    req.sets.push_back("finetune.task=" + a.task);
  }
  req.kind = kind;
  // Under torchrun every rank trains; only rank 0 logs at info level and prints the results.
  const auto env = dist::detect_launch_env();
  if (env.rank != 0) log::set_rank(static_cast<int>(env.rank));
  // --init none: a randomly initialised encoder (data.tokenizer_model must name a tokenizer).
  req.init = a.init == "none" ? "" : a.init.empty() ? default_init(a.runs) : a.init;
  const auto out = finetune::run_finetune(req);
  if (env.rank != 0) return 0;  // rank 0 prints the folder and the results, once
  std::cout << "run folder: " << out.run_dir.string() << "\n";
  for (const auto& r : out.rows)
    std::cout << r.task << " " << r.split << " seed " << r.seed << " " << r.metric << " " << r.value << "\n";
  return 0;
}

void add_common(CLI::App* cmd, const std::shared_ptr<FinetuneArgs>& a, const std::string& default_config) {
  cmd->add_option("--config", a->config,
                  "Fine-tuning YAML, a path or a name on the config search path (default: " + default_config + ")");
  cmd->add_option("--init", a->init,
                  "Pretrained run folder or checkpoint (default: the newest finished run under --runs; none: random init)");
  cmd->add_option("--runs", a->runs, "Where to look for the newest finished pretraining run (default: runs)");
  cmd->add_option("--seeds", a->seeds, "Comma-separated seeds, one fine-tuning run each (default: train.seed)")
      ->check([](const std::string& s) {  // "" (an unset shell variable) would run the default seed
        return s.empty() ? std::string("empty: expected comma-separated integers, e.g. 1,2,3") : std::string();
      });
  cmd->add_option("--set", a->sets, "Override a key: a.b.c=value (repeatable)");
  cmd->add_option("--run-dir", a->run_dir, "Run folder (default: run.root/run.name, and /<task> below it for GLUE)")
      ->check(empty_path_check);
  cmd->add_flag("--resume", a->resume,
                "Continue the run in its folder (same options): finished seeds are skipped, an unfinished one "
                "continues from its newest checkpoint");
  cmd->add_flag("--overwrite", a->overwrite, "Delete an existing run folder first")->excludes("--resume");
}

}  // namespace

void add_finetune(CLI::App& app, Runner& run_fn) {
  auto* cmd = app.add_subcommand("finetune", "Fine-tune and evaluate on SQuAD or GLUE");
  cmd->require_subcommand(1);
  auto sq = std::make_shared<FinetuneArgs>();
  auto* squad = cmd->add_subcommand("squad", "SQuAD v1.1 / v2.0 (finetune.squad_v2)");
  add_common(squad, sq, "squad_v1.yaml");
  squad->callback([&run_fn, sq] { run_fn = [sq] { return run(*sq, "squad"); }; });
  auto gl = std::make_shared<FinetuneArgs>();
  auto* glue = cmd->add_subcommand("glue", "A GLUE task (--task " + join(finetune::glue_task_names(), "|") + ")");
  add_common(glue, gl, "glue.yaml");
  glue->add_option("--task", gl->task, "GLUE task (default: finetune.task of the config)")
      ->check([](const std::string& s) {  // "" (an unset shell variable) would run the config's task
        return s.empty() ? "empty: expected one of " + join(finetune::glue_task_names()) : std::string();
      });
  glue->callback([&run_fn, gl] { run_fn = [gl] { return run(*gl, "glue"); }; });
}

}  // namespace rpe::cli

// rpe-train dump-config: prints the fully resolved config (extends + --set applied; with --init,
// a fine-tuning config over the pretrained run's model and data, as `finetune --init` resolves
// it), with --flat a key path a line (the reproduction scripts compare runs by it), or with
// --shell a settings file's keys as bash assignments (configs/reproduce/, read by scripts), or
// with --inputs the files its run reads, a path a line (the scripts' stamps identify them by content),
// or with --defaults every key's built-in default, as --flat prints keys (a stamp written before a
// key existed matches a run that leaves the new key at its default).
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "config/config.h"
#include "config/shell_vars.h"
#include "finetune/finetune.h"
#include "finetune/prepare.h"
#include "train/checkpoint.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe::cli {
namespace fs = std::filesystem;

namespace {
// Pretraining reads its corpus, held-out files and tokenizer model; fine-tuning (`init`) its
// tokenizer, task files and start checkpoint (`checkpoint`: empty for a slim run copy).
void print_inputs(const Config& cfg, bool finetuning, const fs::path& checkpoint) {
  std::vector<fs::path> files;
  if (finetuning) {
    files = finetune::finetune_input_files(cfg);
    if (!checkpoint.empty()) files.push_back(checkpoint);
  } else {
    for (const auto& list : {cfg.data.train_files, cfg.data.valid_files})
      for (const auto& f : list) files.emplace_back(f);
    if (!cfg.data.tokenizer_model.empty()) files.emplace_back(cfg.data.tokenizer_model);
  }
  for (const auto& f : files) {
    if (f.string().find('\n') != std::string::npos) throw UserError("dump-config --inputs: a path holds a line break");
    std::cout << f.string() << "\n";
  }
}

struct DumpArgs {
  std::string file, init;
  std::vector<std::string> sets;
  bool shell = false, flat = false, inputs = false, defaults = false;
};

int run_dump_config(const DumpArgs& a) {
  silence_logs();  // stdout is the config: scripts compare it
  if (a.defaults) {
    const Config defaults;  // named: GCC 12 took a temporary's strings for uninitialized (-Wmaybe-uninitialized)
    std::cout << to_flat_text(defaults);
    return 0;
  }
  if (a.file.empty()) throw UserError("dump-config: --config is required");
  if (a.shell) {
    if (!a.sets.empty()) throw UserError("dump-config --shell: --set does not apply to a settings file");
    std::cout << shell_assignments(a.file);
    return 0;
  }
  finetune::FinetuneRequest request;
  request.config_file = a.file;
  request.sets = a.sets;
  request.init = a.init;
  Config cfg;
  fs::path checkpoint;
  const fs::path kept = fs::path(a.init) / "config.yaml";
  if (a.init.empty()) {
    cfg = load_config(a.file, a.sets);
  } else if (fs::is_directory(a.init) && !latest_checkpoint(a.init) && fs::exists(kept)) {
    // A finished run's slim copy (scripts/gpu_call.sh carries no checkpoints): its config.yaml
    // is the text its checkpoints embedded, so the settings read the same.
    cfg = finetune::resolve_finetune_config_over(request, read_file(kept), kept.string(), a.init).cfg;
  } else {
    const auto resolved = finetune::resolve_finetune_config(request);
    cfg = resolved.cfg;
    checkpoint = resolved.checkpoint;
  }
  if (a.inputs) {
    print_inputs(cfg, !a.init.empty(), checkpoint);
    return 0;
  }
  std::cout << (a.flat ? to_flat_text(cfg) : to_yaml(cfg));
  return 0;
}
}  // namespace

void add_dump_config(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("dump-config", "Print the resolved config (defaults < files < --set)");
  auto a = std::make_shared<DumpArgs>();
  cmd->add_option("--config", a->file, "Experiment YAML file (required unless --defaults)");
  cmd->add_option("--set", a->sets, "Override a key: a.b.c=value (repeatable)");
  cmd->add_option("--init", a->init, "Pretrained run or checkpoint: resolve --config as `finetune --init` does");
  cmd->add_flag("--shell", a->shell,
                "Print the file's top-level keys as bash assignments (KEY='v', KEY=('a' 'b')); no experiment schema")
      ->excludes("--init");
  cmd->add_flag("--flat", a->flat, "Print the resolved config a key path a line (model.attention.method: m4)")
      ->excludes("--shell");
  cmd->add_flag("--inputs", a->inputs,
                "Print the files the run reads, a path a line (pretraining: corpus, held-out, tokenizer; with --init: "
                "tokenizer, task files, start checkpoint)")
      ->excludes("--shell")
      ->excludes("--flat");
  cmd->add_flag("--defaults", a->defaults,
                "Print every key's built-in default, a key path a line as --flat does (no --config)")
      ->excludes("--config")
      ->excludes("--set")
      ->excludes("--init")
      ->excludes("--shell")
      ->excludes("--flat")
      ->excludes("--inputs");
  cmd->callback([&run, a] { run = [a] { return run_dump_config(*a); }; });
}

}  // namespace rpe::cli

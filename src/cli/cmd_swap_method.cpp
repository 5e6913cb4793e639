// rpe-train swap-method INIT --config SWAP.yaml --run-dir OUT: the paper's "near drop-in"
// recipe (Huang et al. 2020, sec. 4.4, Table 5) as a run folder that `rpe-train finetune
// --init OUT` can start from. The pretrained checkpoint's model/data sections are kept, the
// file and --set go on top (typically model.attention.method: m4, add_absolute: true,
// max_relative: 0), the model is rebuilt and loaded with load_pretrained_encoder(): shared
// tensors are copied, the new method's tables start neutral (init.new_position_params:
// identity) so that, with the absolute table kept, the new model computes the same function.
// OUT (refused when it exists, unless --overwrite) gets checkpoints/step_00000000.pt (+ latest),
// config.yaml and the tokenizer.
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "config/config.h"
#include "interop/method_swap.h"
#include "model/bert.h"
#include "train/checkpoint.h"
#include "train/run_dir.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe::cli {
namespace fs = std::filesystem;

namespace {
struct SwapArgs {
  std::string init, config, run_dir;
  std::vector<std::string> sets;
  bool overwrite = false;
};

int run_swap(const SwapArgs& a) {
  const CheckpointSource src = resolve_checkpoint(a.init);
  const fs::path& checkpoint = src.checkpoint;
  const fs::path& source_dir = src.run_dir;
  const std::string base_yaml = read_checkpoint_config(checkpoint);
  Config cfg = load_config_over(base_yaml, checkpoint.string(), {"model", "data"}, a.config, a.sets);
  // The weights' lineage, which fine-tuning's result lines carry: the method they learned in
  // pretraining, where it is not the new one (a swap back clears it). Table 5's paper numbers are
  // of such swaps; Tables 2-4's of models pretrained with their method.
  const std::string learned = config_from_yaml(base_yaml, checkpoint.string()).model.weights_pretrained_with();
  cfg.model.pretrained_method = learned == cfg.model.attention.method ? "" : learned;
  const fs::path out(a.run_dir);
  RunDirRequest request{/*resume=*/false, a.overwrite, /*can_resume=*/false};
  request.inputs = {checkpoint, source_dir / "tokenizer.model"};  // --overwrite never deletes what it reads
  if (!cfg.data.tokenizer_model.empty()) request.inputs.emplace_back(cfg.data.tokenizer_model);
  check_run_dir(out, request);  // refused before the work; created (or replaced) after it
  const fs::path tok = source_dir / "tokenizer.model";
  if (cfg.data.tokenizer_model.empty() && cfg.data.tokenizer == "sentencepiece" && !fs::exists(tok))
    throw UserError(a.init + ": the pretraining tokenizer " + tok.string() + " is missing");
  BertModel bert(cfg.model);
  const SwapReport r = load_pretrained_encoder(*bert, checkpoint, swap_options_from(cfg.init));
  prepare_run_dir(out, request);
  if (cfg.data.tokenizer_model.empty() && fs::exists(tok)) write_file_atomic(out / "tokenizer.model", read_file(tok));
  const std::string yaml = to_yaml(cfg);
  save_checkpoint(out, *bert, nullptr, TrainState{}, yaml);
  write_file_atomic(out / "config.yaml", yaml);
  std::cout << "wrote " << (out / "checkpoints").string() << " (method " << cfg.model.attention.method << "): "
            << r.loaded.size() << " tensors loaded, " << r.added.size() << " added, " << r.dropped.size()
            << " dropped; probe max |logit change| " << r.probe_max_diff << "\n";
  return 0;
}
}  // namespace

void add_swap_method(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("swap-method", "Give a pretrained checkpoint another position method (Table 5 recipe)");
  auto a = std::make_shared<SwapArgs>();
  cmd->add_option("init", a->init, "Pretrained run folder or checkpoint (e.g. from import-hf)")->required();
  cmd->add_option("--config", a->config, "YAML with the new model.attention (and init.new_position_params)")->required();
  cmd->add_option("--set", a->sets, "Override a key: a.b.c=value (repeatable)");
  cmd->add_option("--run-dir", a->run_dir, "Run folder to create")->required();
  cmd->add_flag("--overwrite", a->overwrite, "Delete an existing run folder first");
  cmd->callback([&run, a] { run = [a] { return run_swap(*a); }; });
}

}  // namespace rpe::cli

// Fine-tuning driver: resolves the config on top of a pretrained run, reads and checks all
// inputs before anything is written, then per seed trains the task head and the encoder
// (AdamW, linear warmup over warmup_fraction of the steps, linear decay; BERT's recipe),
// evaluates on the dev set(s) with the official metrics, and writes predictions.json,
// results.json (atomically) and one result line per metric to finetune.results_file.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "eval/results.h"

namespace rpe::finetune {

struct FinetuneRequest {
  std::filesystem::path config_file;
  std::vector<std::string> sets;  // --set overrides (applied last)
  std::string init;               // pretrained run folder or checkpoint; "" = random init
  std::vector<int64_t> seeds;     // empty = train.seed
  std::string run_dir;            // "" = default_run_folder(cfg)
  bool overwrite = false;
  bool resume = false;            // continue the run in run_dir (finetune/resume.h)
  std::string kind;               // "squad" | "glue" | "" (any): the subcommand's family
};

struct ResolvedConfig {
  Config cfg;
  std::filesystem::path checkpoint;  // empty without --init
  std::string pretrain_run;          // the --init argument as given
  int64_t pretrain_max_len = 0;      // data.max_seq_len of the pretraining run
  std::optional<uint32_t> pretrained_tokenizer_crc;  // the checkpoint's (read_checkpoint_header), if it names one
};

// The fine-tuning config: the pretrained run's model and data sections, overlaid by the
// fine-tuning file and --set. Raising model.max_position keeps the pretrained clipping
// distance (max_relative) so relative tables keep their shape. The tokenizer is the
// pretraining run's tokenizer.model unless data.tokenizer_model names one.
ResolvedConfig resolve_finetune_config(const FinetuneRequest& request);
// The same over `base_yaml`, the pretrained run's config as its folder keeps it (config.yaml, the
// text its checkpoints embed), for a run folder whose checkpoints are gone: what dump-config
// --init reports for a finished run's slim copy. `checkpoint` stays empty.
ResolvedConfig resolve_finetune_config_over(const FinetuneRequest& request, const std::string& base_yaml,
                                            const std::string& base_name, const std::filesystem::path& pretrain_dir);

struct FinetuneOutcome {
  std::filesystem::path run_dir;
  std::vector<eval::ResultRow> rows;  // every metric of every seed
};

FinetuneOutcome run_finetune(const FinetuneRequest& request);

// Where a fine-tuning run goes without --run-dir: run.root/run.name for SQuAD, and below it a
// folder per GLUE task (runs/glue/rte, runs/glue/mrpc: the tasks of one config run one after
// another without --overwrite deleting the previous task's models).
std::filesystem::path default_run_folder(const Config& cfg);

// finetune.results_file checked without creating anything: UserError naming it for a folder, or
// a file with lines that are not result lines (appending would damage it). A missing file is fine.
void check_results_file(const std::filesystem::path& file);
// The same, then its folder created and the file opened for appending (created empty if missing),
// so a path that cannot take a line stops the run before it trains. A bare name is in the
// working directory.
void ready_results_file(const std::filesystem::path& file);

// Deletes a file or folder tree. std::filesystem::remove_all binds to a copy exported by
// the LibTorch wheel's libtorch.so that crashes (null call); this walks the tree with
// directory_iterator and remove() instead.
void remove_tree(const std::filesystem::path& path);

}  // namespace rpe::finetune

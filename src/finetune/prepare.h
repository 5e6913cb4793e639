// Fine-tuning inputs, read and checked before any output is written: the resolved config,
// the tokenizer, and the task's training and dev data as token ids; plus what the task
// modules share (padded batches, loading the pretrained encoder, result rows).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eval/results.h"
#include "finetune/finetune.h"
#include "finetune/glue_data.h"
#include "finetune/heads.h"
#include "finetune/squad_data.h"

namespace rpe::finetune {

struct Prepared {
  ResolvedConfig rc;
  std::string run_started;  // when rank 0 made the run folder (eval::utc_now_ns): the rows' run_started
  std::unique_ptr<Tokenizer> tok;
  bool squad = false;
  // SQuAD
  std::vector<SquadExample> train_ex, dev_ex;
  std::vector<SquadFeature> train_f, dev_f;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> dev_off;  // context token byte offsets per dev question
  // GLUE
  const GlueTask* glue = nullptr;
  std::vector<std::vector<int64_t>> train_ids;
  std::vector<double> train_labels;
  struct Split {
    std::string name;
    std::vector<std::vector<int64_t>> ids;
    std::vector<double> labels;
  };
  std::vector<Split> dev;
};

// Reads the request's config, tokenizer and data (SQuAD features or GLUE pairs).
Prepared prepare(const FinetuneRequest& req);
// prepare()'s second half: the tokenizer and data for the config in p.rc (already resolved).
void read_inputs(Prepared& p, const FinetuneRequest& req);

// Ids past the embedding table fail deep in the first forward pass (or, on a GPU, as a device
// assert): a tokenizer with more pieces than model.vocab_size is a UserError naming
// `tokenizer_file`. Fine-tuning (read_inputs) and predict check with it.
void require_tokenizer_fits(const Tokenizer& tok, const std::string& tokenizer_file, int64_t vocab_size);

// The files a GLUE run of `task` reads: finetune.train_file, else <task folder>/train.tsv, and a
// file per dev split (finetune.dev_file where the task has one split). The task folder is
// finetune.data_dir, else <glue_dir>/<the task's folder>; a missing folder is a UserError.
struct GlueFiles {
  std::filesystem::path train;
  std::vector<std::pair<std::string, std::filesystem::path>> dev;  // split name, file
};
GlueFiles glue_files(const FinetuneOptions& f, const GlueTask& task);

// Every file a fine-tuning run of `cfg` (resolved over its pretrained run) reads: the tokenizer
// model if one is named, and SQuAD's train/dev JSON or the GLUE task's TSV files, as named
// (not checked for existence). `rpe-train dump-config --inputs` prints them for the stamps of
// the reproduction scripts.
std::vector<std::filesystem::path> finetune_input_files(const Config& cfg);

// A padded batch with the tokenizer's [PAD] and, unless finetune.token_types is off, token
// types 1 after the first [SEP].
Batch batch_of(const Prepared& p, const std::vector<const std::vector<int64_t>*>& seqs, const torch::Device& device);

// The longest input (training and dev) in tokens.
int64_t longest_input(const Prepared& p);

// Loads the pretrained weights into `bert` (through the method-swap loader) and checks that
// inputs of `longest` tokens fit the position method; `report`: log what was loaded (the first
// load of a run; every seed's model loads the same).
void load_encoder(BertModel& bert, const Prepared& p, int64_t longest, bool report = false);

// A result row with everything but task, split, metric, value and examples (finetune.cpp);
// `seed_dir` is the seed's folder (run_dir: its parent, absolute).
eval::ResultRow base_row(const Prepared& p, const BertModel& bert, const std::string& run_id, int64_t seed,
                         const std::filesystem::path& seed_dir);

}  // namespace rpe::finetune

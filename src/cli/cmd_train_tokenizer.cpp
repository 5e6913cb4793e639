// rpe-train train-tokenizer: trains a SentencePiece unigram model on data.train_files with
// the library's own trainer and writes it to --out (default: data.tokenizer_model).
#include <chrono>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "config/config.h"
#include "data/sp_tokenizer.h"
#include "util/errors.h"

namespace rpe::cli {

namespace {
struct TrainTokenizerArgs {
  std::string config, out;
  std::vector<std::string> sets;
  bool overwrite = false;
};

int run_train_tokenizer(const TrainTokenizerArgs& a) {
  const Config cfg = load_config(a.config, a.sets);
  const auto& d = cfg.data;
  if (d.tokenizer != "sentencepiece")
    cfg.fail("data.tokenizer", "train-tokenizer trains sentencepiece models; wordpiece uses a given vocab.txt");
  require_train_files(cfg, "train-tokenizer");
  const std::string out = a.out.empty() ? d.tokenizer_model : a.out;
  if (out.empty()) cfg.fail("data.tokenizer_model", "empty: give the output path here or with --out");
  if (out.size() < 7 || out.substr(out.size() - 6) != ".model")
    throw UserError(out + ": the output file name must end in .model");
  check_output_file(a.out.empty() ? "data.tokenizer_model" : "--out", out);  // before the training, not after
  // A run's token ids mean the pieces of the model it was trained with: replacing that file
  // silently would make every later fine-tuning or resume of it read other pieces.
  std::error_code ec;
  if (!a.overwrite && std::filesystem::exists(out, ec))
    throw UserError(out + ": exists (a run may be using it; its token ids mean its pieces): pass --overwrite to "
                    "replace it, or --out NEW.model");
  const auto t0 = std::chrono::steady_clock::now();
  train_sentencepiece(d.train_files, d.document_format, out, d.tokenizer_vocab_size, d.lowercase);
  const SentencePieceTokenizer tok(out);
  std::cout << "sentencepiece model: " << out << " | vocab " << tok.vocab_size() << " | "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
  return 0;
}
}  // namespace

void add_train_tokenizer(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("train-tokenizer", "Train a SentencePiece model on data.train_files");
  auto a = std::make_shared<TrainTokenizerArgs>();
  cmd->add_option("--config", a->config, "Experiment YAML file")->required();
  cmd->add_option("--set", a->sets, "Override a key: a.b.c=value (repeatable)");
  cmd->add_option("--out", a->out, "Output .model file (default: data.tokenizer_model)");
  cmd->add_flag("--overwrite", a->overwrite, "Replace an existing output file");
  cmd->callback([&run, a] { run = [a] { return run_train_tokenizer(*a); }; });
}

}  // namespace rpe::cli

// rpe-train tokenize: encodes stdin line by line with the configured tokenizer and prints
// one JSON object per line: {"ids", "pieces", "word_start", "offsets" ([begin, end) bytes)}.
// Used by the tokenizer parity test and for inspecting what the model sees.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "config/config.h"
#include "data/tokenizer.h"
#include "util/errors.h"
#include "util/utf8.h"

namespace rpe::cli {

namespace {
struct TokenizeArgs {
  std::string config, tokenizer, model;  // tokenizer "": told by the model file's name
  std::vector<std::string> sets;
  bool cased = false;
};

int run_tokenize(const TokenizeArgs& a) {
  DataOptions d;
  if (!a.config.empty() && (!a.model.empty() || !a.tokenizer.empty() || a.cased))
    throw UserError("tokenize: --config names the tokenizer (data.tokenizer*); --model, --tokenizer and --cased "
                    "are for a tokenizer file alone: give one or the other");
  if (!a.config.empty()) {
    d = load_config(a.config, a.sets).data;
    // A run folder's config.yaml: its tokenizer is the run's tokenizer.model (pretraining's
    // default) or, in a kept fine-tuned model's folder, a file named relative to that folder.
    namespace fs = std::filesystem;
    const fs::path folder = fs::path(a.config).parent_path();
    std::error_code ec;
    if (d.tokenizer == "sentencepiece" && d.tokenizer_model.empty() && fs::exists(folder / "tokenizer.model", ec))
      d.tokenizer_model = (folder / "tokenizer.model").string();
    else if (!d.tokenizer_model.empty() && fs::path(d.tokenizer_model).is_relative() &&
             !fs::exists(d.tokenizer_model, ec) && fs::exists(folder / d.tokenizer_model, ec))
      d.tokenizer_model = (folder / d.tokenizer_model).string();
  } else {
    if (a.model.empty()) throw UserError("tokenize: give --config or --model (vocab.txt or .model file)");
    // A sentencepiece model is a .model file (what train-tokenizer writes); anything else is
    // read as a WordPiece vocab.txt unless --tokenizer says otherwise.
    if (!a.tokenizer.empty() && a.tokenizer != "sentencepiece" && a.tokenizer != "wordpiece")
      throw UserError("--tokenizer " + a.tokenizer + ": must be sentencepiece or wordpiece");
    d.tokenizer = !a.tokenizer.empty()                                           ? a.tokenizer
                  : std::filesystem::path(a.model).extension() == ".model" ? "sentencepiece"
                                                                           : "wordpiece";
    d.tokenizer_model = a.model;
    d.lowercase = !a.cased;
  }
  if (d.tokenizer_model.empty())
    throw UserError("tokenize: data.tokenizer_model is empty (nothing to load; a run's own tokenizer is "
                    "RUN/tokenizer.model: pass --model RUN/tokenizer.model)");
  const auto tok = make_tokenizer(d, d.tokenizer_model);
  std::ios::sync_with_stdio(false);
  std::string line;
  for (int64_t n = 1; std::getline(std::cin, line); ++n) {
    // As the corpus reader: other bytes than UTF-8 text are an error, not <unk> pieces.
    if (const size_t bad = find_invalid_utf8(line); bad != std::string::npos)
      throw UserError("tokenize: stdin line " + std::to_string(n) + ": invalid UTF-8 at byte offset " +
                      std::to_string(bad));
    const Encoding e = tok->encode(line);
    nlohmann::json j;
    j["ids"] = e.ids;
    std::vector<std::string> pieces;
    for (const auto id : e.ids) pieces.push_back(tok->piece(id));
    j["pieces"] = pieces;
    j["word_start"] = e.word_start;
    j["offsets"] = e.offsets;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  return 0;
}
}  // namespace

void add_tokenize(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("tokenize", "Encode stdin lines; print ids, pieces, word starts, offsets as JSON");
  auto a = std::make_shared<TokenizeArgs>();
  cmd->add_option("--config", a->config, "Experiment YAML file (its data.tokenizer* keys are used)");
  cmd->add_option("--set", a->sets, "Override a key: a.b.c=value (repeatable)");
  cmd->add_option("--tokenizer", a->tokenizer, "Without --config: wordpiece or sentencepiece (default: sentencepiece for a .model file, else wordpiece)");
  cmd->add_option("--model", a->model, "Without --config: vocab.txt (wordpiece) or .model (sentencepiece)");
  cmd->add_flag("--cased", a->cased, "Without --config: keep case and accents (cased vocabularies)");
  cmd->callback([&run, a] { run = [a] { return run_tokenize(*a); }; });
}

}  // namespace rpe::cli

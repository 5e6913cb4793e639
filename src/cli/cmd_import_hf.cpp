// rpe-train import-hf DIR --out CHECKPOINT: a Hugging Face BERT folder (config.json,
// model.safetensors, vocab.txt, tokenizer_config.json) -> an rpe-train checkpoint with its
// config embedded and vocab.txt copied beside it (mapping in interop/hf_bert.h).
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "interop/hf_bert.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe::cli {
namespace fs = std::filesystem;

namespace {
// An existing checkpoint at --out, or another vocabulary beside it (which the models already
// there name in their config), is replaced only with --overwrite.
void refuse_replacing(const std::string& dir, const fs::path& out) {
  std::error_code ec;
  refuse_existing_output("--out", out);
  const fs::path vocab_out = (out.has_parent_path() ? out.parent_path() : fs::path(".")) / "vocab.txt";
  const fs::path vocab_in = fs::path(dir) / "vocab.txt";
  if (fs::is_regular_file(vocab_out, ec) && fs::is_regular_file(vocab_in, ec) &&
      read_file(vocab_out) != read_file(vocab_in))
    throw UserError("--out " + out.string() + ": " + vocab_out.string() +
                    " holds another vocabulary, which models in that folder may use; write to another folder or "
                    "pass --overwrite");
}
}  // namespace

void add_import_hf(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("import-hf", "Convert a Hugging Face BERT folder into an rpe-train checkpoint");
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto overwrite = std::make_shared<bool>(false);
  auto headless = std::make_shared<bool>(false);
  cmd->add_option("DIR", *dir, "Folder with config.json, model.safetensors, vocab.txt")->required();
  cmd->add_option("--out", *out, "Checkpoint file to write (vocab.txt goes next to it)")->required();
  cmd->add_flag("--overwrite", *overwrite, "Replace an existing --out (and the vocab.txt beside it)");
  cmd->add_flag("--allow-missing-mlm-head", *headless,
                "Import weights without an MLM head (a BertModel's) for fine-tuning: the head starts from BERT's "
                "random init");
  cmd->callback([&run, dir, out, overwrite, headless] {
    run = [dir, out, overwrite, headless] {
      check_output_file("--out", *out);  // the checkpoint, with vocab.txt beside it
      if (!*overwrite) refuse_replacing(*dir, *out);
      const ImportSummary s = import_hf_bert(*dir, *out, *headless);
      std::cout << "wrote " << *out << " (method " << s.model.attention.method << ")\n";
      return 0;
    };
  });
}

}  // namespace rpe::cli

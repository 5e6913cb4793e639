// rpe-train export-hf RUN_OR_CHECKPOINT --out DIR: writes a transformers BertForMaskedLM folder
// (config.json, model.safetensors, vocab.txt, tokenizer_config.json) for the methods HF
// BERT can express (those whose registry entry names an HF position_embedding_type, see
// `rpe-train methods`; relative ones with one table shared by the heads, a clipped table
// padded with its edge rows).
// Anything else is refused with the reason. A fine-tuned model folder (seed<N>/model)
// becomes BertForQuestionAnswering or BertForSequenceClassification (finetune/export_hf.h).
// The folder is written whole and swapped in (interop/hf_folder.h), so an existing --out, whose
// every file goes, is replaced only with --overwrite.
#include <filesystem>
#include <iostream>
#include <vector>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "finetune/export_hf.h"
#include "interop/hf_bert.h"
#include "train/run_dir.h"
#include "util/errors.h"
#include "util/file_tree.h"

namespace rpe::cli {
namespace fs = std::filesystem;

namespace {

// --out with content is replaced as a whole: only with --overwrite, only an HF folder (a
// mistyped --out of a home or run folder is not deleted), never one holding what is exported.
void check_replace(const fs::path& out, bool overwrite, const std::vector<fs::path>& inputs) {
  if (!overwrite) return refuse_existing_output("--out", out);
  std::error_code ec;
  if (!fs::exists(out, ec) || fs::is_empty(out, ec)) return;
  if (path_inside(fs::current_path(ec), out))
    throw UserError("--out " + out.string() + ": holds the working directory; refusing to replace it");
  for (const auto& input : inputs)
    if (!input.empty() && path_inside(input, out))
      throw UserError("--out " + out.string() + ": holds " + input.string() + ", which is being exported; write "
                      "the export elsewhere");
  if (!fs::exists(out / "config.json", ec))
    throw UserError("--out " + out.string() + ": not a Hugging Face folder (no config.json); refusing to replace it");
}

// What a folder that is neither a run nor a kept model is likely to be, for the error message.
CheckpointSource resolve_with_hint(const std::string& what) {
  const fs::path dir = folder_path(what);
  std::error_code ec;
  if (fs::is_directory(dir, ec) && finetune::is_saved_model_dir(dir / "model"))
    throw UserError(what + ": a fine-tuning seed folder; its model is " + (dir / "model").string() + " (pass that)");
  if (fs::is_regular_file(dir / "config.json", ec) && fs::exists(dir / "model.safetensors", ec) &&
      !fs::exists(dir / "checkpoints", ec))
    throw UserError(what + ": a Hugging Face folder, not an rpe-train checkpoint (convert it with import-hf)");
  return resolve_checkpoint(what);
}

}  // namespace

void add_export_hf(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("export-hf", "Write an rpe-train checkpoint as a Hugging Face BERT folder");
  auto checkpoint = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto vocab = std::make_shared<std::string>();
  auto overwrite = std::make_shared<bool>(false);
  cmd->add_option("CHECKPOINT", *checkpoint,
                  "rpe-train checkpoint (.pt), run folder (its newest checkpoint) or fine-tuned model folder (seed<N>/model)")
      ->required();
  cmd->add_option("--out", *out, "Output folder")->required();
  cmd->add_option("--vocab", *vocab, "vocab.txt to write (default: the checkpoint's wordpiece vocabulary)");
  cmd->add_flag("--overwrite", *overwrite, "Replace an existing --out (every file in it)");
  cmd->callback([&run, checkpoint, out, vocab, overwrite] {
    run = [checkpoint, out, vocab, overwrite] {
      if (finetune::is_saved_model_dir(*checkpoint)) {  // a fine-tuned model: QA or classification head
        if (!vocab->empty()) throw UserError("--vocab: a fine-tuned model folder exports the tokenizer it carries");
        check_output_folder("--out", *out);
        check_replace(*out, *overwrite, {*checkpoint});
        finetune::export_hf_finetuned(*checkpoint, *out);
        std::cout << "wrote " << *out << "/{config.json, model.safetensors, vocab.txt, tokenizer_config.json}\n";
        return 0;
      }
      const CheckpointSource source = resolve_with_hint(*checkpoint);
      check_output_folder("--out", *out);
      check_replace(*out, *overwrite, {source.checkpoint, *vocab});
      export_hf_bert(source.checkpoint, *out, *vocab);
      std::cout << "wrote " << *out << "/{config.json, model.safetensors, vocab.txt, tokenizer_config.json}\n";
      return 0;
    };
  });
}

}  // namespace rpe::cli

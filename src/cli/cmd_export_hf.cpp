// rpe-train export-hf RUN_OR_CHECKPOINT --out DIR: writes a transformers BertForMaskedLM folder
// (config.json, model.safetensors, vocab.txt, tokenizer_config.json) for the methods HF
// BERT can express: absolute, shaw keys-only and m4 with one unclipped table shared by the
// heads. Anything else is refused with the reason.
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "interop/hf_bert.h"
#include "train/run_dir.h"
#include "util/errors.h"

namespace rpe::cli {

void add_export_hf(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("export-hf", "Write an rpe-train checkpoint as a Hugging Face BERT folder");
  auto checkpoint = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto vocab = std::make_shared<std::string>();
  cmd->add_option("CHECKPOINT", *checkpoint, "rpe-train checkpoint (.pt) or run folder (its newest checkpoint)")
      ->required();
  cmd->add_option("--out", *out, "Output folder")->required();
  cmd->add_option("--vocab", *vocab, "vocab.txt to write (default: the checkpoint's wordpiece vocabulary)");
  cmd->callback([&run, checkpoint, out, vocab] {
    run = [checkpoint, out, vocab] {
      namespace fs = std::filesystem;
      const CheckpointSource source = resolve_checkpoint(*checkpoint);
      check_output_folder("--out", *out);
      export_hf_bert(source.checkpoint, *out, *vocab);
      std::cout << "wrote " << *out << "/{config.json, model.safetensors, vocab.txt}\n";
      return 0;
    };
  });
}

}  // namespace rpe::cli

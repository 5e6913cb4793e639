// rpe-train import-hf DIR --out CHECKPOINT: a Hugging Face BERT folder (config.json,
// model.safetensors, vocab.txt, tokenizer_config.json) -> an rpe-train checkpoint with its
// config embedded and vocab.txt copied beside it (mapping in interop/hf_bert.h).
#include <iostream>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "interop/hf_bert.h"

namespace rpe::cli {

void add_import_hf(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("import-hf", "Convert a Hugging Face BERT folder into an rpe-train checkpoint");
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("DIR", *dir, "Folder with config.json, model.safetensors, vocab.txt")->required();
  cmd->add_option("--out", *out, "Checkpoint file to write (vocab.txt goes next to it)")->required();
  cmd->callback([&run, dir, out] {
    run = [dir, out] {
      check_output_file("--out", *out);  // the checkpoint, with vocab.txt beside it
      const ImportSummary s = import_hf_bert(*dir, *out);
      std::cout << "wrote " << *out << " (method " << s.model.attention.method << ")\n";
      return 0;
    };
  });
}

}  // namespace rpe::cli

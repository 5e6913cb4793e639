// rpe-train export-hf RUN_OR_CHECKPOINT --out DIR: writes a transformers BertForMaskedLM folder
// (config.json, model.safetensors, vocab.txt, tokenizer_config.json) for the methods HF
// BERT can express (those whose registry entry names an HF position_embedding_type, see
// `rpe-train methods`; relative ones with one unclipped table shared by the heads).
// Anything else is refused with the reason. A fine-tuned model folder (seed<N>/model)
// becomes BertForQuestionAnswering or BertForSequenceClassification (finetune/export_hf.h).
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "finetune/export_hf.h"
#include "interop/hf_bert.h"
#include "train/run_dir.h"
#include "util/errors.h"

namespace rpe::cli {

void add_export_hf(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("export-hf", "Write an rpe-train checkpoint as a Hugging Face BERT folder");
  auto checkpoint = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto vocab = std::make_shared<std::string>();
  cmd->add_option("CHECKPOINT", *checkpoint,
                  "rpe-train checkpoint (.pt), run folder (its newest checkpoint) or fine-tuned model folder (seed<N>/model)")
      ->required();
  cmd->add_option("--out", *out, "Output folder")->required();
  cmd->add_option("--vocab", *vocab, "vocab.txt to write (default: the checkpoint's wordpiece vocabulary)");
  cmd->callback([&run, checkpoint, out, vocab] {
    run = [checkpoint, out, vocab] {
      namespace fs = std::filesystem;
      if (finetune::is_saved_model_dir(*checkpoint)) {  // a fine-tuned model: QA or classification head
        if (!vocab->empty()) throw UserError("--vocab: a fine-tuned model folder exports the tokenizer it carries");
        check_output_folder("--out", *out);
        finetune::export_hf_finetuned(*checkpoint, *out);
        std::cout << "wrote " << *out << "/{config.json, model.safetensors, vocab.txt}\n";
        return 0;
      }
      const CheckpointSource source = resolve_checkpoint(*checkpoint);
      check_output_folder("--out", *out);
      export_hf_bert(source.checkpoint, *out, *vocab);
      std::cout << "wrote " << *out << "/{config.json, model.safetensors, vocab.txt}\n";
      return 0;
    };
  });
}

}  // namespace rpe::cli

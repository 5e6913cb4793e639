// export-hf of a kept fine-tuned model (saved_model.h) as a Hugging Face transformers folder:
//   SQuAD -> BertForQuestionAnswering       (bert.* without a pooler, qa_outputs [2, D])
//   GLUE  -> BertForSequenceClassification  (bert.* with bert.pooler.dense, classifier [C, D];
//            id2label/label2id from the task's labels, problem_type regression for STS-B)
// The encoder maps as in interop/hf_bert.h (the methods with an HF type in `rpe-train methods`);
// the MLM head that the encoder carries from pretraining is not part of these models and is left out. Other methods are refused with the reason.
#pragma once
#include <filesystem>

namespace rpe::finetune {

// Writes OUT/{config.json, model.safetensors, vocab.txt, tokenizer_config.json}.
void export_hf_finetuned(const std::filesystem::path& model_dir, const std::filesystem::path& out_dir);

// True when `dir` is a kept fine-tuned model folder (has task.json), not a pretraining run.
bool is_saved_model_dir(const std::filesystem::path& dir);

}  // namespace rpe::finetune

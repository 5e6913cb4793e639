// The files of an exported Hugging Face BERT folder besides the tensor mapping (hf_bert.h):
// vocab.txt and tokenizer_config.json, checked against the model, and the folder written as a
// whole. Shared by export-hf of pretraining checkpoints and of fine-tuned models.
#pragma once
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace rpe {

struct HfVocab {
  std::string text;               // vocab.txt: line i is token id i
  nlohmann::json special_tokens;  // {"unk_token": piece, ...}: the pieces at the special ids
};

// The vocabulary to export for a model of config `cfg` loaded from `checkpoint`:
//   `vocab` when given. It must fit the model (no more lines than model.vocab_size) and hold
//     [PAD], [UNK], [CLS], [SEP] and [MASK] at the ids the model was trained with (those of its
//     own vocabulary when that is found; a SentencePiece run's are always 0-4). Fewer lines are
//     accepted, as transformers and import-hf accept them: the rows past the end are embeddings
//     no tokenizer produces (a SentencePiece run's model.vocab_size is an upper bound).
//   else the config's wordpiece vocab.txt (as named, or beside `checkpoint`), no longer than
//     model.vocab_size;
//   else its SentencePiece pieces in id order (with a warning: BertTokenizer will not segment
//     text the same way). special_tokens then names <unk>, so transformers' tokenizers load it
//     and map unknown words to the model's unk id.
// UserError naming the file for each refusal.
HfVocab hf_vocab(const Config& cfg, const std::filesystem::path& checkpoint, const std::filesystem::path& vocab = {});

// Writes OUT/{model.safetensors, config.json, vocab.txt, tokenizer_config.json} all or nothing:
// into a staging folder beside `out_dir`, swapped in place of it once complete (replace_folder),
// so a failed export changes nothing and no file of an earlier folder is left beside the new
// ones. `cfg` gives the tokenizer's lower-casing and model_max_length (model.max_position).
void write_hf_folder(const std::filesystem::path& out_dir, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                     const nlohmann::json& config, const HfVocab& vocab, const Config& cfg);

}  // namespace rpe

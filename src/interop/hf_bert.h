// Hugging Face BERT <-> rpe-train: config.json mapping, tensor-name mapping and the
// import-hf / export-hf conversions.
//
// position_embedding_type   ours
//   absolute                absolute            (position_embeddings [n, D] = position.absolute)
//   relative_key            shaw, keys only     (distance_embedding [2n-1, d] per layer, shared by heads)
//   relative_key_query      m4                  (same table, also dotted with the keys)
// HF indexes its distance table by i - j + n - 1 (query i, key j); ours by clip(j - i, k) + k
// (relative_index). Unclipped (k = n - 1) our row s is HF's row 2k - s: the table is flipped;
// a clipped table (k < n - 1) exports exactly by repeating its edge rows out to +-(n - 1).
#pragma once
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"

namespace rpe {

// One of our parameters and its HF counterpart. relative_table: ours [1, 2k+1, d] is HF's
// [2n-1, d] (n = hf_max_position) with the rows reversed, edge rows repeated when k < n - 1.
struct HfTensorLink {
  std::string ours;  // e.g. "layers.0.attention.query.weight"
  std::string hf;    // e.g. "bert.encoder.layer.0.attention.self.query.weight"
  bool relative_table = false;
  int64_t hf_max_position = 0;  // n, for relative tables
};

// Model options from a parsed config.json (`where` names the file in errors). Refuses,
// with the reason, anything our BERT cannot express (model_type, activation, decoder, ...).
ModelOptions model_options_from_hf(const nlohmann::json& config, const std::string& where);

// Empty when `options` can be written as HF BERT, else the reason it cannot.
std::string hf_export_blocker(const ModelOptions& options);

// config.json of a BertForMaskedLM equivalent to `options` (hf_export_blocker must be empty).
nlohmann::json hf_config_from(const ModelOptions& options);

// The parameter links for `options` (HF names with the "bert." / "cls." prefixes of
// BertForMaskedLM). The MLM decoder weight is tied to the word embeddings and not listed.
std::vector<HfTensorLink> hf_tensor_links(const ModelOptions& options);

// Our tensor -> HF layout and back (identity unless link.relative_table).
torch::Tensor to_hf_layout(const torch::Tensor& ours, const HfTensorLink& link);
torch::Tensor from_hf_layout(const torch::Tensor& hf, const HfTensorLink& link);

struct ImportSummary {
  ModelOptions model;
  std::vector<std::string> ignored;  // HF tensors with no counterpart here (pooler, NSP head)
  bool lowercase = true;
  bool untied_decoder = false;  // config.json's tie_word_embeddings is false
};

// import-hf: reads DIR/{config.json, model.safetensors, vocab.txt, tokenizer_config.json}
// and writes `out_checkpoint` (config embedded: data.tokenizer wordpiece) plus vocab.txt
// next to it. Every problem is a one-line UserError naming the file and tensor. Weights without
// an MLM head (a BertModel's) are refused unless `allow_missing_mlm_head`: the head then starts
// from BERT's random init, which fine-tuning never reads but MLM evaluation and export-hf would.
ImportSummary import_hf_bert(const std::filesystem::path& dir, const std::filesystem::path& out_checkpoint,
                             bool allow_missing_mlm_head = false);

// export-hf: writes OUT/{config.json, model.safetensors, vocab.txt, tokenizer_config.json} as a
// whole, replacing what OUT held (write_hf_folder). The vocabulary is `vocab` when given, else
// the checkpoint's own, checked against the model (hf_vocab in hf_folder.h).
void export_hf_bert(const std::filesystem::path& checkpoint, const std::filesystem::path& out_dir,
                    const std::filesystem::path& vocab = {});

}  // namespace rpe

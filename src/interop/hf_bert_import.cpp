// Hugging Face BERT import: a transformers folder (config.json, model.safetensors, vocab.txt)
// becomes an rpe-train model file through the mapping in hf_bert.cpp.
// Checked against transformers 4.x BertForMaskedLM by tests/interop/hf_parity.py.
#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "config/config.h"
#include "data/wordpiece_tokenizer.h"
#include "interop/hf_bert.h"
#include "interop/model_file.h"
#include "interop/safetensors.h"
#include "model/attention/registry.h"
#include "model/bert.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/input_file.h"
#include "util/json_text.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// config.json / tokenizer_config.json: a few KB, a JSON object. A large or deeply nested
// file is refused before nlohmann builds it in memory.
json read_json_object(const fs::path& file) {
  std::error_code ec;
  if (!input_exists(file)) throw UserError(file.string() + ": file not found");
  if (fs::is_directory(file, ec)) throw UserError(file.string() + ": is a folder, not a JSON file");
  constexpr uintmax_t kMaxBytes = uintmax_t{16} << 20;
  if (const auto size = fs::file_size(file, ec); !ec && size > kMaxBytes)
    throw UserError(file.string() + ": " + std::to_string(size) + " bytes is implausibly large for a config file");
  const json j = parse_json_text(read_file(file), file.string(), 16);
  if (!j.is_object()) throw UserError(file.string() + ": expected a JSON object");
  return j;
}

std::string shape_str(const torch::Tensor& t) { return c10::str(t.sizes()); }

// Legacy TF-converted checkpoints name LayerNorm parameters gamma/beta.
std::string normalise_hf_name(std::string name) {
  auto replace_suffix = [&](const std::string& from, const std::string& to) {
    if (name.size() >= from.size() && name.compare(name.size() - from.size(), from.size(), from) == 0)
      name = name.substr(0, name.size() - from.size()) + to;
  };
  replace_suffix("LayerNorm.gamma", "LayerNorm.weight");
  replace_suffix("LayerNorm.beta", "LayerNorm.bias");
  return name;
}

size_t count_lines(const fs::path& file) {
  require_regular_file(file);  // the open below would block on a FIFO
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// One text-normalisation setting of BertTokenizer as the folder states it: `key` of `obj`, a
// boolean (or null where `nullable`: "follow do_lower_case"); nullopt when absent or null.
std::optional<bool> bool_setting(const json& obj, const std::string& key, const fs::path& file, bool nullable) {
  if (!obj.contains(key) || (nullable && obj[key].is_null())) return std::nullopt;
  if (!obj[key].is_boolean())
    throw UserError(file.string() + ": " + key + ": expected true or false" + (nullable ? " or null" : ""));
  return obj[key].get<bool>();
}

// Whether the folder's tokenizer lower-cases, as transformers 4.x loads it: BertTokenizer and
// BertTokenizerFast take tokenizer_config.json's do_lower_case / strip_accents /
// tokenize_chinese_chars (defaults true / null = follow lower-casing / true), and the fast one
// rebuilds tokenizer.json's normalizer when it says otherwise. So tokenizer.json only gets a
// warning where it disagrees. rpe-train's BERT tokenizer strips accents exactly when it
// lower-cases and always splits CJK characters apart: a folder asking otherwise is refused,
// since importing it would tokenize text differently, silently.
bool hf_lowercase(const fs::path& dir) {
  const fs::path config_file = dir / "tokenizer_config.json", fast_file = dir / "tokenizer.json";
  std::optional<bool> lower, strip, chinese;
  if (fs::exists(config_file)) {
    const json t = read_json_object(config_file);
    lower = bool_setting(t, "do_lower_case", config_file, false);
    strip = bool_setting(t, "strip_accents", config_file, true);
    chinese = bool_setting(t, "tokenize_chinese_chars", config_file, false);
  }
  if (!lower)
    log::warn("import", "{} does not give do_lower_case: lower-casing, as transformers' BertTokenizer does by default",
              config_file.string());
  const bool lowercase = lower.value_or(true);
  if (fs::exists(fast_file)) {
    const json t = read_json_object(fast_file);
    const json normalizer = t.contains("normalizer") ? t["normalizer"] : json();
    if (normalizer.is_object() && normalizer.contains("lowercase") && normalizer["lowercase"].is_boolean() &&
        normalizer["lowercase"].get<bool>() != lowercase)
      log::warn("import", "{}: its normalizer says lowercase {}, but transformers' BERT tokenizers follow {} "
                "(do_lower_case {}), and so does this import", fast_file.string(), !lowercase,
                config_file.filename().string(), lowercase);
  }
  if (strip && *strip != lowercase)
    throw UserError(config_file.string() + ": strip_accents " + (*strip ? "true" : "false") + " with do_lower_case " +
                    (lowercase ? "true" : "false") + " is not supported (rpe-train's BERT tokenizer strips accents "
                    "exactly when it lower-cases)");
  if (chinese && !*chinese)
    throw UserError(config_file.string() + ": tokenize_chinese_chars false is not supported (rpe-train's BERT "
                                           "tokenizer always splits CJK characters apart)");
  return lowercase;
}

// The folder's files besides the weights: config.json's model, vocab.txt's size against it,
// the tokenizer's lower-casing (hf_lowercase); and that model.safetensors is there.
ImportSummary read_hf_folder(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw UserError(dir.string() + ": not a directory (expected a Hugging Face BERT folder)");
  const fs::path weights = dir / "model.safetensors", vocab = dir / "vocab.txt";
  const json hf_config = read_json_object(dir / "config.json");
  ImportSummary summary;
  summary.model = model_options_from_hf(hf_config, (dir / "config.json").string());
  summary.untied_decoder = hf_config.contains("tie_word_embeddings") && hf_config["tie_word_embeddings"] == false;
  if (!fs::exists(weights) && fs::exists(dir / "model.safetensors.index.json"))
    throw UserError(weights.string() + ": file not found, the weights are sharded (model.safetensors.index.json): "
                                       "save them as one file with save_pretrained(..., max_shard_size=\"100GB\")");
  if (!fs::exists(weights))
    throw UserError(weights.string() + ": file not found (only safetensors weights are read; convert a "
                                       "pytorch_model.bin with save_pretrained(..., safe_serialization=True))");
  if (!fs::exists(vocab)) throw UserError(vocab.string() + ": file not found (a WordPiece vocabulary is required)");
  if (fs::is_directory(vocab)) throw UserError(vocab.string() + ": is a folder, not a WordPiece vocabulary");
  const size_t vocab_lines = count_lines(vocab);
  if (vocab_lines == 0) throw UserError(vocab.string() + ": empty (a WordPiece vocabulary has a piece per line)");
  if (static_cast<int64_t>(vocab_lines) > summary.model.vocab_size)
    throw UserError(vocab.string() + ": " + std::to_string(vocab_lines) + " entries but config.json vocab_size is " +
                    std::to_string(summary.model.vocab_size));
  summary.lowercase = hf_lowercase(dir);
  // Every command after the import reads vocab.txt as a WordPiece vocabulary: one it cannot
  // (an export of a SentencePiece run lists its pieces, with <unk> for [UNK]) is refused now,
  // not by the first finetune or inspect of the checkpoint written.
  try {
    WordPieceTokenizer check(vocab, summary.lowercase);
  } catch (const UserError& e) {
    throw UserError(std::string(e.what()) + "; import-hf reads BERT WordPiece folders only (a SentencePiece run's "
                    "export is none: use that run's own checkpoint)");
  }
  return summary;
}

// A parameter must be stored as floating point (an integer one is no trained weight: converting
// it would import arbitrary numbers) and be finite (a NaN would surface only as NaN logits later;
// training never writes such a checkpoint either).
void check_weight_values(const torch::Tensor& t, const std::string& key, const fs::path& weights) {
  if (!t.is_floating_point())
    throw UserError(weights.string() + ": tensor '" + key + "' has dtype " + safetensors_dtype_name(t.scalar_type()) +
                    ", expected a floating-point weight");
  if (!torch::isfinite(t).all().item<bool>())
    throw UserError(weights.string() + ": tensor '" + key + "' holds NaN or infinite values");
}

// Copies the file's tensors (names normalised) into `params` along hf_tensor_links; every
// other tensor must be the tied decoder or one knowingly unused (listed in summary.ignored).
void copy_hf_tensors(const std::map<std::string, torch::Tensor>& hf, const fs::path& weights, const Config& cfg,
                     torch::OrderedDict<std::string, torch::Tensor>& params, ImportSummary& summary,
                     bool allow_missing_mlm_head) {
  // BertModel checkpoints have no "bert." prefix; BertForMaskedLM / BertForPreTraining do.
  bool prefixed = false;
  for (const auto& [name, t] : hf) prefixed = prefixed || name.rfind("bert.", 0) == 0;
  auto hf_key = [&](const std::string& name) {
    return (!prefixed && name.rfind("bert.", 0) == 0) ? name.substr(5) : name;
  };
  std::set<std::string> used;
  bool has_mlm_head = hf.count("cls.predictions.transform.dense.weight") > 0;
  if (!has_mlm_head && !allow_missing_mlm_head)
    throw UserError(weights.string() + ": no MLM head (cls.predictions.*; a BertModel's weights): pass "
                                       "--allow-missing-mlm-head to start one from BERT's random init (fine-tuning "
                                       "does not use it; MLM evaluation and export-hf would)");
  if (!has_mlm_head) log::warn("import", "{} has no MLM head (cls.predictions.*): it starts from BERT's random init", weights.string());
  // Untied and not stored, transformers itself starts that decoder random: no weights to import.
  if (has_mlm_head && summary.untied_decoder && !hf.count("cls.predictions.decoder.weight"))
    throw UserError(weights.string() + ": config.json says tie_word_embeddings false, but there is no "
                                       "cls.predictions.decoder.weight (rpe-train's MLM decoder is tied to the word "
                                       "embeddings; transformers would start this one random)");
  for (const auto& link : hf_tensor_links(cfg.model)) {
    const std::string key = hf_key(link.hf);
    if (link.hf.rfind("cls.", 0) == 0 && !has_mlm_head) continue;
    auto it = hf.find(key);
    if (it == hf.end() && link.hf == "cls.predictions.bias") it = hf.find("cls.predictions.decoder.bias");
    if (it == hf.end()) throw UserError(weights.string() + ": tensor '" + key + "' is missing");
    used.insert(it->first);
    torch::Tensor& target = params[link.ours];
    const auto expected = to_hf_layout(target, link);
    if (it->second.sizes() != expected.sizes())
      throw UserError(weights.string() + ": tensor '" + key + "' has shape " + shape_str(it->second) +
                      " but config.json implies " + shape_str(expected));
    check_weight_values(it->second, key, weights);
    target.copy_(from_hf_layout(it->second.to(torch::kFloat32), link));
  }

  // Tensors we knowingly do not use; anything else is an error rather than a silent drop.
  auto known_unused = [&](const std::string& n) {
    return n.rfind("bert.pooler.", 0) == 0 || n.rfind("pooler.", 0) == 0 || n.rfind("cls.seq_relationship.", 0) == 0 ||
           n == hf_key("bert.embeddings.position_ids") || n == "cls.predictions.decoder.bias" ||
           (n == hf_key("bert.embeddings.position_embeddings.weight") &&
            !method_info(cfg.model.attention.method).learned_absolute);
  };
  for (const auto& [name, t] : hf) {
    if (used.count(name)) continue;
    if (name == "cls.predictions.decoder.weight") {  // tied to the word embeddings: must be equal
      if (!t.to(torch::kFloat32).equal(params["word_embeddings.weight"]))
        throw UserError(weights.string() + ": cls.predictions.decoder.weight differs from the word embeddings "
                                           "(untied MLM decoders are not supported)");
      continue;
    }
    if (name == "cls.predictions.decoder.bias" && used.count("cls.predictions.bias")) {  // tied to that bias too
      if (!t.to(torch::kFloat32).equal(params["mlm_bias"]))
        throw UserError(weights.string() + ": cls.predictions.decoder.bias differs from cls.predictions.bias "
                                           "(an untied MLM decoder bias is not supported)");
      continue;
    }
    if (!known_unused(name))
      throw UserError(weights.string() + ": unexpected tensor '" + name + "' " + shape_str(t) +
                      " (no counterpart in a " + cfg.model.attention.method + " BERT)");
    summary.ignored.push_back(name);
  }
}

}  // namespace

ImportSummary import_hf_bert(const fs::path& dir, const fs::path& out_checkpoint, bool allow_missing_mlm_head) {
  ImportSummary summary = read_hf_folder(dir);
  const fs::path weights = dir / "model.safetensors", vocab = dir / "vocab.txt";
  Config cfg;
  cfg.model = summary.model;
  cfg.data.train_files = {"(none: imported from Hugging Face " + dir.filename().string() + ")"};
  cfg.data.tokenizer = "wordpiece";
  // Absolute: the checkpoint is read from other folders (finetune --init, export-hf), where a
  // relative path would name another file or none.
  const fs::path vocab_out = fs::absolute(out_checkpoint).lexically_normal().parent_path() / "vocab.txt";
  cfg.data.tokenizer_model = vocab_out.string();
  cfg.data.lowercase = summary.lowercase;
  cfg.data.max_seq_len = std::min<int64_t>(cfg.data.max_seq_len, cfg.model.max_position);
  cfg.run.name = "hf_import";
  try {
    validate(cfg);
  } catch (const UserError& e) {  // the rule config.json's values broke, named as the file
    throw UserError((dir / "config.json").string() + ": " + e.what());
  }

  SafetensorsFile st = read_safetensors(weights);
  std::map<std::string, torch::Tensor> hf;
  for (auto& [name, t] : st.tensors) hf[normalise_hf_name(name)] = t;
  torch::manual_seed(cfg.train.seed);  // tensors absent from the file (an MLM head) start as BERT's init
  BertModel model(cfg.model);
  auto params = model->named_parameters();
  torch::NoGradGuard no_grad;
  copy_hf_tensors(hf, weights, cfg, params, summary, allow_missing_mlm_head);

  save_model_file(out_checkpoint, *model, to_yaml(cfg));
  write_file_atomic(vocab_out, read_file(vocab));  // errors name the file (errno), no filesystem_error
  log::info("import", "{} -> {}: {} (hidden {}, layers {}, heads {}, vocab {}), ignored: {}", dir.string(),
            out_checkpoint.string(), cfg.model.attention.method, cfg.model.hidden, cfg.model.layers, cfg.model.heads,
            cfg.model.vocab_size, summary.ignored.empty() ? std::string("none") : join(summary.ignored));
  return summary;
}

}  // namespace rpe

// Hugging Face BERT: config and tensor-name mapping, and export (mapping summary and the
// distance-table flip in hf_bert.h); import is in hf_bert_import.cpp.
// Checked against transformers 4.x BertForMaskedLM by tests/interop/hf_parity.py.
#include "interop/hf_bert.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "config/model_size.h"
#include "interop/hf_folder.h"
#include "interop/model_file.h"
#include "model/attention/registry.h"
#include "model/bert.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Sizes and rates read from config.json: each bad one fails here, naming the key, not later
// in LibTorch's allocator or as a NaN loss.
void check_hf_values(const ModelOptions& m, const std::string& where) {
  auto fail = [&](const std::string& key, const std::string& msg) -> void {
    throw UserError(where + ": " + key + ": " + msg);
  };
  for (const auto& [key, v] : {std::pair{"vocab_size", m.vocab_size}, std::pair{"hidden_size", m.hidden},
                               std::pair{"num_hidden_layers", m.layers}, std::pair{"num_attention_heads", m.heads},
                               std::pair{"intermediate_size", m.ffn}, std::pair{"max_position_embeddings", m.max_position},
                               std::pair{"type_vocab_size", m.type_vocab_size}})
    if (v <= 0) fail(key, "must be positive, got " + std::to_string(v));
  if (m.max_position < 8) fail("max_position_embeddings", "must be at least 8 (the shortest sequence rpe-train runs)");
  if (m.hidden % m.heads != 0) fail("num_attention_heads", "does not divide hidden_size");
  const std::pair<const char*, std::pair<int64_t, int64_t>> limits[] = {
      {"vocab_size", {m.vocab_size, int64_t{1} << 24}},
      {"hidden_size", {m.hidden, int64_t{1} << 16}},
      {"num_hidden_layers", {m.layers, 1024}},
      {"intermediate_size", {m.ffn, int64_t{1} << 20}},
      {"max_position_embeddings", {m.max_position, int64_t{1} << 20}},
      {"type_vocab_size", {m.type_vocab_size, int64_t{1} << 16}}};
  for (const auto& [key, value_limit] : limits)
    if (value_limit.first > value_limit.second)
      fail(key, "is implausibly large (" + std::to_string(value_limit.first) + " > " +
                    std::to_string(value_limit.second) + ")");
  for (const auto& [key, v] : {std::pair{"layer_norm_eps", m.layer_norm_eps}, std::pair{"initializer_range", m.init_std}})
    if (!(std::isfinite(v) && v > 0.0)) fail(key, "must be a finite number > 0");
  for (const auto& [key, v] : {std::pair{"hidden_dropout_prob", m.dropout},
                               std::pair{"attention_probs_dropout_prob", m.attention_dropout}})
    if (!(v >= 0.0 && v <= 1.0)) fail(key, "must be in [0, 1]");
}

}  // namespace

ModelOptions model_options_from_hf(const json& c, const std::string& where) {
  auto fail = [&](const std::string& key, const std::string& msg) -> void {
    throw UserError(where + ": " + key + ": " + msg);
  };
  if (!c.is_object()) fail("(top level)", "expected a JSON object");
  // Missing keys take transformers' BertConfig defaults, as transformers itself does.
  auto get_int = [&](const char* key, int64_t fallback) -> int64_t {
    if (!c.contains(key)) return fallback;
    if (!c[key].is_number_integer()) fail(key, "expected an integer");
    return c[key].get<int64_t>();
  };
  auto get_num = [&](const char* key, double fallback) -> double {
    if (!c.contains(key) || c[key].is_null()) return fallback;
    if (!c[key].is_number()) fail(key, "expected a number");
    return c[key].get<double>();
  };
  auto get_str = [&](const char* key, const std::string& fallback) -> std::string {
    if (!c.contains(key) || c[key].is_null()) return fallback;
    if (!c[key].is_string()) fail(key, "expected a string");
    return c[key].get<std::string>();
  };

  const std::string model_type = get_str("model_type", "");
  if (model_type != "bert") fail("model_type", "unsupported model_type '" + model_type + "' (only bert can be imported)");
  const std::string act = get_str("hidden_act", "gelu");
  if (act != "gelu") fail("hidden_act", "'" + act + "' is not supported (rpe-train's BERT uses erf GELU, 'gelu')");
  for (const char* key : {"is_decoder", "add_cross_attention"})
    if (c.contains(key) && !(c[key].is_boolean() && !c[key].get<bool>()))
      fail(key, "decoder BERT models are not supported");

  ModelOptions m;
  m.vocab_size = get_int("vocab_size", 30522);
  m.hidden = get_int("hidden_size", 768);
  m.layers = get_int("num_hidden_layers", 12);
  m.heads = get_int("num_attention_heads", 12);
  m.ffn = get_int("intermediate_size", 3072);
  m.max_position = get_int("max_position_embeddings", 512);
  m.type_vocab_size = get_int("type_vocab_size", 2);
  m.dropout = get_num("hidden_dropout_prob", 0.1);
  m.attention_dropout = get_num("attention_probs_dropout_prob", 0.1);
  m.layer_norm_eps = get_num("layer_norm_eps", 1e-12);
  m.init_std = get_num("initializer_range", 0.02);
  m.pre_ln = false;
  check_hf_values(m, where);

  // Missing means absolute (BertConfig's default); an explicit null is HF's "no positions at
  // all", which no method here computes.
  if (c.contains("position_embedding_type") && c["position_embedding_type"].is_null())
    fail("position_embedding_type", "null (no position information) is not supported");
  const std::string pet = get_str("position_embedding_type", "absolute");
  auto& a = m.attention;
  a.max_relative = 0;  // = max_position - 1: HF's distance table is unclipped
  std::vector<std::string> valid;
  for (const MethodInfo& method : position_methods()) {
    if (method.hf_type.empty()) continue;
    valid.push_back(method.hf_type);
    if (method.hf_type != pet) continue;
    a.method = method.name;  // with its default options (shaw: keys only)
    a.share_across_heads = !method.hf_distance_table.empty();  // HF shares one distance table across heads
  }
  if (std::find(valid.begin(), valid.end(), pet) == valid.end())
    fail("position_embedding_type", "'" + pet + "' is not supported (valid: " + join(valid) + ")");
  const std::string memory = model_memory_problem(m, 0, "vocab_size/hidden_size/num_hidden_layers/intermediate_size");
  if (!memory.empty()) fail("hidden_size", memory);
  return m;
}

std::string hf_export_blocker(const ModelOptions& m) {
  const auto& a = m.attention;
  const MethodInfo& method = method_info(a.method);
  if (method.hf_type.empty()) {
    std::vector<std::string> exportable;
    for (const MethodInfo& e : position_methods())
      if (!e.hf_type.empty()) exportable.push_back(e.name);
    return "method '" + a.method + "' has no Hugging Face BERT equivalent (exportable: " + join(exportable) +
           "; relative ones with one table shared across heads)";
  }
  if (m.pre_ln) return "model.pre_ln is true but Hugging Face BERT is post-LayerNorm";
  if (method.hf_distance_table.empty()) return {};
  if (a.add_absolute)
    return "model.attention.add_absolute is true but HF relative_key/relative_key_query add no absolute embeddings";
  if (!a.share_across_heads)
    return "model.attention.share_across_heads is false but HF BERT shares one distance table across the heads";
  return method.hf_problem ? method.hf_problem(a) : std::string();
}

json hf_config_from(const ModelOptions& m) {
  const std::string pet = method_info(m.attention.method).hf_type;
  return json{{"architectures", json::array({"BertForMaskedLM"})},
              {"model_type", "bert"},
              {"attention_probs_dropout_prob", m.attention_dropout},
              {"classifier_dropout", nullptr},
              {"hidden_act", "gelu"},
              {"hidden_dropout_prob", m.dropout},
              {"hidden_size", m.hidden},
              {"initializer_range", m.init_std},
              {"intermediate_size", m.ffn},
              {"layer_norm_eps", m.layer_norm_eps},
              {"max_position_embeddings", m.max_position},
              {"num_attention_heads", m.heads},
              {"num_hidden_layers", m.layers},
              {"pad_token_id", 0},
              {"position_embedding_type", pet},
              {"torch_dtype", "float32"},
              {"type_vocab_size", m.type_vocab_size},
              {"use_cache", true},
              {"vocab_size", m.vocab_size}};
}

std::vector<HfTensorLink> hf_tensor_links(const ModelOptions& m) {
  std::vector<HfTensorLink> links;
  auto add = [&](const std::string& ours, const std::string& hf, bool rel = false) {
    links.push_back({ours, hf, rel, rel ? m.max_position : 0});
  };
  auto add_wb = [&](const std::string& ours, const std::string& hf) {
    add(ours + ".weight", hf + ".weight");
    add(ours + ".bias", hf + ".bias");
  };
  add("word_embeddings.weight", "bert.embeddings.word_embeddings.weight");
  const MethodInfo& method = method_info(m.attention.method);
  if (has_absolute_table(m)) add("position.absolute", "bert.embeddings.position_embeddings.weight");
  add("token_type_embeddings.weight", "bert.embeddings.token_type_embeddings.weight");
  add_wb("embeddings_norm", "bert.embeddings.LayerNorm");
  const std::string& table = method.hf_distance_table;
  for (int64_t i = 0; i < m.layers; ++i) {
    const std::string o = "layers." + std::to_string(i) + ".";
    const std::string h = "bert.encoder.layer." + std::to_string(i) + ".";
    for (const char* p : {"query", "key", "value"}) add_wb(o + "attention." + p, h + "attention.self." + p);
    if (!table.empty())
      add(o + "attention.position." + table, h + "attention.self.distance_embedding.weight", /*rel=*/true);
    add_wb(o + "attention.output", h + "attention.output.dense");
    add_wb(o + "attention_norm", h + "attention.output.LayerNorm");
    add_wb(o + "ffn_in", h + "intermediate.dense");
    add_wb(o + "ffn_out", h + "output.dense");
    add_wb(o + "ffn_norm", h + "output.LayerNorm");
  }
  add_wb("mlm_transform", "cls.predictions.transform.dense");
  add_wb("mlm_norm", "cls.predictions.transform.LayerNorm");
  add("mlm_bias", "cls.predictions.bias");
  return links;
}

torch::Tensor to_hf_layout(const torch::Tensor& ours, const HfTensorLink& link) {
  if (!link.relative_table) return ours;
  // ours [1, 2k+1, d], row s = distance j - i = s - k  ->  HF [2n-1, d], row r = i - j + n - 1,
  // i.e. distance j - i = n - 1 - r, read at clip(n - 1 - r, k) + k as our model reads it.
  const int64_t k = (ours.size(1) - 1) / 2, n = link.hf_max_position;
  const auto r = torch::arange(2 * n - 1, torch::TensorOptions(torch::kLong).device(ours.device()));
  return ours.squeeze(0).index_select(0, ((n - 1) - r).clamp(-k, k) + k).contiguous();
}

torch::Tensor from_hf_layout(const torch::Tensor& hf, const HfTensorLink& link) {
  if (!link.relative_table) return hf;
  return hf.flip(0).unsqueeze(0).contiguous();  // [2n-1, d] -> [1, 2n-1, d]
}

void export_hf_bert(const fs::path& checkpoint, const fs::path& out_dir, const fs::path& vocab) {
  LoadedModel loaded = load_model_file(checkpoint);
  const ModelOptions& m = loaded.config.model;
  const std::string blocker = hf_export_blocker(m);
  if (!blocker.empty()) throw UserError(checkpoint.string() + ": cannot export to Hugging Face BERT: " + blocker);
  const HfVocab hf_vocab_files = hf_vocab(loaded.config, checkpoint, vocab);  // first: a refusal writes nothing

  auto params = loaded.model->named_parameters();
  const auto links = hf_tensor_links(m);
  std::set<std::string> linked;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& link : links) {
    linked.insert(link.ours);
    tensors.emplace_back(link.hf, to_hf_layout(params[link.ours].detach(), link));
  }
  // Every parameter must have a home; a method-specific extra would otherwise vanish silently.
  for (const auto& p : params)
    if (!linked.count(p.key()))
      throw UserError(checkpoint.string() + ": cannot export to Hugging Face BERT: parameter '" + p.key() +
                      "' has no counterpart there");
  if (!method_info(m.attention.method).learned_absolute)  // HF builds this table for every type; relative ones ignore it
    tensors.emplace_back("bert.embeddings.position_embeddings.weight", torch::zeros({m.max_position, m.hidden}));
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

  write_hf_folder(out_dir, tensors, hf_config_from(m), hf_vocab_files, loaded.config);
  log::info("export", "{} -> {}: {} as position_embedding_type {}", checkpoint.string(), out_dir.string(),
            m.attention.method, hf_config_from(m)["position_embedding_type"].get<std::string>());
}

}  // namespace rpe

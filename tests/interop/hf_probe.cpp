// Test-only helper for tests/interop/hf_parity.py (not installed):
//   hf_probe methods                          registered position methods, one per line
//   hf_probe init METHOD OUT.pt [SEED [K]]    a small random model (every tensor random,
//                                            biases and LayerNorms included) + vocab.txt beside it;
//                                            K: model.attention.max_relative (default 0 = n - 1)
//   hf_probe init-sp METHOD OUT.pt CORPUS     the same, tokenized by a SentencePiece model trained
//                                            on CORPUS (OUT's folder/tokenizer.model, as in a run)
//   hf_probe logits CHECKPOINT ID,ID,...      MLM logits of one sequence as JSON {"logits": [[...]]}
//   hf_probe init-finetuned METHOD TASK OUT_DIR [SEED [no-token-types]]   a random kept fine-tuned model (squad_v1 or a
//                                            GLUE task), every tensor random (hf_probe_heads.cpp)
//   hf_probe head-logits MODEL_DIR ID,... TYPE,...       its head's logits as JSON {"logits": [...]}
//   hf_probe deberta-bias SEED L K [BUCKETS [P2C]]  a random DeBERTa layer's position bias (c2p +
//                                            p2c) for random q, k of length L at clipping distance
//                                            K (BUCKETS: log buckets ending at K; P2C: its
//                                            deberta_p2c), with its inputs and weights, as JSON
//                                            {name: {shape, data}}
// Exit 2 with a one-line message on bad input, like rpe-train.
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "data/sp_tokenizer.h"
#include "interop/model_file.h"
#include "model/attention/registry.h"
#include "model/bert.h"
#include "model/encoder.h"
#include "test_models.h"
#include "util/errors.h"

namespace fs = std::filesystem;
using namespace rpe;

namespace rpe::probe {
void randomize_all(torch::nn::Module& model);
int init_finetuned(const Config& cfg, const std::string& task, const fs::path& out_dir, int64_t seed);
int print_head_logits(const fs::path& model_dir, const std::string& ids_text, const std::string& types_text);
}  // namespace rpe::probe

namespace {

// The small config every probe model uses: 2 layers of width 32, vocabulary of 50 in `vocab`.
Config probe_config(const std::string& method, const fs::path& vocab) {
  Config cfg;
  cfg.model = test::small_model_options(method, {.hidden = 32, .heads = 4, .ffn = 64, .max_position = 24});
  cfg.model.attention.share_across_heads = method != "absolute";  // the layout HF BERT can express
  cfg.data.train_files = {"(none: random model)"};
  cfg.data.tokenizer = "wordpiece";
  cfg.data.tokenizer_model = vocab.string();
  validate(cfg);
  fs::create_directories(vocab.parent_path());
  std::ofstream v(vocab);
  const char* special[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int64_t i = 0; i < cfg.model.vocab_size; ++i) v << (i < 5 ? special[i] : "tok" + std::to_string(i)) << "\n";
  return cfg;
}

int init_model(const std::string& method, const fs::path& out, int64_t seed, int64_t max_relative) {
  Config cfg = probe_config(method, (out.has_parent_path() ? out.parent_path() : fs::path(".")) / "vocab.txt");
  cfg.model.attention.max_relative = max_relative;
  validate(cfg);
  torch::manual_seed(seed);
  BertModel model(cfg.model);
  probe::randomize_all(*model);
  save_model_file(out, *model, to_yaml(cfg));
  return 0;
}

int init_sentencepiece_model(const std::string& method, const fs::path& out, const fs::path& corpus) {
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  Config cfg = probe_config(method, dir / "vocab.txt");
  fs::remove(dir / "vocab.txt");  // a SentencePiece run has none
  cfg.data.tokenizer = "sentencepiece";
  cfg.data.tokenizer_model = (dir / "tokenizer.model").string();
  train_sentencepiece({corpus.string()}, "line", cfg.data.tokenizer_model, cfg.model.vocab_size, cfg.data.lowercase);
  torch::manual_seed(1);
  BertModel model(cfg.model);
  probe::randomize_all(*model);
  save_model_file(out, *model, to_yaml(cfg));
  return 0;
}

int print_logits(const fs::path& checkpoint, const std::string& ids_text) {
  LoadedModel loaded = load_model_file(checkpoint);
  std::vector<int64_t> ids;
  std::stringstream ss(ids_text);
  for (std::string item; std::getline(ss, item, ',');) ids.push_back(std::stoll(item));
  require(!ids.empty(), "no ids given");
  torch::NoGradGuard no_grad;
  auto t = torch::tensor(ids, torch::kLong).unsqueeze(0);                 // [1, L]
  auto hidden = loaded.model->encode(t, torch::zeros_like(t, torch::kBool));  // [1, L, D]
  auto logits = loaded.model->mlm_logits(hidden.squeeze(0)).to(torch::kDouble).contiguous();  // [L, V]
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t i = 0; i < logits.size(0); ++i) {
    auto row = logits[i];
    rows.push_back(std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel()));
  }
  std::cout << nlohmann::json{{"logits", rows}}.dump() << "\n";
  return 0;
}

// DeBERTa's score_bias of layer 0 in fp64, beside what made it (tests/interop/hf_deberta_parity.py).
int print_deberta_bias(int64_t seed, int64_t L, int64_t k, int64_t buckets, const std::string& p2c) {
  auto o = test::small_model_options("deberta", {.hidden = 32, .heads = 4, .ffn = 64, .max_position = 24});
  o.attention.max_relative = k;
  o.attention.position_buckets = buckets;
  o.attention.deberta_p2c = p2c;
  torch::manual_seed(seed);
  BertModel model(o);
  probe::randomize_all(*model);
  model->to(torch::kDouble);
  const torch::NoGradGuard no_grad;
  const int64_t H = o.heads, d = o.hidden / o.heads;
  auto q = torch::randn({1, H, L, d}, torch::kDouble), key = torch::randn({1, H, L, d}, torch::kDouble);
  auto bias = model->layers[0]->as<EncoderLayerImpl>()->attention->position->score_bias(q, key);  // [1, H, L, L]
  nlohmann::json out;
  auto put = [&](const std::string& name, const torch::Tensor& t) {
    auto c = t.contiguous();
    out[name] = {{"shape", c.sizes().vec()}, {"data", std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel())}};
  };
  put("q", q);
  put("k", key);
  put("bias", bias);
  for (const auto& p : model->named_parameters()) {
    const auto& name = p.key();
    if (name == "position.rel_embeddings" || name == "layers.0.attention.position.pos_key_proj" ||
        name == "layers.0.attention.position.pos_query_proj")
      put(name.substr(name.rfind('.') + 1), p.value());
  }
  require(out.size() == 6, "deberta-bias: the model's parameter names changed");
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 1 && a[0] == "methods") {
      for (const auto& n : attention_method_names()) std::cout << n << "\n";
      return 0;
    }
    if (a.size() >= 3 && a.size() <= 5 && a[0] == "init")
      return init_model(a[1], a[2], a.size() >= 4 ? std::stoll(a[3]) : 1, a.size() == 5 ? std::stoll(a[4]) : 0);
    if (a.size() == 4 && a[0] == "init-sp") return init_sentencepiece_model(a[1], a[2], a[3]);
    if (a.size() == 3 && a[0] == "logits") return print_logits(a[1], a[2]);
    if (a.size() >= 4 && a.size() <= 6 && a[0] == "init-finetuned") {
      const fs::path work = fs::path(a[3]).parent_path() / (fs::path(a[3]).filename().string() + ".src");
      Config cfg = probe_config(a[1], work / "vocab.txt");
      cfg.finetune.token_types = !(a.size() == 6 && a[5] == "no-token-types");  // finetune.token_types: false
      return probe::init_finetuned(cfg, a[2], a[3], a.size() >= 5 ? std::stoll(a[4]) : 1);
    }
    if (a.size() == 4 && a[0] == "head-logits") return probe::print_head_logits(a[1], a[2], a[3]);
    if (a.size() >= 4 && a.size() <= 6 && a[0] == "deberta-bias")
      return print_deberta_bias(std::stoll(a[1]), std::stoll(a[2]), std::stoll(a[3]), a.size() >= 5 ? std::stoll(a[4]) : 0,
                                a.size() == 6 ? a[5] : "paper");
    std::cerr << "usage: hf_probe methods | init METHOD OUT.pt [SEED [K]] | init-sp METHOD OUT.pt CORPUS | logits CHECKPOINT ID,ID,... | "
                 "init-finetuned METHOD TASK OUT_DIR [SEED [no-token-types]] | head-logits MODEL_DIR ID,... TYPE,... | "
                 "deberta-bias SEED L K [BUCKETS [P2C]]\n";
    return kExitUserError;
  } catch (const UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitUserError;
  }
}

// Hugging Face BERT mapping: the distance-table sign convention against a naive loop over
// transformers' equation, config mapping, export refusals, the import -> export round
// trip (byte-identical tensors) and bad input. Parity of logits with transformers itself
// is tests/interop/hf_parity.py (ctest hf_parity).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <set>

#include "interop/hf_bert.h"
#include "interop/model_file.h"
#include "interop/safetensors.h"
#include "model/attention/registry.h"
#include "model/bert.h"
#include "test_models.h"
#include "test_paths.h"
#include "model/encoder.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace fs = std::filesystem;
using namespace rpe;
using nlohmann::json;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path dir = rpe::test::process_temp_dir() / "hf_bert" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Config tiny_config(const std::string& method) {
  Config cfg;
  cfg.model = test::small_model_options(method, {.vocab = 40, .max_position = 12, .dropout = 0.0});
  cfg.model.attention.share_across_heads = method != "absolute";
  cfg.data.train_files = {"none"};
  cfg.data.tokenizer = "wordpiece";
  return cfg;
}

// A random model (every tensor random) saved as a checkpoint, plus a vocab file.
fs::path random_checkpoint(const Config& cfg, const fs::path& dir, int seed) {
  torch::manual_seed(seed);
  BertModel model(cfg.model);
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) p.value().normal_(0.0, 0.3);
  const fs::path ck = dir / "model.pt";
  save_model_file(ck, *model, to_yaml(cfg));
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";  // a BERT WordPiece vocabulary, as import-hf needs
  for (int i = 5; i < cfg.model.vocab_size; ++i) vocab.append("t").append(std::to_string(i)).append("\n");
  write_file_atomic(dir / "vocab.txt", vocab);
  return ck;
}

template <class F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

// transformers' BertSelfAttention (4.x), relative types, written as loops over heads and (i, j):
//   e_ij = (q_i . D[i - j + n - 1]  (+ k_j . D[i - j + n - 1] for relative_key_query)) / sqrt(d)
// D: HF's distance table [2n-1, d]; q, k: [1, H, L, d]. Returns [1, H, L, L].
torch::Tensor transformers_scores(const torch::Tensor& D, const torch::Tensor& q, const torch::Tensor& k, int64_t n,
                                  bool key_query) {
  const int64_t H = q.size(1), L = q.size(2), d = q.size(3);
  auto expected = torch::zeros({1, H, L, L});
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j) {
        auto row = D[i - j + n - 1];
        double e = q[0][h][i].dot(row).item<double>();
        if (key_query) e += k[0][h][j].dot(row).item<double>();
        expected[0][h][i][j] = e / std::sqrt(static_cast<double>(d));
      }
  return expected;
}

}  // namespace

// Our method with the table mapped by from_hf_layout must add exactly transformers' terms.
TEST(HfBert, DistanceTableFollowsTransformersSignConvention) {
  for (const std::string method : {"m4", "shaw"}) {
    if (!test::method_registered(method)) continue;
    Config cfg = tiny_config(method);
    const int64_t n = cfg.model.max_position, d = cfg.model.hidden / cfg.model.heads, H = cfg.model.heads, L = 7;
    torch::manual_seed(3);
    BertModel model(cfg.model);
    auto links = hf_tensor_links(cfg.model);
    auto link = *std::find_if(links.begin(), links.end(), [](const auto& l) { return l.relative_table; });
    auto hf_table = torch::randn({2 * n - 1, d});  // HF distance_embedding of layer 0
    {
      torch::NoGradGuard no_grad;
      model->named_parameters()[link.ours].copy_(from_hf_layout(hf_table, link));
    }
    auto q = torch::randn({1, H, L, d}), k = torch::randn({1, H, L, d});
    auto layer = model->layers[0]->as<EncoderLayerImpl>();
    auto ours = layer->attention->position->score_bias(q, k).detach();  // [1, H, L, L]
    EXPECT_TRUE(torch::allclose(ours, transformers_scores(hf_table, q, k, n, method == "m4"), 1e-5, 1e-6)) << method;
  }
}

// A clipped table (k = 3 < n - 1) exports as HF's full [2n-1, d] table: transformers' loop over
// that table, at every distance up to n - 1, must give the clipped model's own scores.
TEST(HfBert, ClippedTableExportsWithItsEdgeRowsRepeated) {
  for (const std::string method : {"m4", "shaw"}) {
    if (!test::method_registered(method)) continue;
    Config cfg = tiny_config(method);
    cfg.model.attention.max_relative = 3;
    const int64_t n = cfg.model.max_position, d = cfg.model.hidden / cfg.model.heads, H = cfg.model.heads, L = n;
    torch::manual_seed(5);
    BertModel model(cfg.model);
    auto links = hf_tensor_links(cfg.model);
    auto link = *std::find_if(links.begin(), links.end(), [](const auto& l) { return l.relative_table; });
    const auto ours_table = model->named_parameters()[link.ours].detach();
    ASSERT_EQ(ours_table.size(1), 2 * 3 + 1);
    const auto hf_table = to_hf_layout(ours_table, link);
    ASSERT_EQ(hf_table.sizes(), (std::vector<int64_t>{2 * n - 1, d}));
    auto q = torch::randn({1, H, L, d}), k = torch::randn({1, H, L, d});
    auto layer = model->layers[0]->as<EncoderLayerImpl>();
    auto ours = layer->attention->position->score_bias(q, k).detach();  // [1, H, L, L]
    EXPECT_TRUE(torch::allclose(ours, transformers_scores(hf_table, q, k, n, method == "m4"), 1e-5, 1e-6)) << method;
    // HF's first row is distance j - i = n - 1, clipped to our last row (j - i = +3).
    EXPECT_TRUE(torch::equal(hf_table[0], ours_table[0][6])) << method;
    EXPECT_TRUE(torch::equal(hf_table[2 * n - 2], ours_table[0][0])) << method;
  }
}

TEST(HfBert, ConfigMapping) {
  json c = {{"model_type", "bert"}, {"hidden_size", 64}, {"num_hidden_layers", 3}, {"num_attention_heads", 4},
            {"intermediate_size", 128}, {"max_position_embeddings", 40}, {"vocab_size", 99},
            {"layer_norm_eps", 1e-7}, {"position_embedding_type", "relative_key"}};
  ModelOptions m = model_options_from_hf(c, "config.json");
  EXPECT_EQ(m.attention.method, "shaw");
  EXPECT_TRUE(m.attention.share_across_heads);
  EXPECT_EQ(m.attention.max_relative, 0);  // = n - 1, unclipped
  EXPECT_FALSE(m.attention.shaw_values);
  EXPECT_EQ(m.hidden, 64);
  EXPECT_EQ(m.layers, 3);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.ffn, 128);
  EXPECT_EQ(m.max_position, 40);
  EXPECT_EQ(m.vocab_size, 99);
  EXPECT_DOUBLE_EQ(m.layer_norm_eps, 1e-7);
  EXPECT_EQ(m.type_vocab_size, 2);  // BertConfig default
  c["position_embedding_type"] = "relative_key_query";
  EXPECT_EQ(model_options_from_hf(c, "config.json").attention.method, "m4");
  json back = hf_config_from(model_options_from_hf(c, "config.json"));
  EXPECT_EQ(back["position_embedding_type"], "relative_key_query");
  EXPECT_EQ(back["intermediate_size"], 128);
  EXPECT_EQ(back["architectures"][0], "BertForMaskedLM");

  c["model_type"] = "roberta";
  EXPECT_NE(error_of([&] { model_options_from_hf(c, "x/config.json"); }).find("unsupported model_type 'roberta'"),
            std::string::npos);
  c["model_type"] = "bert";
  c["hidden_act"] = "gelu_new";
  EXPECT_NE(error_of([&] { model_options_from_hf(c, "x/config.json"); }).find("hidden_act"), std::string::npos);
  c["hidden_act"] = "gelu";
  c["position_embedding_type"] = "rotary";
  EXPECT_NE(error_of([&] { model_options_from_hf(c, "x/config.json"); }).find("position_embedding_type"),
            std::string::npos);
}

TEST(HfBert, ExportRefusesWhatHfBertCannotExpress) {
  auto m = tiny_config("m4").model;
  EXPECT_EQ(hf_export_blocker(m), "");
  EXPECT_EQ(hf_export_blocker(tiny_config("absolute").model), "");
  m.attention.share_across_heads = false;
  EXPECT_NE(hf_export_blocker(m).find("share_across_heads"), std::string::npos);
  m.attention.share_across_heads = true;
  m.attention.max_relative = 4;  // clipped: exported with its edge rows repeated
  EXPECT_EQ(hf_export_blocker(m), "");
  m.attention.add_absolute = true;
  EXPECT_NE(hf_export_blocker(m).find("add_absolute"), std::string::npos);
  auto s = tiny_config("shaw").model;
  s.attention.shaw_values = true;
  EXPECT_NE(hf_export_blocker(s).find("value"), std::string::npos);
  auto t = tiny_config("t5_bias").model;
  EXPECT_NE(hf_export_blocker(t).find("method 't5_bias'"), std::string::npos);
  auto p = tiny_config("absolute").model;
  p.pre_ln = true;
  EXPECT_NE(hf_export_blocker(p).find("post-LayerNorm"), std::string::npos);

  // End to end: a per-head m4 checkpoint is refused with the reason.
  Config per_head = tiny_config("m4");
  per_head.model.attention.share_across_heads = false;
  const fs::path dir = temp_dir("refuse");
  const fs::path ck = random_checkpoint(per_head, dir, 1);
  const std::string err = error_of([&] { export_hf_bert(ck, dir / "out", dir / "vocab.txt"); });
  EXPECT_NE(err.find("cannot export to Hugging Face BERT"), std::string::npos) << err;
  EXPECT_NE(err.find("share_across_heads"), std::string::npos) << err;
}

TEST(HfBert, LinksCoverEveryParameter) {
  for (const std::string method : {"absolute", "m4", "shaw"}) {
    if (!test::method_registered(method)) continue;
    auto m = tiny_config(method).model;
    BertModel model(m);
    std::set<std::string> params, linked;
    for (const auto& p : model->named_parameters()) params.insert(p.key());
    for (const auto& l : hf_tensor_links(m)) linked.insert(l.ours);
    EXPECT_EQ(params, linked) << method;
  }
}

// export -> import -> export: the two safetensors files hold identical tensors, and the
// imported checkpoint holds our original parameters bit for bit.
TEST(HfBert, RoundTripIsByteIdentical) {
  for (const std::string method : {"absolute", "m4", "shaw"}) {
    if (!test::method_registered(method)) continue;
    const fs::path dir = temp_dir("rt_" + method);
    const Config cfg = tiny_config(method);
    const fs::path ck = random_checkpoint(cfg, dir, 7);
    export_hf_bert(ck, dir / "hf1", dir / "vocab.txt");
    EXPECT_TRUE(fs::exists(dir / "hf1" / "config.json"));
    EXPECT_EQ(read_file(dir / "hf1" / "vocab.txt"), read_file(dir / "vocab.txt"));
    import_hf_bert(dir / "hf1", dir / "imp" / "model.pt");
    EXPECT_EQ(read_file(dir / "imp" / "vocab.txt"), read_file(dir / "vocab.txt"));
    export_hf_bert(dir / "imp" / "model.pt", dir / "hf2");  // vocab found through the imported config
    const auto a = read_safetensors(dir / "hf1" / "model.safetensors").tensors;
    const auto b = read_safetensors(dir / "hf2" / "model.safetensors").tensors;
    ASSERT_EQ(a.size(), b.size()) << method;
    for (const auto& [name, t] : a) {
      ASSERT_TRUE(b.count(name)) << name;
      EXPECT_EQ(t.scalar_type(), torch::kFloat32);
      EXPECT_EQ(std::memcmp(t.data_ptr(), b.at(name).data_ptr(), t.numel() * 4), 0) << method << " " << name;
    }
    auto original = load_model_file(ck), imported = load_model_file(dir / "imp" / "model.pt");
    auto p2 = imported.model->named_parameters();
    for (const auto& p : original.model->named_parameters()) EXPECT_TRUE(p.value().equal(p2[p.key()])) << p.key();
    EXPECT_EQ(imported.config.data.tokenizer, "wordpiece");
    EXPECT_EQ(imported.config.model.attention.method, method);
  }
}

// --out given relative to the working directory: the imported checkpoint names its vocabulary
// absolutely, so finetune --init / export-hf started elsewhere read that file and no other.
TEST(HfBert, ImportNamesItsVocabularyAbsolutely) {
  const fs::path dir = temp_dir("relative_out");
  const Config cfg = tiny_config("absolute");
  const fs::path ck = random_checkpoint(cfg, dir, 3);
  export_hf_bert(ck, dir / "hf", dir / "vocab.txt");
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  import_hf_bert("hf", fs::path("rel") / "model.pt");
  fs::current_path(before);
  const fs::path named = load_model_file(dir / "rel" / "model.pt").config.data.tokenizer_model;
  EXPECT_TRUE(named.is_absolute()) << named;
  EXPECT_TRUE(fs::equivalent(named, dir / "rel" / "vocab.txt")) << named;
}

TEST(HfBert, ImportReadsHalfPrecisionAndLegacyNames) {
  const fs::path dir = temp_dir("half");
  const Config cfg = tiny_config("absolute");
  const fs::path ck = random_checkpoint(cfg, dir, 5);
  export_hf_bert(ck, dir / "hf", dir / "vocab.txt");
  // Rewrite as BF16 with TF-style LayerNorm gamma/beta names and a pooler (ignored).
  std::vector<std::pair<std::string, torch::Tensor>> t;
  for (auto& [name, v] : read_safetensors(dir / "hf" / "model.safetensors").tensors) {
    std::string n = name;
    if (n.size() > 16 && n.ends_with("LayerNorm.weight")) n = n.substr(0, n.size() - 6) + "gamma";
    if (n.size() > 14 && n.ends_with("LayerNorm.bias")) n = n.substr(0, n.size() - 4) + "beta";
    t.emplace_back(n, v.to(torch::kBFloat16));
  }
  t.emplace_back("bert.pooler.dense.weight", torch::zeros({16, 16}));
  write_safetensors(dir / "hf" / "model.safetensors", t);
  const auto summary = import_hf_bert(dir / "hf", dir / "imp.pt");
  EXPECT_EQ(summary.ignored, std::vector<std::string>{"bert.pooler.dense.weight"});
  auto imported = load_model_file(dir / "imp.pt");
  auto original = load_model_file(ck);
  auto p2 = imported.model->named_parameters();
  for (const auto& p : original.model->named_parameters())
    EXPECT_TRUE(p.value().to(torch::kBFloat16).to(torch::kFloat32).equal(p2[p.key()])) << p.key();
}

// A BertModel's weights (no "bert." prefix, no cls.* MLM head, a pooler): refused by default,
// since the head would start random and be read by MLM evaluation and export-hf as if trained;
// imported when asked, with every encoder tensor the file's and the head BERT's init.
TEST(HfBert, AHeadlessModelIsImportedOnlyWhenAsked) {
  const fs::path dir = temp_dir("headless");
  const fs::path ck = random_checkpoint(tiny_config("absolute"), dir, 4);
  export_hf_bert(ck, dir / "hf", dir / "vocab.txt");
  std::vector<std::pair<std::string, torch::Tensor>> encoder;
  for (auto& [name, t] : read_safetensors(dir / "hf" / "model.safetensors").tensors)
    if (name.rfind("bert.", 0) == 0) encoder.emplace_back(name.substr(5), t);
  encoder.emplace_back("pooler.dense.weight", torch::zeros({16, 16}));
  write_safetensors(dir / "hf" / "model.safetensors", encoder);
  const std::string error = error_of([&] { import_hf_bert(dir / "hf", dir / "imp.pt"); });
  EXPECT_NE(error.find("model.safetensors: no MLM head (cls.predictions.*; a BertModel's weights): pass "
                       "--allow-missing-mlm-head"),
            std::string::npos)
      << error;
  EXPECT_FALSE(fs::exists(dir / "imp.pt"));

  import_hf_bert(dir / "hf", dir / "imp.pt", /*allow_missing_mlm_head=*/true);
  auto original = load_model_file(ck), imported = load_model_file(dir / "imp.pt");
  auto p2 = imported.model->named_parameters();
  int64_t head = 0;
  for (const auto& p : original.model->named_parameters()) {
    if (p.key().rfind("mlm_", 0) == 0) {
      ++head;
      continue;
    }
    EXPECT_TRUE(p.value().equal(p2[p.key()])) << p.key();
  }
  EXPECT_EQ(head, 5);  // mlm_transform.{weight,bias}, mlm_norm.{weight,bias}, mlm_bias: not in the file
  EXPECT_FALSE(original.model->named_parameters()["mlm_transform.weight"].equal(p2["mlm_transform.weight"]));
}

TEST(HfBert, BadInputNamesTheProblem) {
  const fs::path dir = temp_dir("bad");
  const fs::path ck = random_checkpoint(tiny_config("absolute"), dir, 2);
  export_hf_bert(ck, dir / "hf", dir / "vocab.txt");
  const fs::path hf = dir / "hf", out = dir / "x.pt";
  const json good = json::parse(read_file(hf / "config.json"));
  auto import_error = [&] { return error_of([&] { import_hf_bert(hf, out); }); };

  json c = good;
  c["model_type"] = "gpt2";
  write_file_atomic(hf / "config.json", c.dump());
  EXPECT_NE(import_error().find("unsupported model_type 'gpt2'"), std::string::npos);
  c = good;
  c["num_attention_heads"] = 0;  // named as itself, not as hidden_size
  write_file_atomic(hf / "config.json", c.dump());
  EXPECT_NE(import_error().find("config.json: num_attention_heads: must be positive, got 0"), std::string::npos)
      << import_error();
  c = good;
  c["type_vocab_size"] = 0;
  write_file_atomic(hf / "config.json", c.dump());
  EXPECT_NE(import_error().find("config.json: type_vocab_size: must be positive"), std::string::npos) << import_error();
  c = good;
  c["position_embedding_type"] = nullptr;  // HF: no position information at all
  write_file_atomic(hf / "config.json", c.dump());
  EXPECT_NE(import_error().find("config.json: position_embedding_type: null (no position information) is not supported"),
            std::string::npos)
      << import_error();
  write_file_atomic(hf / "config.json", "[1, 2]");
  EXPECT_NE(import_error().find("config.json: expected a JSON object"), std::string::npos) << import_error();
  write_file_atomic(hf / "tokenizer_config.json", "\"x\"");
  write_file_atomic(hf / "config.json", good.dump());
  EXPECT_NE(import_error().find("tokenizer_config.json: expected a JSON object"), std::string::npos) << import_error();
  fs::remove(hf / "tokenizer_config.json");
  c = good;
  c["intermediate_size"] = 33;
  write_file_atomic(hf / "config.json", c.dump());
  EXPECT_NE(import_error().find("'bert.encoder.layer.0.intermediate.dense.weight' has shape [32, 16] but config.json "
                                "implies [33, 16]"),
            std::string::npos)
      << import_error();
  write_file_atomic(hf / "config.json", good.dump());

  auto tensors = read_safetensors(hf / "model.safetensors").tensors;
  std::vector<std::pair<std::string, torch::Tensor>> extra(tensors.begin(), tensors.end());
  extra.emplace_back("bert.encoder.layer.0.attention.self.mystery", torch::zeros({3}));
  write_safetensors(hf / "model.safetensors", extra);
  EXPECT_NE(import_error().find("unexpected tensor 'bert.encoder.layer.0.attention.self.mystery'"), std::string::npos);
  std::vector<std::pair<std::string, torch::Tensor>> fewer;
  for (const auto& kv : tensors)
    if (kv.first != "bert.encoder.layer.1.output.dense.bias") fewer.push_back(kv);
  write_safetensors(hf / "model.safetensors", fewer);
  EXPECT_NE(import_error().find("'bert.encoder.layer.1.output.dense.bias' is missing"), std::string::npos);

  // The MLM decoder's bias is tied to cls.predictions.bias, as its weight to the embeddings.
  std::vector<std::pair<std::string, torch::Tensor>> untied(tensors.begin(), tensors.end());
  untied.emplace_back("cls.predictions.decoder.bias", tensors.at("cls.predictions.bias") + 1);
  write_safetensors(hf / "model.safetensors", untied);
  EXPECT_NE(import_error().find("cls.predictions.decoder.bias differs from cls.predictions.bias"), std::string::npos)
      << import_error();
  // vocab.txt: empty, or a folder.
  const std::string vocab_text = read_file(hf / "vocab.txt");
  write_safetensors(hf / "model.safetensors", {tensors.begin(), tensors.end()});
  write_file_atomic(hf / "vocab.txt", "");
  EXPECT_NE(import_error().find("vocab.txt: empty"), std::string::npos) << import_error();
  fs::remove(hf / "vocab.txt");
  fs::create_directories(hf / "vocab.txt");
  EXPECT_NE(import_error().find("vocab.txt: is a folder"), std::string::npos) << import_error();
  fs::remove(hf / "vocab.txt");
  write_file_atomic(hf / "vocab.txt", vocab_text);
  // Sharded weights: the hint says how to make one file.
  fs::rename(hf / "model.safetensors", dir / "kept.safetensors");
  write_file_atomic(hf / "model.safetensors.index.json", "{}");
  EXPECT_NE(import_error().find("the weights are sharded (model.safetensors.index.json)"), std::string::npos)
      << import_error();
  fs::remove(hf / "model.safetensors.index.json");
  fs::rename(dir / "kept.safetensors", hf / "model.safetensors");
  fs::resize_file(hf / "model.safetensors", fs::file_size(hf / "model.safetensors") / 2);
  EXPECT_NE(import_error().find("truncated"), std::string::npos);
  fs::remove(hf / "model.safetensors");
  EXPECT_NE(import_error().find("model.safetensors: file not found"), std::string::npos);
  fs::remove(hf / "config.json");
  EXPECT_NE(import_error().find("config.json: file not found"), std::string::npos);
  EXPECT_FALSE(fs::exists(out));
}

// The tokenizer's lower-casing as transformers 4.x loads the folder: tokenizer_config.json's
// do_lower_case, else true, whatever tokenizer.json's normalizer says (BertTokenizerFast rebuilds
// it from those settings); settings our tokenizer cannot follow are refused.
TEST(HfBert, ImportReadsTheTokenizersLowerCasing) {
  const fs::path dir = temp_dir("lowercase");
  const fs::path hf = dir / "hf", out = dir / "x.pt";
  export_hf_bert(random_checkpoint(tiny_config("absolute"), dir, 4), hf, dir / "vocab.txt");
  auto lowercase = [&] {
    import_hf_bert(hf, out);
    const bool l = load_model_file(out).config.data.lowercase;
    fs::remove(out);
    return l;
  };
  auto error = [&] { return error_of([&] { import_hf_bert(hf, out); }); };
  const json cased_normalizer{{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                              {"strip_accents", nullptr}, {"lowercase", false}};
  write_file_atomic(hf / "tokenizer.json", json{{"version", "1.0"}, {"normalizer", cased_normalizer}}.dump());
  write_file_atomic(hf / "tokenizer_config.json", R"({"do_lower_case": false})");
  EXPECT_FALSE(lowercase());
  write_file_atomic(hf / "tokenizer_config.json", R"({"model_max_length": 512})");
  EXPECT_TRUE(lowercase());  // BertTokenizerFast's default overrides the normalizer (a warning says so)
  fs::remove(hf / "tokenizer_config.json");
  EXPECT_TRUE(lowercase());

  write_file_atomic(hf / "tokenizer_config.json", R"({"do_lower_case": true, "strip_accents": false})");
  EXPECT_NE(error().find("tokenizer_config.json: strip_accents false with do_lower_case true is not supported"),
            std::string::npos) << error();
  write_file_atomic(hf / "tokenizer_config.json", R"({"do_lower_case": false, "strip_accents": true})");
  EXPECT_NE(error().find("tokenizer_config.json: strip_accents true with do_lower_case false is not supported"),
            std::string::npos) << error();
  write_file_atomic(hf / "tokenizer_config.json", R"({"do_lower_case": false, "strip_accents": null})");
  EXPECT_FALSE(lowercase());  // null: accents follow the lower-casing
  write_file_atomic(hf / "tokenizer_config.json", R"({"do_lower_case": true, "tokenize_chinese_chars": false})");
  EXPECT_NE(error().find("tokenizer_config.json: tokenize_chinese_chars false is not supported"), std::string::npos)
      << error();
  write_file_atomic(hf / "tokenizer_config.json", R"({"do_lower_case": "yes"})");
  EXPECT_NE(error().find("tokenizer_config.json: do_lower_case: expected true or false"), std::string::npos) << error();
  EXPECT_FALSE(fs::exists(out));
}

// Parameters stored as integers are no trained weights, and NaN/Inf ones would surface only as
// NaN logits later: both are refused, naming the tensor. position_ids (an I64 buffer that
// transformers saves) is still ignored.
TEST(HfBert, ImportRefusesIntegerAndNonFiniteWeights) {
  const fs::path dir = temp_dir("values");
  export_hf_bert(random_checkpoint(tiny_config("absolute"), dir, 5), dir / "hf", dir / "vocab.txt");
  const fs::path hf = dir / "hf", out = dir / "x.pt";
  const auto good = read_safetensors(hf / "model.safetensors").tensors;
  auto import_with = [&](const std::string& name, const torch::Tensor& value) {
    std::vector<std::pair<std::string, torch::Tensor>> tensors(good.begin(), good.end());
    for (auto& [n, t] : tensors)
      if (n == name) t = value;
    tensors.emplace_back("bert.embeddings.position_ids", torch::arange(12, torch::kLong).unsqueeze(0));
    write_safetensors(hf / "model.safetensors", tensors);
    return error_of([&] { import_hf_bert(hf, out); });
  };
  const std::string bias = "bert.encoder.layer.1.output.dense.bias";
  std::string e = import_with(bias, torch::arange(16, torch::kLong));
  EXPECT_NE(e.find("model.safetensors: tensor '" + bias + "' has dtype I64, expected a floating-point weight"),
            std::string::npos) << e;
  e = import_with(bias, torch::arange(16, torch::kInt));
  EXPECT_NE(e.find("has dtype I32"), std::string::npos) << e;
  e = import_with(bias, torch::full({16}, NAN));
  EXPECT_NE(e.find("tensor '" + bias + "' holds NaN or infinite values"), std::string::npos) << e;
  torch::Tensor words = good.at("bert.embeddings.word_embeddings.weight").clone();
  words[3][4] = INFINITY;
  e = import_with("bert.embeddings.word_embeddings.weight", words);
  EXPECT_NE(e.find("tensor 'bert.embeddings.word_embeddings.weight' holds NaN or infinite values"), std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(import_with(bias, good.at(bias)), "(no error)");  // with position_ids I64: accepted
}

// tie_word_embeddings false without a stored decoder: transformers would start that decoder
// random, so importing it as tied would give another model than HF's; refused with the reason.
TEST(HfBert, ImportRefusesAnUntiedDecoderThatIsNotStored) {
  const fs::path dir = temp_dir("untied");
  export_hf_bert(random_checkpoint(tiny_config("absolute"), dir, 6), dir / "hf", dir / "vocab.txt");
  json c = json::parse(read_file(dir / "hf" / "config.json"));
  c["tie_word_embeddings"] = false;
  write_file_atomic(dir / "hf" / "config.json", c.dump());
  const std::string e = error_of([&] { import_hf_bert(dir / "hf", dir / "x.pt"); });
  EXPECT_NE(e.find("model.safetensors: config.json says tie_word_embeddings false, but there is no "
                   "cls.predictions.decoder.weight"), std::string::npos) << e;
  c["tie_word_embeddings"] = true;
  write_file_atomic(dir / "hf" / "config.json", c.dump());
  EXPECT_EQ(error_of([&] { import_hf_bert(dir / "hf", dir / "x.pt"); }), "(no error)");
}

// Config validation of numeric ranges, names, sizes and file kinds (issue 17): each bad
// value is a one-line UserError naming the key (and the file that set it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "config/config.h"
#include "config_fixture.h"
#include "config/model_size.h"
#include "model/attention/registry.h"
#include "model/bert.h"
#include "test_models.h"
#include "util/errors.h"

namespace fs = std::filesystem;
using rpe::load_config;
using rpe::UserError;

// At namespace scope, as every fixture here: GCC warns (-Wsubobject-linkage, in a unity batch)
// of test classes derived from a fixture of internal linkage.
class ConfigLimits : public rpe::test::ConfigFixture {
 protected:
  void SetUp() override {
    make_dir("rpe_config_limits_");
    expect_one_line_ = true;
    write("exp.yaml",
          "model:\n  hidden: 64\n  layers: 2\n  heads: 4\n  attention:\n    method: m4\n"
          "data:\n  train_files: [a.txt]\n");
  }
  std::string error_of_set(const std::string& set) { return error_of(dir_ / "exp.yaml", {set}); }
};


TEST_F(ConfigLimits, OptimizerAndNumericsKeysAreRangeChecked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train.adam_beta1=2", "train.adam_beta1: must be in [0, 1), got 2"},
      {"train.adam_beta1=-0.1", "train.adam_beta1: must be in [0, 1)"},
      {"train.adam_beta2=1", "train.adam_beta2: must be in [0, 1), got 1"},
      {"train.adam_beta2=.nan", "train.adam_beta2: must be in [0, 1)"},
      {"train.adam_eps=-1", "train.adam_eps: must be a finite number > 0, got -1"},
      {"train.adam_eps=0", "train.adam_eps: must be a finite number > 0"},
      {"model.init_std=-1", "model.init_std: must be a finite number > 0, got -1"},
      {"model.layer_norm_eps=-1", "model.layer_norm_eps: must be a finite number > 0"},
      {"model.layer_norm_eps=0", "model.layer_norm_eps: must be a finite number > 0"},
      {"train.lr=.inf", "train.lr: must be a finite number > 0, got inf"},
      {"train.lr=.nan", "train.lr: must be"},
      {"train.eval_batches=-5", "train.eval_batches: must be >= 1, got -5"},
      {"train.eval_batches=0", "train.eval_batches: must be >= 1, got 0"},
      {"finetune.epochs=.inf", "finetune.epochs: must be a finite number > 0"},
      {"train.bucket_mb=1e20", "train.bucket_mb: must be in (0, 1048576] MiB"},  // bytes beyond an int64
  };
  for (const auto& [set, expected] : cases) {
    const std::string e = error_of_set(set);
    EXPECT_NE(e.find("--set " + set + ": " + expected), std::string::npos) << set << " -> " << e;
  }
  // The values just inside the ranges load.
  EXPECT_EQ(error_of(dir_ / "exp.yaml", {"train.adam_beta1=0", "train.adam_beta2=0.999999", "train.adam_eps=1e-30",
                                          "train.eval_batches=1", "model.layer_norm_eps=1e-12",
                                          "train.bucket_mb=1048576"}),
            "");
}

TEST_F(ConfigLimits, RunNameMustBeAPlainFolderName) {
  EXPECT_NE(error_of_set("run.name=\"\"").find("run.name: must be a plain folder name (non-empty"), std::string::npos)
      << error_of_set("run.name=\"\"");
  EXPECT_NE(error_of_set("run.name=").find("run.name: must be a plain folder name (non-empty"), std::string::npos)
      << error_of_set("run.name=");
  const auto f = write("empty_name.yaml", "extends: exp.yaml\nrun:\n  name:\n");
  EXPECT_NE(error_of(f).find("empty_name.yaml:3: run.name: no value"), std::string::npos) << error_of(f);
  for (const std::string bad : {"..", ".", "a/b", "/abs"})
    EXPECT_NE(error_of_set("run.name=" + bad).find("run.name: must be a plain folder name"), std::string::npos) << bad;
  EXPECT_NE(error_of_set("run.root=''").find("run.root: must not be empty"), std::string::npos);
  EXPECT_EQ(error_of_set("run.name=m4_seed-1.2"), "");
}

TEST_F(ConfigLimits, AbsurdSizesAreRefusedBeforeAllocating) {
  EXPECT_NE(error_of_set("model.ffn=10000000000").find("model.ffn: is implausibly large (10000000000 > 1048576)"),
            std::string::npos);
  EXPECT_NE(error_of_set("model.vocab_size=100000000000").find("model.vocab_size: is implausibly large"), std::string::npos);
  EXPECT_NE(error_of_set("model.layers=5000").find("model.layers: is implausibly large"), std::string::npos);
  EXPECT_NE(error_of_set("train.batch_size=1000000000").find("train.batch_size: is implausibly large"), std::string::npos);
  // LibTorch would start them all: 1000 took 25 s, 100000 hung.
  EXPECT_EQ(error_of_set("train.threads=100000"),
            "--set train.threads=100000: train.threads: is implausibly large (100000 > 1024)");
  EXPECT_EQ(load_config(dir_ / "exp.yaml", {"train.threads=1024"}).train.threads, 1024);
  // Every size within its bound, together far beyond any machine: ~2e11 parameters.
  const std::string e = error_of(dir_ / "exp.yaml", {"model.hidden=16384", "model.heads=16", "model.layers=64",
                                                      "model.ffn=65536"});
  EXPECT_NE(e.find("model: model.hidden/layers/ffn/max_position/vocab_size give about"), std::string::npos) << e;
  EXPECT_NE(e.find("GiB with gradients and Adam states; this machine has"), std::string::npos) << e;
}

// A slip of the keyboard (epochs 1e9: ~1e10 steps) is refused, not run for ages.
TEST_F(ConfigLimits, RunLengthsHaveAPlausibilityCap) {
  EXPECT_EQ(error_of_set("finetune.epochs=1000000000"),
            "--set finetune.epochs=1000000000: finetune.epochs: is implausibly large: must be in (0, 10000], got 1e+09");
  EXPECT_EQ(error_of_set("train.max_steps=2000000000"),
            "--set train.max_steps=2000000000: train.max_steps: is implausibly large (2000000000 > 1000000000)");
  EXPECT_NE(error_of_set("train.warmup_steps=9000000000").find("train.warmup_steps: is implausibly large"),
            std::string::npos);
  EXPECT_EQ(error_of(dir_ / "exp.yaml", {"finetune.epochs=10000", "train.max_steps=1000000000"}), "");
}

TEST_F(ConfigLimits, ParameterEstimateMatchesBuiltModels) {
  // The estimate against the parameters a built model really holds, for every method, per
  // head and shared tables, and the options that change a method's tables: exactly.
  using Variant = std::function<void(rpe::AttentionOptions&)>;
  const std::vector<std::pair<std::string, Variant>> variants = {
      {"defaults", [](rpe::AttentionOptions&) {}},
      {"shared", [](rpe::AttentionOptions& a) { a.share_across_heads = true; }},
      {"k = 5", [](rpe::AttentionOptions& a) { a.max_relative = 5; }},
      {"no u, v", [](rpe::AttentionOptions& a) { a.xl_uv_bias = false; }},
      {"shaw values", [](rpe::AttentionOptions& a) { a.shaw_values = true; }},
      {"add_absolute", [](rpe::AttentionOptions& a) { a.add_absolute = true; }}};
  for (const auto& method : rpe::attention_method_names()) {
    for (const auto& [name, variant] : variants) {
      auto m = rpe::test::small_model_options(method, {.vocab = 100, .hidden = 32, .heads = 4, .ffn = 64,
                                                        .max_position = 64});
      variant(m.attention);
      rpe::BertModel model(m);
      double actual = 0;
      for (const auto& p : model->parameters()) actual += static_cast<double>(p.numel());
      EXPECT_EQ(rpe::estimated_parameters(m, 0), actual) << method << ", " << name;
    }
  }
  auto pre = rpe::test::small_model_options("absolute", {.vocab = 100, .hidden = 32, .heads = 4, .ffn = 64,
                                                         .max_position = 64});
  pre.pre_ln = true;  // adds the final LayerNorm
  rpe::BertModel model(pre);
  double actual = 0;
  for (const auto& p : model->parameters()) actual += static_cast<double>(p.numel());
  EXPECT_EQ(rpe::estimated_parameters(pre, 0), actual);
}

// Model FLOPs of training on one BERT-base token (D 768, F 3072, 12 layers, V 30522), counted
// by hand: weight matmuls 6 x 12 x (4 x 768^2 + 2 x 768 x 3072) = 509,607,936; attention
// products 12 x 12 x L x 768 = 14,155,776 at L 128 (56,623,104 at 512); MLM head on 15% of the
// tokens 6 x 0.15 x (768^2 + 768 x 30522) = 21,627,648.
TEST(ModelFlops, BertBaseCountedByHand) {
  rpe::ModelOptions m;
  m.hidden = 768, m.ffn = 3072, m.layers = 12, m.heads = 12, m.vocab_size = 30522;
  EXPECT_DOUBLE_EQ(rpe::model_flops_per_token(m, 0, 128, 0.15), 509607936.0 + 14155776.0 + 21627648.0);
  EXPECT_DOUBLE_EQ(rpe::model_flops_per_token(m, 0, 512, 0.15), 509607936.0 + 56623104.0 + 21627648.0);
  m.vocab_size = 0;  // taken from the tokenizer
  EXPECT_DOUBLE_EQ(rpe::model_flops_per_token(m, 30522, 128, 0.15), 545391360.0);
}

TEST_F(ConfigLimits, FoldersWhereConfigFilesAreExpected) {
  fs::create_directories(dir_ / "folder.yaml");
  const std::string direct = error_of(dir_ / "folder.yaml");
  EXPECT_NE(direct.find("folder.yaml is a folder, not a YAML file"), std::string::npos) << direct;
  const auto f = write("extends_folder.yaml", "extends: folder.yaml\n");
  const std::string via = error_of(f);
  EXPECT_NE(via.find("extends_folder.yaml:1: extends: config file"), std::string::npos) << via;
  EXPECT_NE(via.find("is a folder"), std::string::npos) << via;
  const auto g = write("extends_map.yaml", "extends:\n  - {a: b}\n");
  EXPECT_NE(error_of(g).find("extends: each entry must be a file name"), std::string::npos) << error_of(g);
}

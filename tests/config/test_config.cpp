// Config system: extends, --set overrides, dumping, and every error kind with its location.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/config.h"
#include "config_fixture.h"
#include "util/errors.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using rpe::Config;
using rpe::load_config;
using rpe::UserError;

// At namespace scope, as every fixture here: GCC warns (-Wsubobject-linkage, in a unity batch)
// of test classes derived from a fixture of internal linkage.
class ConfigTest : public rpe::test::ConfigFixture {
 protected:
  void SetUp() override {
    make_dir("rpe_config_");
    fs::create_directories(dir_ / "model");
    write("model/small.yaml", "model:\n  hidden: 64\n  layers: 2\n  heads: 4\n  attention:\n    method: m4\n");
    write("exp.yaml",
          "extends: model/small.yaml\n"
          "model:\n  layers: 3\n"
          "data:\n  train_files: [a.txt]\n"
          "train:\n  max_steps: 7\n  lr: 2.0e-4\n");
  }
};


TEST_F(ConfigTest, ExtendsMergesMapsAndLaterFilesWin) {
  const Config c = load_config(dir_ / "exp.yaml");
  EXPECT_EQ(c.model.hidden, 64);           // from the base file
  EXPECT_EQ(c.model.layers, 3);            // overridden by the child
  EXPECT_EQ(c.model.heads, 4);
  EXPECT_EQ(c.model.attention.method, "m4");
  EXPECT_EQ(c.model.ffn, 3072);            // default kept
  EXPECT_EQ(c.train.max_steps, 7);
  EXPECT_DOUBLE_EQ(c.train.lr, 2e-4);
  ASSERT_EQ(c.data.train_files.size(), 1u);
  EXPECT_EQ(c.data.train_files[0], "a.txt");
}

TEST_F(ConfigTest, ExtendsListAppliesInOrder) {
  write("b1.yaml", "train:\n  max_steps: 1\n  seed: 5\n");
  write("b2.yaml", "train:\n  max_steps: 2\n");
  auto f = write("multi.yaml", "extends: [model/small.yaml, b1.yaml, b2.yaml]\ndata:\n  train_files: x.txt\n");
  const Config c = load_config(f);
  EXPECT_EQ(c.train.max_steps, 2);
  EXPECT_EQ(c.train.seed, 5);
  EXPECT_EQ(c.data.train_files, std::vector<std::string>{"x.txt"});  // scalar accepted for a list
}

// A diamond (top extends left and right, both extend base): base is merged once, where first
// reached, so left's change to it stays; right's own keys still win over left's.
TEST_F(ConfigTest, ADiamondOfExtendsMergesTheSharedBaseOnce) {
  write("base.yaml", "extends: model/small.yaml\ndata:\n  train_files: [a.txt]\ntrain:\n  lr: 1.0e-3\n  seed: 1\n");
  write("left.yaml", "extends: base.yaml\ntrain:\n  lr: 5.0e-4\n  seed: 2\n");
  write("right.yaml", "extends: base.yaml\ntrain:\n  seed: 3\n");
  const Config c = load_config(write("top.yaml", "extends: [left.yaml, right.yaml]\n"));
  EXPECT_DOUBLE_EQ(c.train.lr, 5e-4);  // base again after left would give 1e-3
  EXPECT_EQ(c.train.seed, 3);
}

// A key without a value would have reset what it inherits to the built-in default.
TEST_F(ConfigTest, KeysWithoutAValueAreErrors) {
  expect_one_line_ = true;
  auto f = write("empty.yaml", "extends: exp.yaml\ntrain:\n  # max_steps: 100\n");
  const std::string section = error_of(f);
  EXPECT_NE(section.find("empty.yaml:2: train: no value"), std::string::npos) << section;
  auto g = write("empty_key.yaml", "extends: exp.yaml\ntrain:\n  lr:\n");
  const std::string key = error_of(g);
  EXPECT_NE(key.find("empty_key.yaml:3: train.lr: no value"), std::string::npos) << key;
  const std::string null = error_of(dir_ / "exp.yaml", {"train.lr=null"});
  EXPECT_NE(null.find("--set train.lr=null: no value"), std::string::npos) << null;
  // `key=` (a shell's key="") is the empty string: a string key takes it, a number refuses it.
  const std::string empty = error_of(dir_ / "exp.yaml", {"train.lr="});
  EXPECT_NE(empty.find("train.lr: expected a number"), std::string::npos) << empty;
  EXPECT_EQ(load_config(dir_ / "exp.yaml", {"data.tokenizer_model="}).data.tokenizer_model, "");
}

TEST_F(ConfigTest, OverridesAreTypedAndWinOverFiles) {
  const Config c = load_config(dir_ / "exp.yaml", {"model.attention.method=absolute", "train.max_steps=50",
                                                   "train.lr=1e-3", "model.pre_ln=true",
                                                   "data.train_files=[p.txt, q.txt]"});
  EXPECT_EQ(c.model.attention.method, "absolute");
  EXPECT_EQ(c.train.max_steps, 50);
  EXPECT_DOUBLE_EQ(c.train.lr, 1e-3);
  EXPECT_TRUE(c.model.pre_ln);
  EXPECT_EQ(c.data.train_files, (std::vector<std::string>{"p.txt", "q.txt"}));
  EXPECT_EQ(c.where("train.max_steps"), "--set train.max_steps=50");  // the --set as typed
}

TEST_F(ConfigTest, UnknownKeyNamesFileLineAndPath) {
  auto f = write("typo.yaml", "extends: model/small.yaml\ndata:\n  train_files: [a]\ntrain:\n  max_stpes: 3\n");
  const std::string e = error_of(f);
  EXPECT_NE(e.find("typo.yaml:5"), std::string::npos) << e;
  EXPECT_NE(e.find("train.max_stpes"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("max_steps"), std::string::npos) << e;  // lists the valid keys
}

TEST_F(ConfigTest, UnknownOverrideKeyIsAnError) {
  const std::string e = error_of(dir_ / "exp.yaml", {"model.hiden=3"});
  EXPECT_NE(e.find("model.hiden"), std::string::npos) << e;
  EXPECT_NE(e.find("--set"), std::string::npos) << e;
}

TEST_F(ConfigTest, WrongTypesAreErrors) {
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"model.hidden=abc"}).find("expected an integer, got 'abc'"), std::string::npos);
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"model.hidden=1.5"}).find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"model.pre_ln=maybe"}).find("expected true or false"), std::string::npos);
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"train.lr=fast"}).find("expected a number"), std::string::npos);
  auto f = write("map.yaml", "extends: exp.yaml\nmodel:\n  attention: m4\n");
  const std::string e = error_of(f);
  EXPECT_NE(e.find("map.yaml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("model.attention: expected a mapping"), std::string::npos) << e;
}

TEST_F(ConfigTest, MissingRequiredKeys) {
  // data.train_files only where a command reads a corpus (fine-tuning from random weights reads none).
  auto f = write("nodata.yaml", "extends: model/small.yaml\n");
  const Config no_data = load_config(f);
  try {
    require_train_files(no_data, "pretraining");
    FAIL() << "no data.train_files passed for pretraining";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("data.train_files: missing required key (pretraining reads the training files)"),
              std::string::npos)
        << e.what();
  }
  auto g = write("nomethod.yaml", "model:\n  hidden: 8\n  layers: 1\n  heads: 2\ndata:\n  train_files: [a]\n");
  EXPECT_NE(error_of(g).find("model.attention.method: missing required key"), std::string::npos) << error_of(g);
}

TEST_F(ConfigTest, InvalidValuesNameTheKey) {
  const std::string heads = error_of(dir_ / "exp.yaml", {"model.heads=5"});
  EXPECT_NE(heads.find("model.heads"), std::string::npos) << heads;
  EXPECT_NE(heads.find("not divisible"), std::string::npos) << heads;
  const std::string method = error_of(dir_ / "exp.yaml", {"model.attention.method=m9"});
  EXPECT_NE(method.find("unknown method 'm9'"), std::string::npos) << method;
  EXPECT_NE(method.find("absolute"), std::string::npos) << method;  // lists the valid ones
  EXPECT_NE(method.find("m4"), std::string::npos) << method;
  // The weights' pretraining method (swap-method sets it): a method name, or "" for attention.method's.
  const std::string pretrained = error_of(dir_ / "exp.yaml", {"model.pretrained_method=m9"});
  EXPECT_NE(pretrained.find("model.pretrained_method: unknown method 'm9' (valid: absolute, "), std::string::npos)
      << pretrained;
  EXPECT_NE(pretrained.find(", or \"\")"), std::string::npos) << pretrained;
  EXPECT_EQ(load_config(dir_ / "exp.yaml", {"model.pretrained_method=absolute"}).model.weights_pretrained_with(),
            "absolute");
  const Config own = load_config(dir_ / "exp.yaml", {});
  EXPECT_EQ(own.model.weights_pretrained_with(), own.model.attention.method);
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"data.mask_prob=1.5"}).find("data.mask_prob"), std::string::npos);
  const std::string packing = error_of(dir_ / "exp.yaml", {"data.packing=blocks"});
  EXPECT_NE(packing.find("data.packing: must be full_sentences, doc_sentences or contiguous, got 'blocks'"),
            std::string::npos) << packing;
  EXPECT_EQ(load_config(dir_ / "exp.yaml", {"data.packing=contiguous"}).data.packing, "contiguous");
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"train.batch_size=0"}).find("must be positive"), std::string::npos);
  // select: best with nothing to choose among (no epoch-end and no periodic dev evaluations)
  const std::string best = error_of(dir_ / "exp.yaml", {"finetune.select=best", "finetune.eval_each_epoch=false"});
  EXPECT_NE(best.find("finetune.select: best needs dev evaluations"), std::string::npos) << best;
  EXPECT_NO_THROW(load_config(dir_ / "exp.yaml", {"finetune.select=best", "finetune.eval_each_epoch=false",
                                                  "finetune.eval_every=50"}));
  // precision and fp16's loss scaling
  const std::string fp8 = error_of(dir_ / "exp.yaml", {"train.precision=fp8"});
  EXPECT_NE(fp8.find("train.precision: must be fp32, bf16 or fp16, got 'fp8'"), std::string::npos) << fp8;
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"train.fp16_init_scale=0"}).find("train.fp16_init_scale"), std::string::npos);
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"train.fp16_scale_window=0"}).find("train.fp16_scale_window"),
            std::string::npos);
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"train.fp16_scale_window=3000000000"}).find("at most 2147483647"),
            std::string::npos);  // ATen's streak is an int32
  const std::string min_scale = error_of(dir_ / "exp.yaml", {"train.min_loss_scale=1e6"});  // above the start
  EXPECT_NE(min_scale.find("train.min_loss_scale: must be positive and at most train.fp16_init_scale"),
            std::string::npos) << min_scale;
  EXPECT_NO_THROW(load_config(dir_ / "exp.yaml", {"train.precision=fp16", "train.fp16_init_scale=128"}));
  // CUDA graphs: a GPU, fp32 or bf16
  const std::string graphs_cpu = error_of(dir_ / "exp.yaml", {"train.cuda_graphs=true", "train.device=cpu"});
  EXPECT_NE(graphs_cpu.find("train.cuda_graphs: needs a CUDA device"), std::string::npos) << graphs_cpu;
  const std::string graphs_fp16 = error_of(dir_ / "exp.yaml", {"train.cuda_graphs=true", "train.precision=fp16"});
  EXPECT_NE(graphs_fp16.find("train.cuda_graphs: needs precision fp32 or bf16"), std::string::npos) << graphs_fp16;
  EXPECT_NO_THROW(load_config(dir_ / "exp.yaml", {"train.cuda_graphs=true", "train.precision=bf16"}));
  const std::string graphs_recompute =
      error_of(dir_ / "exp.yaml", {"train.cuda_graphs=true", "train.activation_checkpointing=layers"});
  EXPECT_NE(graphs_recompute.find("train.cuda_graphs: cannot be on together"), std::string::npos) << graphs_recompute;
  EXPECT_NE(graphs_recompute.find("train.activation_checkpointing"), std::string::npos) << graphs_recompute;
  const std::string recompute_what = error_of(dir_ / "exp.yaml", {"train.activation_checkpointing=true"});
  EXPECT_NE(recompute_what.find("train.activation_checkpointing: must be none, attention, layers or bias, got 'true'"),
            std::string::npos) << recompute_what;
  // a dropout of 1 zeroes every output
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"model.dropout=1"}).find("model.dropout: must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"model.attention_dropout=1.0"}).find("model.attention_dropout"),
            std::string::npos);
  // T5's own rules, on the key at fault
  const std::string buckets = error_of(dir_ / "exp.yaml", {"model.attention.method=t5_bias", "model.attention.t5_buckets=3"});
  EXPECT_NE(buckets.find("model.attention.t5_buckets: must be at least 4, got 3"), std::string::npos) << buckets;
  const std::string reach = error_of(dir_ / "exp.yaml", {"model.attention.method=t5_bias", "model.attention.t5_max_distance=8"});
  EXPECT_NE(reach.find("model.attention.t5_max_distance: must exceed t5_buckets / 4 = 8"), std::string::npos) << reach;
  // DeBERTa's log buckets: at least 4, ending (k) beyond the exact ones (b / 2)
  const std::string few = error_of(dir_ / "exp.yaml", {"model.attention.method=deberta", "model.attention.position_buckets=3"});
  EXPECT_NE(few.find("model.attention.position_buckets: must be 0 (clipped distances) or an even number of at least 4, got 3"),
            std::string::npos) << few;
  const std::string odd = error_of(dir_ / "exp.yaml", {"model.attention.method=deberta", "model.attention.position_buckets=9"});
  EXPECT_NE(odd.find("an even number of at least 4, got 9"), std::string::npos) << odd;
  const std::string end = error_of(dir_ / "exp.yaml", {"model.attention.method=deberta", "model.attention.position_buckets=256",
                                                        "model.attention.max_relative=128"});
  EXPECT_NE(end.find("model.attention.max_relative: where the log buckets end, k = 128, must exceed position_buckets / 2 = 128"),
            std::string::npos) << end;
  const std::string p2c = error_of(dir_ / "exp.yaml", {"model.attention.method=deberta", "model.attention.deberta_p2c=hf"});
  EXPECT_NE(p2c.find("model.attention.deberta_p2c: must be paper or microsoft, got 'hf'"), std::string::npos) << p2c;
  const std::string wide = error_of(dir_ / "exp.yaml", {"model.attention.method=deberta", "model.attention.position_buckets=1024"});
  EXPECT_NE(wide.find("model.attention.position_buckets: the exact buckets (512 a side) must end before the log ones"),
            std::string::npos) << wide;
}

TEST_F(ConfigTest, ErrorsPointAtTheFileThatSetTheKey) {
  auto f = write("bad_heads.yaml", "extends: exp.yaml\nmodel:\n  heads: 7\n");
  const std::string e = error_of(f);
  EXPECT_EQ(e.rfind("", 0), 0u);
  EXPECT_NE(e.find("bad_heads.yaml:3: model.heads"), std::string::npos) << e;
}

TEST_F(ConfigTest, FileProblems) {
  EXPECT_NE(error_of(dir_ / "nope.yaml").find("config file not found"), std::string::npos);
  auto cyc = write("cycle_a.yaml", "extends: cycle_b.yaml\n");
  write("cycle_b.yaml", "extends: cycle_a.yaml\n");
  EXPECT_NE(error_of(cyc).find("extends cycle"), std::string::npos) << error_of(cyc);
  auto missing_base = write("orphan.yaml", "extends: gone.yaml\n");
  EXPECT_NE(error_of(missing_base).find("gone.yaml"), std::string::npos);
  auto syntax = write("syntax.yaml", "model:\n  hidden: [1, 2\n");
  EXPECT_NE(error_of(syntax).find("YAML syntax error"), std::string::npos) << error_of(syntax);
  EXPECT_NE(error_of(dir_ / "exp.yaml", {"novalue"}).find("expected key.path=value"), std::string::npos);
}

TEST_F(ConfigTest, DumpedConfigReloadsIdentically) {
  const Config c =
      load_config(dir_ / "exp.yaml", {"train.lr=3.3e-5", "model.attention.max_relative=16", "model.dropout=0.1"});
  const std::string yaml = rpe::to_yaml(c);
  const Config back = rpe::config_from_yaml(yaml, "dumped");
  EXPECT_EQ(rpe::to_yaml(back), yaml);
  EXPECT_EQ(back.train.lr, 3.3e-5);  // exactly: the shortest text that reads back as the same double
  EXPECT_EQ(back.model.attention.max_relative, 16);
  // Numbers as people write them in config.yaml; with 17 digits in the flat text, as the
  // reproduction scripts' stamps of earlier runs hold them.
  EXPECT_NE(yaml.find("  lr: 3.3e-05\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("  dropout: 0.1\n"), std::string::npos) << yaml;
  const std::string flat = rpe::to_flat_text(c);
  EXPECT_NE(flat.find("train.lr: 3.3000000000000003e-05\n"), std::string::npos) << flat;
  EXPECT_EQ(rpe::to_flat_text(back), flat);
  // Values no shorter text holds read back bit for bit too.
  const Config odd = load_config(dir_ / "exp.yaml", {"train.lr=0.1234567890123456789", "train.adam_eps=5e-324"});
  const Config odd_back = rpe::config_from_yaml(rpe::to_yaml(odd), "dumped");
  EXPECT_EQ(odd_back.train.lr, odd.train.lr);
  EXPECT_EQ(odd_back.train.adam_eps, 5e-324);
}

// train.decay_position_params (train/optim.h): off unless set, read from a file or --set,
// written by dump-config and read back; anything but a bool is a one-line error naming the key.
TEST_F(ConfigTest, DecayPositionParamsParsesAndRoundTrips) {
  EXPECT_FALSE(load_config(dir_ / "exp.yaml").train.decay_position_params);
  const Config c = load_config(dir_ / "exp.yaml", {"train.decay_position_params=true"});
  EXPECT_TRUE(c.train.decay_position_params);
  const std::string yaml = rpe::to_yaml(c);
  EXPECT_NE(yaml.find("  decay_position_params: true\n"), std::string::npos) << yaml;
  EXPECT_TRUE(rpe::config_from_yaml(yaml, "dumped").train.decay_position_params);
  EXPECT_NE(rpe::to_flat_text(c).find("train.decay_position_params: true\n"), std::string::npos);
  auto f = write("decay.yaml", "extends: exp.yaml\ntrain:\n  decay_position_params: false\n");
  EXPECT_FALSE(load_config(f, {}).train.decay_position_params);
  expect_one_line_ = true;
  const std::string e = error_of(dir_ / "exp.yaml", {"train.decay_position_params=0.01"});
  EXPECT_NE(e.find("train.decay_position_params: expected true or false, got '0.01'"), std::string::npos) << e;
  const std::string in_file = error_of(write("bad.yaml", "extends: exp.yaml\ntrain:\n  decay_position_params: all\n"));
  EXPECT_NE(in_file.find("bad.yaml:3"), std::string::npos) << in_file;
  EXPECT_NE(in_file.find("train.decay_position_params: expected true or false, got 'all'"), std::string::npos) << in_file;
}

TEST_F(ConfigTest, ShippedConfigsLoad) {
  const fs::path root = rpe::test::source_dir();
  int loaded = 0;
  // configs/pretrain holds one file per scale; the presets are <scale>_<method> (test_presets.cpp).
  for (const auto& e : fs::directory_iterator(root / "configs" / "pretrain")) {
    if (e.path().extension() != ".yaml") continue;
    for (const char* method : {"absolute", "m4"}) {
      const fs::path preset = e.path().parent_path() / (e.path().stem().string() + "_" + method + ".yaml");
      EXPECT_NO_THROW(load_config(preset)) << preset;
      ++loaded;
    }
  }
  EXPECT_GE(loaded, 2);
}

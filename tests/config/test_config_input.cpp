// What a config file or a --set may contain: integers with a leading zero are refused
// (yaml-cpp read them as octal, silently).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config_fixture.h"

using rpe::Config;
using rpe::load_config;

namespace {

class ConfigInput : public rpe::test::ConfigFixture {
 protected:
  void SetUp() override {
    make_dir("rpe_config_input_");
    expect_one_line_ = true;
    write("cfg.yaml",
          "model:\n  hidden: 32\n  layers: 2\n  heads: 4\n  attention:\n    method: m4\n"
          "data:\n  train_files: [a.txt]\n"
          "train:\n  max_steps: 10\n  eval_every: 5\n  save_every: 5\n");
  }
  std::string set_error(const std::string& set) { return error_of(dir_ / "cfg.yaml", {set}); }
};

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << "in: " << (text)

TEST_F(ConfigInput, LeadingZeroIntegersAreRefusedNotReadAsOctal) {
  // Before: hidden 032 loaded as 26 and max_steps 010 as 8.
  const auto f = write("octal.yaml", "extends: cfg.yaml\nmodel:\n  hidden: 032\n");
  EXPECT_EQ(error_of(f),
            f.string() + ":3: model.hidden: 032: a leading zero is ambiguous (octal in YAML 1.1); write 32");
  const auto g = write("steps.yaml", "extends: cfg.yaml\ntrain:\n  max_steps: 010\n");
  EXPECT_HAS(error_of(g), "steps.yaml:3: train.max_steps: 010: a leading zero is ambiguous");
  EXPECT_HAS(set_error("model.hidden=032"), "model.hidden: 032: a leading zero is ambiguous (octal in YAML 1.1); write 32");
  EXPECT_HAS(set_error("train.seed=-007"), "train.seed: -007: a leading zero is ambiguous (octal in YAML 1.1); write -7");
  EXPECT_HAS(set_error("train.max_steps=09"), "train.max_steps: 09: a leading zero is ambiguous");  // not even octal
  EXPECT_HAS(set_error("train.lr=0001"), "train.lr: 0001: a leading zero is ambiguous");           // a double key
  // Zero itself, decimals and exponents with a leading 0, and hex read as before.
  const Config c = load_config(dir_ / "cfg.yaml", {"train.warmup_steps=0", "train.lr=0.5", "train.weight_decay=0e0",
                                                   "model.hidden=0x20", "train.min_lr_ratio=0.0"});
  EXPECT_EQ(c.train.warmup_steps, 0);
  EXPECT_DOUBLE_EQ(c.train.lr, 0.5);
  EXPECT_DOUBLE_EQ(c.train.weight_decay, 0.0);
  EXPECT_EQ(c.model.hidden, 32);
}

}  // namespace

// What a config file or a --set may contain, and whom an error blames: integers with a
// leading zero, a second YAML document, a repeated key and bytes that are not UTF-8 are
// refused (each was read silently, as something else); an error caused by a --set names that
// --set, not the config file it overrides.
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
  EXPECT_EQ(set_error("model.hidden=032"),
            "--set model.hidden=032: model.hidden: 032: a leading zero is ambiguous (octal in YAML 1.1); write 32");
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

TEST_F(ConfigInput, ASecondYamlDocumentIsRefused) {
  // Before: the keys after `---` were dropped and the file loaded as its first document.
  const auto f = write("two.yaml", "extends: cfg.yaml\nmodel:\n  hidden: 32\n---\nmodel:\n  hidden: 64\n");
  EXPECT_EQ(error_of(f), f.string() +
                             ":4: a second YAML document (after ---): a config file holds one mapping; put its keys "
                             "in the first, or in a file named by extends:");
  // An empty document after a trailing `---` holds nothing to drop.
  const auto g = write("trailing.yaml", "extends: cfg.yaml\nmodel:\n  hidden: 64\n---\n# nothing here\n");
  EXPECT_EQ(load_config(g).model.hidden, 64);
  const auto e = write("empty_then.yaml", "extends: cfg.yaml\n---\n---\nmodel:\n  hidden: 64\n");
  EXPECT_HAS(error_of(e), "empty_then.yaml:3: a second YAML document");
  // A `---` that opens the only document is plain YAML.
  const auto h = write("opened.yaml", "---\nextends: cfg.yaml\nmodel:\n  hidden: 64\n");
  EXPECT_EQ(load_config(h).model.hidden, 64);
}

// yaml-cpp's LoadAll never returned on this input (found by scripts/fuzz_readers.sh); the
// documents are told apart in the text instead, and it is one error like any other.
TEST_F(ConfigInput, AnInputThatHungYamlCppLoadAllIsAnError) {
  const auto f = write("hang.yaml",
                       "# Huang et al. 2020 method 2 (eq. 13): headse_ij = (q_      # clipping distance k (2k + 1 "
                       "scalars); 0 = max_position - 1hare_acrosmodel.attention.madx_rs_heads: false # true: one table "
                       "per layer instead of one per head\n   !add_absolute: ,alngs to the input\n");
  EXPECT_HAS(error_of(f), "hang.yaml: the top level must be a mapping of sections");
  // "--- {...}" puts a document's content on its marker line; "..." ends a document.
  EXPECT_HAS(error_of(write("inline.yaml", "extends: cfg.yaml\n--- {model: {hidden: 64}}\n")), "inline.yaml:2: a second");
  EXPECT_HAS(error_of(write("ended.yaml", "extends: cfg.yaml\n...\nmodel:\n  hidden: 64\n")), "ended.yaml:3: a second");
  EXPECT_HAS(error_of(write("empty_first.yaml", "---\n---\nextends: cfg.yaml\n")), "empty_first.yaml:2: a second");
}

TEST_F(ConfigInput, ARepeatedKeyIsRefused) {
  // Before: the last of the two won.
  const auto f = write("dup.yaml", "extends: cfg.yaml\nmodel:\n  hidden: 32\n  layers: 2\n  hidden: 64\n");
  EXPECT_EQ(error_of(f), f.string() +
                             ":5: model.hidden: duplicate key (first set at line 3); a key may appear once in a mapping");
  const auto g = write("dup_section.yaml", "extends: cfg.yaml\ntrain: {lr: 1.0e-4}\ntrain: {seed: 3}\n");
  EXPECT_HAS(error_of(g), "dup_section.yaml:3: train: duplicate key (first set at line 2)");
  EXPECT_EQ(set_error("model={hidden: 32, hidden: 64}"),
            "--set model={hidden: 32, hidden: 64}: model.hidden: duplicate key; a key may appear once in a mapping");
}

// Nested aliases: 10 levels of ten references each are 10^10 values in a few hundred bytes;
// walking them took 51 s at 8 levels (found by adversarial testing). Refused at once; a few
// aliases, as a config may use them, still load.
TEST_F(ConfigInput, NestedAliasesAreRefusedBeforeTheyExpand) {
  std::string text = "extends: cfg.yaml\nx0: &x0 [a, a, a, a, a, a, a, a, a, a]\n";
  for (int i = 1; i <= 10; ++i) {
    // append, not "literal" + std::string: GCC 12 warns falsely on that form (-Wstringop-overflow)
    const std::string name = std::to_string(i), previous = std::to_string(i - 1);
    text.append("x").append(name).append(": &x").append(name).append(" [");
    for (int j = 0; j < 10; ++j) text.append(j ? ", *x" : "*x").append(previous);
    text += "]\n";
  }
  const auto f = write("laughs.yaml", text);
  EXPECT_EQ(error_of(f), f.string() + ": more than 100000 values once its YAML aliases (*name) are expanded; a config "
                                      "holds a few hundred: write them out instead of nesting aliases");
  const auto ok = write("alias.yaml", "extends: cfg.yaml\ntrain: {warmup_steps: &w 10, log_every: *w}\n");
  EXPECT_EQ(error_of(ok), "");
}

// A key holding a control character ("hid\u0000den") cut the message at the NUL: named by line.
TEST_F(ConfigInput, AKeyWithAControlCharacterIsNamedByItsLine) {
  const auto f = write("nul_key.yaml", "extends: cfg.yaml\nmodel:\n  \"hid\\u0000den\": 3\n");
  EXPECT_EQ(error_of(f), f.string() + ":3: model: a key holds the control character 0 (keys are plain names)");
}

// A key that is a list or a mapping (YAML allows both) was read as "" and reported as
// "complex.yaml: : unknown key": named by its line, at every level and in a --set.
TEST_F(ConfigInput, AKeyThatIsNotAPlainNameIsNamedByItsLine) {
  const auto f = write("complex.yaml", "extends: cfg.yaml\n? [a, b]\n: 1\n");
  EXPECT_EQ(error_of(f), f.string() + ":2: a key is a list ([a, b]); keys must be plain names");
  const auto g = write("complex_map.yaml", "{a: 1}: 2\n");
  EXPECT_EQ(error_of(g), g.string() + ":1: a key is a mapping ({a: 1}); keys must be plain names");
  const auto h = write("complex_nested.yaml", "extends: cfg.yaml\nmodel:\n  attention:\n    [x]: 1\n");
  EXPECT_EQ(error_of(h), h.string() + ":4: model.attention: a key is a list ([x]); keys must be plain names");
  const auto e = write("empty_key.yaml", "extends: cfg.yaml\ntrain:\n  \"\": 3\n");
  EXPECT_EQ(error_of(e), e.string() + ":3: train: a key is empty; keys must be plain names");
  EXPECT_EQ(set_error("model={[a]: 1}"), "--set model={[a]: 1}: model: a key is a list ([a]); keys must be plain names");
}

TEST_F(ConfigInput, ConfigTextMustBeUtf8) {
  // Before: run.name "caf\xe9" (Latin-1) became a run folder whose name broke JSON output.
  const auto f = write("latin1.yaml", "extends: cfg.yaml\nrun: {name: \"caf\xe9\"}\n");
  EXPECT_EQ(error_of(f), f.string() + ":2: not UTF-8 text (byte offset 34); save the file as UTF-8");
  EXPECT_EQ(set_error("run.name=caf\xe9"),
            "--set run.name=caf...: not UTF-8 text (byte offset 12 of the assignment)");
  // The same name in UTF-8 loads, from a file and from a --set.
  const auto g = write("utf8.yaml", "extends: cfg.yaml\nrun: {name: \"caf\xc3\xa9\"}\n");
  EXPECT_EQ(load_config(g).run.name, "caf\xc3\xa9");
  EXPECT_EQ(load_config(dir_ / "cfg.yaml", {"run.name=caf\xc3\xa9"}).run.name, "caf\xc3\xa9");
}

TEST_F(ConfigInput, SetErrorsNameTheSetNotTheConfigFile) {
  // Before, each of these blamed cfg.yaml (some with a line of it that was never wrong).
  EXPECT_EQ(set_error("train.save_every=-1"),
            "--set train.save_every=-1: train.save_every: must be >= 0 (0 = only at the end), got -1");
  EXPECT_HAS(set_error("nosuch.key=1"), "--set nosuch.key=1: nosuch: unknown key (valid keys here: data, finetune");
  EXPECT_EQ(set_error("model..hidden=32"), "--set model..hidden=32: empty key segment in 'model..hidden'");
  EXPECT_HAS(set_error(".x=1"), "--set .x=1: empty key segment");
  EXPECT_HAS(set_error("model.hidden.x=3"), "--set model.hidden.x=3: model.hidden: expected an integer");
  EXPECT_HAS(set_error("model.nosuch=1"), "--set model.nosuch=1: model.nosuch: unknown key");
  EXPECT_EQ(set_error("data.train_files="),
            "--set data.train_files=: data.train_files: entry 1 is an empty file name");
  EXPECT_HAS(set_error("data.valid_files=[b.txt, '']"), "data.valid_files: entry 2 is an empty file name");
  // A whole section replaced by a --set: its keys are the --set's too.
  EXPECT_HAS(set_error("train={max_steps: 5, eval_every: -2}"),
             "--set train={max_steps: 5, eval_every: -2}: train.eval_every: must be >= 0");
  // Control characters in the assignment are escaped so the message stays one line.
  EXPECT_HAS(set_error("model.hidden=\"1\n2\""), "--set model.hidden=\"1\\x0a2\": model.hidden: expected an integer");
  // What the file sets wrongly is still the file's, at its line.
  const auto f = write("bad_save.yaml", "extends: cfg.yaml\ntrain:\n  save_every: -1\n");
  EXPECT_EQ(error_of(f), f.string() + ":3: train.save_every: must be >= 0 (0 = only at the end), got -1");
  // A later --set of the same key takes over the blame from an earlier one.
  EXPECT_HAS(error_of(dir_ / "cfg.yaml", {"model.hidden=x", "model.hidden=y"}), "--set model.hidden=y: model.hidden:");
}

// A rule between two keys broken by a --set of one of them begins with that --set, and names
// where the other key stands: before, a --set of mask_token_prob was blamed on the line of
// cfg.yaml's `data:` section (random_token_prob at its default) or of random_token_prob.
TEST_F(ConfigInput, ARuleBetweenTwoKeysNamesTheSetThatBrokeIt) {
  EXPECT_EQ(set_error("data.mask_token_prob=0.95"),
            "--set data.mask_token_prob=0.95: data.random_token_prob: mask_token_prob + random_token_prob must not "
            "exceed 1 (data.random_token_prob at its default, data.mask_token_prob from --set data.mask_token_prob=0.95)");
  const auto f = write("preset.yaml", "extends: cfg.yaml\ndata:\n  random_token_prob: 0.1\n");
  EXPECT_EQ(error_of(f, {"data.mask_token_prob=0.95"}),
            "--set data.mask_token_prob=0.95: data.random_token_prob: mask_token_prob + random_token_prob must not "
            "exceed 1 (data.random_token_prob from " + f.string() + ":3, data.mask_token_prob from --set "
            "data.mask_token_prob=0.95)");
  // The key itself set (by the file or a --set): reported at it, as before.
  EXPECT_EQ(error_of(f, {"data.random_token_prob=0.5"}),
            "--set data.random_token_prob=0.5: data.random_token_prob: mask_token_prob + random_token_prob must not "
            "exceed 1 (data.mask_token_prob at its default)");
  const auto g = write("both.yaml", "extends: preset.yaml\ndata:\n  mask_token_prob: 0.95\n");
  EXPECT_EQ(error_of(g), f.string() + ":3: data.random_token_prob: mask_token_prob + random_token_prob must not "
                                      "exceed 1 (data.mask_token_prob from " + g.string() + ":3)");
}

// finetune's subcommand names the task: it refuses a --set that would, directly or through a
// mapping over the section (`finetune={task: x}` slipped past a check of the prefix alone).
TEST(AssignmentSets, NamesTheKeyOrAMappingThatHoldsIt) {
  using rpe::assignment_sets;
  EXPECT_TRUE(assignment_sets("finetune.task=mrpc", "finetune.task"));
  EXPECT_TRUE(assignment_sets("finetune={task: mrpc, lr: 1e-5}", "finetune.task"));
  EXPECT_TRUE(assignment_sets("finetune={task: {}}", "finetune.task"));
  EXPECT_TRUE(assignment_sets("model={attention: {method: m4}}", "model.attention.method"));
  EXPECT_TRUE(assignment_sets("model.attention={method: m4}", "model.attention.method"));
  EXPECT_FALSE(assignment_sets("finetune={lr: 1e-5}", "finetune.task"));
  EXPECT_FALSE(assignment_sets("finetune.tasks=x", "finetune.task"));   // another key, prefixed alike
  EXPECT_FALSE(assignment_sets("finetune.tas=x", "finetune.task"));
  EXPECT_TRUE(assignment_sets("finetune.task.x=1", "finetune.task"));   // makes it a mapping
  EXPECT_FALSE(assignment_sets("finetune=[task]", "finetune.task"));
  EXPECT_FALSE(assignment_sets("finetune={task: [", "finetune.task"));  // unparsable: load_config says so
  EXPECT_FALSE(assignment_sets("finetune.task", "finetune.task"));      // no '='
  EXPECT_FALSE(assignment_sets("model={attention: 3}", "model.attention.method"));
}

}  // namespace

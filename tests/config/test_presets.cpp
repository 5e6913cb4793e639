// Presets composed from a scale and a method (configs/pretrain/README.md) and config names
// resolved along the search path (config/config_names.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include "config/config_fixture.h"
#include "config/config_names.h"
#include "model/attention/registry.h"
#include "test_paths.h"

using namespace rpe;
namespace fs = std::filesystem;

namespace {

const fs::path& pretrain_dir() {
  static const fs::path dir = fs::path(rpe::test::source_dir()) / "configs/pretrain";
  return dir;
}

// Runs `body` with the working directory set to `dir`, restoring it afterwards.
template <class F> void in_dir(const fs::path& dir, F body) {
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  try {
    body();
  } catch (...) {
    fs::current_path(before);
    throw;
  }
  fs::current_path(before);
}

}  // namespace

// Outside the anonymous namespace: in a unity batch GCC warns of a test class (external linkage)
// derived from a fixture of internal linkage (-Wsubobject-linkage).
class Presets : public rpe::test::ConfigFixture {
 protected:
  void SetUp() override { make_dir("rpe_presets_"); }
};

TEST_F(Presets, EveryScaleTimesEveryMethodComposes) {
  // Sizes and schedules as the scale files document them (configs/model, configs/train).
  struct Scale {
    const char* name;
    int64_t hidden, layers, max_seq_len, batch_size;
  };
  for (const Scale s : {Scale{"tiny", 128, 2, 128, 32}, Scale{"mini", 256, 4, 128, 128}, Scale{"base", 768, 12, 512, 160}}) {
    for (const auto& method : attention_method_names()) {
      SCOPED_TRACE(std::string(s.name) + "_" + method);
      const Config c = load_config(pretrain_dir() / (std::string(s.name) + "_" + method + ".yaml"));
      EXPECT_EQ(c.model.attention.method, method);
      EXPECT_EQ(c.run.name, std::string(s.name) + "_" + method);
      EXPECT_EQ(c.model.hidden, s.hidden);
      EXPECT_EQ(c.model.layers, s.layers);
      EXPECT_EQ(c.data.max_seq_len, s.max_seq_len);
      EXPECT_EQ(c.train.batch_size, s.batch_size);
    }
  }
  // The method's fragment is read: its non-default comments' values come through.
  const Config xl = load_config(pretrain_dir() / "tiny_transformer_xl.yaml", {"model.attention.xl_uv_bias=false"});
  EXPECT_FALSE(xl.model.attention.xl_uv_bias);  // --set still wins over the composed preset
  EXPECT_EQ(load_config(pretrain_dir() / "mini_t5_bias.yaml").model.attention.t5_buckets, 32);
  EXPECT_EQ(load_config(pretrain_dir() / "tiny_m4.yaml").data.train_files, std::vector<std::string>{"data/sample/corpus.txt"});
}

TEST_F(Presets, PaperNamesAndPlainNamesResolveLikeThePath) {
  const std::string base_m4 = to_yaml(load_config(pretrain_dir() / "base_m4.yaml"));
  // From a folder with no configs/: the binary's repository is searched (build/.. here).
  in_dir(dir_, [&] {
    EXPECT_EQ(to_yaml(load_config("base_method4.yaml")), base_m4);
    EXPECT_EQ(to_yaml(load_config("base_m4")), base_m4);
    EXPECT_EQ(load_config("tiny_method1.yaml").run.name, "tiny_m1");
  });
  in_dir(rpe::test::source_dir(), [&] { EXPECT_EQ(to_yaml(load_config("base_method4.yaml")), base_m4); });
}

TEST_F(Presets, WorkingDirectoryComesFirst) {
  write("tiny_m4.yaml", "extends: " + (pretrain_dir() / "tiny.yaml").string() +
                            "\nmodel: {attention: {method: shaw}}\nrun: {name: mine}\n");
  in_dir(dir_, [&] {
    const Config c = load_config("tiny_m4.yaml");
    EXPECT_EQ(c.run.name, "mine");
    EXPECT_EQ(c.model.attention.method, "shaw");
  });
  const auto dirs = config_search_path();
  ASSERT_GE(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], fs::path("."));
  EXPECT_EQ(dirs[1], fs::path("configs/pretrain"));
  EXPECT_EQ(dirs[2], fs::path("configs/finetune"));
}

TEST_F(Presets, UnknownNamesSayWhereTheyWereLookedFor) {
  expect_one_line_ = true;
  in_dir(dir_, [&] {
    const std::string e = error_of("tiny_m9.yaml");
    EXPECT_NE(e.find("config file not found: tiny_m9.yaml (looked in ., configs/pretrain, configs/finetune"),
              std::string::npos)
        << e;
  });
  const std::string e = error_of(pretrain_dir() / "huge_m4.yaml");  // no huge.yaml scale
  EXPECT_NE(e.find("config file not found: "), std::string::npos) << e;
  // A scale file alone names no method.
  EXPECT_NE(error_of(pretrain_dir() / "tiny.yaml").find("model.attention.method: missing required key"),
            std::string::npos);
}

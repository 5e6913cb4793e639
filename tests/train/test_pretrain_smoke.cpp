// A short pretraining run on the generated sample corpus: the loss falls, the run
// folder holds what it should, and the run is deterministic for a fixed seed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "model/bert.h"
#include "train/trainer.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

rpe::Config smoke_config(const std::string& method) {
  const fs::path root = rpe::test::source_dir();
  rpe::Config cfg = rpe::load_config(root / "configs/pretrain/tiny_m4.yaml",
                                     {"model.attention.method=" + method, "model.layers=1", "model.hidden=64",
                                      "model.heads=2", "model.ffn=128", "data.max_seq_len=64",
                                      "train.batch_size=16", "train.max_steps=60", "train.warmup_steps=5",
                                      "train.log_every=10", "train.eval_every=0", "train.eval_batches=4",
                                      "train.device=cpu", "train.lr=2e-3"});
  cfg.data.train_files = {(root / "data/sample/corpus.txt").string()};
  return cfg;
}

std::vector<double> losses(const fs::path& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto row = nlohmann::json::parse(line);
    if (!row.contains("split")) out.push_back(row["loss"].get<double>());
  }
  return out;
}

fs::path fresh_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("rpe_smoke_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(PretrainSmoke, LossFallsAndRunFolderIsComplete) {
  const auto dir = fresh_dir("m4");
  const auto r = rpe::pretrain(smoke_config("m4"), dir, {});
  EXPECT_EQ(r.steps, 60);
  const auto l = losses(dir / "metrics.jsonl");
  ASSERT_EQ(l.size(), 6u);
  EXPECT_LT(l.back(), l.front() - 1.0) << "loss " << l.front() << " -> " << l.back();
  EXPECT_TRUE(std::isfinite(r.valid_loss));
  for (const char* f : {"config.yaml", "metrics.jsonl", "summary.json", "tokenizer.model", "checkpoints/latest"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  // The stored config is the resolved one and loads back.
  const auto stored = rpe::config_from_yaml(
      std::string(std::istreambuf_iterator<char>(std::ifstream(dir / "config.yaml").rdbuf()), {}), "config.yaml");
  EXPECT_EQ(stored.model.attention.method, "m4");
  EXPECT_GT(stored.model.vocab_size, 0);  // filled in from the tokenizer
  // summary.json counts the parameters (the cost table's columns): those of the stored model.
  rpe::BertModel model(stored.model);
  int64_t all = 0;
  for (const auto& p : model->parameters()) all += p.numel();
  const auto summary =
      nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(std::ifstream(dir / "summary.json").rdbuf()), {}));
  EXPECT_EQ(summary["parameters"].get<int64_t>(), all);
  EXPECT_EQ(summary["position_parameters"].get<int64_t>(), model->position_parameter_count());
  EXPECT_GT(model->position_parameter_count(), 0);  // m4's tables
  fs::remove_all(dir);
}

TEST(PretrainSmoke, SameSeedSameLosses) {
  auto cfg = smoke_config("absolute");
  cfg.train.max_steps = 20;
  const auto a = fresh_dir("det_a"), b = fresh_dir("det_b");
  rpe::pretrain(cfg, a, {});
  rpe::pretrain(cfg, b, {});
  const auto la = losses(a / "metrics.jsonl"), lb = losses(b / "metrics.jsonl");
  ASSERT_EQ(la.size(), 2u);
  EXPECT_EQ(la, lb);  // bitwise: same seed, same data order, same masks, one thread
  fs::remove_all(a);
  fs::remove_all(b);
}

// A carried build (ctest pack_build runs this from the packed copy) runs its own rpe-train, not
// the one at the path the tests were built at (test_paths.cpp).
TEST(TestPaths, TheCliIsTheOneBesideThisProgram) {
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path cli = rpe::test::train_binary();
  EXPECT_EQ(cli.parent_path(), self.parent_path());
  EXPECT_TRUE(std::filesystem::exists(cli)) << cli;
}

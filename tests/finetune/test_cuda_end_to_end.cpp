// The whole path on a GPU as the CLI runs it, small enough for gpu_check's test step (its *Cuda*
// filter): bf16 pretraining with held-out evaluations and checkpoints, SQuAD fine-tuning from it
// in bf16 (its dev passes, the span post-processing of device logits, the saved model), and
// predict from that model on the device, which must score what fine-tuning scored. Without it,
// these paths would first meet a GPU minutes into the mini Table 2 stage (scripts/gpu_table2.sh).
// Skips without CUDA; its twin runs the same on the CPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../dist/launch_ranks.h"

namespace rpe::test {
namespace {

nlohmann::json read_json(const fs::path& f) {
  std::ifstream in(f);
  return nlohmann::json::parse(in);
}

// The whole path in bf16 on `device` ("cuda" or "cpu"), run folders named after it.
void pretrain_finetune_and_predict(const std::string& device) {
  const fs::path pre = fresh_dir(device + "_e2e_pre"), ft = fresh_dir(device + "_e2e_ft");
  const std::string on_device = " --set train.device=" + device + " --set train.precision=bf16";
  const std::string pre_log = pre.string() + ".log", ft_log = ft.string() + ".log";
  ASSERT_EQ(run_shell(pretrain_cmd(pre, on_device + " --set train.max_steps=4 --set train.save_every=2 --set train.eval_every=2") +
                      " > " + pre_log + " 2>&1"),
            0)
      << slurp(pre_log);
  size_t evals = 0;
  for (const auto& row : read_jsonl(pre / "metrics.jsonl")) {
    const bool held_out = row.contains("split");
    evals += held_out ? 1 : 0;
    EXPECT_TRUE(std::isfinite(row["loss"].get<double>())) << row.dump();
  }
  EXPECT_GE(evals, 2u) << "held-out evaluations at steps 2 and 4";

  ASSERT_EQ(run_shell(finetune_cmd(pre, ft, on_device) + " > " + ft_log + " 2>&1"), 0) << slurp(ft_log);
  fs::path seed;
  for (const auto& e : fs::directory_iterator(ft))
    if (e.is_directory() && e.path().filename().string().rfind("seed", 0) == 0) seed = e.path();
  ASSERT_FALSE(seed.empty()) << slurp(ft_log);
  const auto results = read_json(seed / "results.json");
  const std::string dump = results.dump();
  ASSERT_NE(dump.find("\"f1\""), std::string::npos) << dump;

  // The saved model on the device again: the same answers to the questions fine-tuning scored
  // (finetune.max_eval_examples; predict answers the whole file).
  const fs::path out = ft / "predict" / "predictions.json";
  const std::string predict = train_binary() + " predict squad --device " + device + " --model " + (seed / "model").string() +
                              " --input " + source_dir() + "/data/sample/squad/dev-v1.1.json --out " + out.string();
  ASSERT_EQ(run_shell(predict + " > " + ft_log + ".predict 2>&1"), 0) << slurp(ft_log + ".predict");
  const auto again = read_json(out), scored = read_json(seed / "predictions.json");
  ASSERT_FALSE(scored.empty());
  for (const auto& [id, answer] : scored.items()) EXPECT_EQ(again.value(id, nlohmann::json()), answer) << id;
}

TEST(EndToEnd, CudaPretrainFineTuneAndPredict) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  pretrain_finetune_and_predict("cuda");
}

// The same harness on the CPU (its bf16 autocast), where a bug in it costs no GPU time.
TEST(EndToEnd, PretrainFineTuneAndPredictInBf16OnTheCpu) { pretrain_finetune_and_predict("cpu"); }

}  // namespace
}  // namespace rpe::test

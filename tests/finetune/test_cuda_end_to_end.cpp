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
#include "eval/results.h"
#include "eval/tables.h"
#include "finetune/finetune.h"
#include "util/errors.h"

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

// finetune.results_file as a bare name ("r.jsonl", no folder part) is a file in the working
// directory: it was refused with "cannot create its folder: No such file or directory", an error
// code its existence checks had left set and no folder creation cleared.
TEST(FinetuneOutputs, AResultsFileWithoutAFolderPartIsReadied) {
  const fs::path dir = fresh_dir("bare_results_file"), was = fs::current_path();
  fs::current_path(dir);
  EXPECT_NO_THROW(finetune::ready_results_file("r.jsonl"));
  fs::current_path(was);
  ASSERT_TRUE(fs::is_regular_file(dir / "r.jsonl"));
  EXPECT_EQ(fs::file_size(dir / "r.jsonl"), 0u);
  fs::create_directories(dir / "folder");  // the refusals still stand
  EXPECT_THROW(finetune::check_results_file(dir / "folder"), UserError);
  std::ofstream(dir / "other.txt") << "not a results line\n";
  EXPECT_THROW(finetune::check_results_file(dir / "other.txt"), UserError);
}

// An existing run folder is refused before the inputs are read and tokenized (minutes on the full
// SQuAD): here the training file is missing too, and the folder is what the one line names.
TEST(FinetuneOutputs, AnExistingRunFolderIsRefusedBeforeTheInputsAreRead) {
  const fs::path ft = fresh_dir("ft_exists"), log = ft.string() + ".log";
  std::ofstream(ft / "finetune.log") << "an earlier run\n";
  const int rc = run_shell(finetune_cmd(tiny_pretrained_run(), ft, "--set finetune.train_file=" + (ft / "missing.json").string()) +
                           " > " + log.string() + " 2>&1");
  EXPECT_EQ(rc, 2) << slurp(log);
  EXPECT_NE(slurp(log).find("already exists"), std::string::npos) << slurp(log);
  EXPECT_EQ(slurp(log).find("missing.json"), std::string::npos) << slurp(log);
}


// The user audit's case: seeds 1 and 2 into one folder, then seed 1 again with --overwrite (that
// deletes seed2/): the results file keeps all their lines, and Table 2 pooled the new seed 1
// with the deleted seed 2 ("n=2"). The lines of the replaced run are older (run_started).
TEST(FinetuneOutputs, ARunReplacedByOverwriteLeavesTheTables) {
  const fs::path ft = fresh_dir("ft_overwritten"), results = ft.string() + ".jsonl", log = ft.string() + ".log";
  fs::remove(results);
  const std::string to = " --set finetune.results_file=" + results.string();
  ASSERT_EQ(run_shell(finetune_cmd(tiny_pretrained_run(), ft, "--seeds 1,2" + to) + " > " + log.string() + " 2>&1"), 0)
      << slurp(log);
  ASSERT_EQ(run_shell(finetune_cmd(tiny_pretrained_run(), ft, "--seeds 1 --overwrite --set train.lr=1e-4" + to) + " > " +
                      log.string() + " 2>&1"),
            0)
      << slurp(log);
  EXPECT_FALSE(fs::exists(ft / "seed2"));
  const auto rows = eval::read_results(results);
  ASSERT_EQ(rows.size(), 6u);  // 2 seeds x (exact, f1), then 1 x (exact, f1)
  EXPECT_LT(rows[0].run_started, rows[5].run_started);
  EXPECT_EQ(rows[0].run_dir, rows[5].run_dir);
  // The checkpoint --init of the run folder took, its newest (the tiny run's step 2).
  EXPECT_EQ(rows[0].pretrain_checkpoint, "step_00000002.pt");
  std::vector<std::string> notes;
  const auto kept = eval::current_rows(rows, notes);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].seed, 1);
  EXPECT_EQ(kept[0].run_started, rows[4].run_started);
  int cells = 0;  // EM and F1 of the one row of ours
  for (const auto& j : eval::render_tables(rows, {"2"}).json)
    if (j["method"] == kept[0].method) {
      EXPECT_EQ(j["n"], 1) << j.dump();
      ++cells;
    }
  EXPECT_EQ(cells, 2);
}

// Options fine-tuning does not act on, and a start model short of its pretraining, are said:
// train.time_limit_min (pretraining's) was ignored silently, and --init of a run folder without
// summary.json (a pretraining stopped at step 92 of 2000) took its newest checkpoint unsaid.
TEST(FinetuneOutputs, APretrainingOnlyOptionAndAnUnfinishedStartRunAreWarned) {
  const fs::path pre = fresh_dir("unfinished_pre"), ft = fresh_dir("unfinished_ft"), log = ft.string() + ".log";
  fs::copy(tiny_pretrained_run(), pre, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  ASSERT_TRUE(fs::remove(pre / "summary.json"));
  ASSERT_EQ(run_shell(finetune_cmd(pre, ft, "--overwrite --set train.time_limit_min=5 --set finetune.results_file=" + (ft / "r.jsonl").string()) +
                      " > " + log.string() + " 2>&1"),
            0)
      << slurp(log);
  const std::string text = slurp(log);
  EXPECT_NE(text.find("train.time_limit_min 5 applies to pretraining only"), std::string::npos) << text;
  EXPECT_NE(text.find("--init " + pre.string() + ": its pretraining has not finished (no summary.json): fine-tuning from its "
                      "newest checkpoint, step 2 of 2 ("),
            std::string::npos)
      << text;
  // A finished run: no such warning.
  const fs::path ft2 = fresh_dir("finished_ft");
  ASSERT_EQ(run_shell(finetune_cmd(tiny_pretrained_run(), ft2, "--overwrite --set finetune.results_file=" + (ft2 / "r.jsonl").string()) +
                      " > " + log.string() + " 2>&1"),
            0)
      << slurp(log);
  EXPECT_EQ(slurp(log).find("has not finished"), std::string::npos) << slurp(log);
  EXPECT_EQ(slurp(log).find("time_limit_min"), std::string::npos) << slurp(log);
}

}  // namespace
}  // namespace rpe::test

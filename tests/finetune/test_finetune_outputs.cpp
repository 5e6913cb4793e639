// What fine-tuning writes and where (finetune/finetune.h): the results file readied before the
// inputs are read, an existing run folder refused first, the lines of a run replaced by
// --overwrite left out of the tables, the dev rows of metrics.jsonl, and the options and start
// models it warns about.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../dist/launch_ranks.h"
#include "eval/glue_metrics.h"
#include "eval/results.h"
#include "eval/tables.h"
#include "finetune/finetune.h"
#include "finetune/glue_task.h"
#include "util/errors.h"

namespace rpe::test {
namespace {
namespace fs = std::filesystem;

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

// STS-B's predictions file gives the metrics results.json has: written to 4 decimals, a model
// whose scores lie close together (early in training, a small model) had its Pearson and Spearman
// from the file differ in the first digit (1.49 against 1.71) from those it reported.
TEST(FinetuneOutputs, StsbPredictionsFileGivesTheReportedMetrics) {
  std::vector<double> pred, gold;
  for (int i = 0; i < 200; ++i) {
    gold.push_back(5.0 * (i % 17) / 16.0);
    pred.push_back(static_cast<double>(static_cast<float>(2.5 + 1e-4 * (i % 17) + 3e-5 * std::sin(i))));  // a float's values
  }
  const fs::path file = fresh_dir("stsb_predictions") / "predictions_dev.tsv";
  finetune::write_glue_predictions(file, {}, pred);
  std::ifstream in(file);
  std::string header, index, value;
  std::getline(in, header);
  ASSERT_EQ(header, "index\tprediction");
  std::vector<double> read;
  while (std::getline(in, index, '\t') && std::getline(in, value)) read.push_back(std::stod(value));
  ASSERT_EQ(read.size(), pred.size());
  EXPECT_EQ(read, pred);
  const auto reported = eval::glue_task_metrics("stsb", pred, gold), from_file = eval::glue_task_metrics("stsb", read, gold);
  for (const auto& [k, v] : reported) EXPECT_DOUBLE_EQ(from_file.at(k), v) << k;
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

// Each dev row of a seed's metrics.jsonl says where the training stood, as its training rows do:
// the tokens of its step's training row, and a training time from that row's on (the final
// evaluation's: where training ended). The rows had the step and the scores alone.
TEST(FinetuneOutputs, DevRowsSayTokensAndTimeAsTrainingRowsDo) {
  const fs::path ft = fresh_dir("dev_rows_ft"), log = ft.string() + ".log";
  ASSERT_EQ(run_shell(finetune_cmd(tiny_pretrained_run(), ft, "--overwrite --seeds 1 --set train.log_every=1 --set "
                                   "finetune.eval_every=2 --set finetune.results_file=" + (ft / "r.jsonl").string()) +
                      " > " + log.string() + " 2>&1"),
            0)
      << slurp(log);
  std::map<int64_t, nlohmann::json> training;
  std::vector<nlohmann::json> dev;
  for (const auto& row : read_jsonl(ft / "seed1" / "metrics.jsonl"))
    if (row.contains("split")) dev.push_back(row);
    else if (row.contains("loss")) training[row["step"].get<int64_t>()] = row;
  ASSERT_GE(dev.size(), 2u);  // every 2 steps, and the final evaluation
  for (const auto& row : dev) {
    SCOPED_TRACE(row.dump());
    const auto& at = training.at(row["step"].get<int64_t>());
    EXPECT_GT(row.at("tokens_seen").get<int64_t>(), 0);
    EXPECT_EQ(row.at("tokens_seen"), at["tokens_seen"]);
    EXPECT_GE(row.at("elapsed_s").get<double>(), at["elapsed_s"].get<double>());
  }
  EXPECT_EQ(dev.back()["step"], training.rbegin()->first);
}

// A pretraining run stopped by train.time_limit_min (exit 75, no summary.json) after step
// `stopped_at` of `steps` (a limit of 6 ms, past by the first step).
fs::path time_limited_run(int64_t stopped_at, int64_t steps) {
  const fs::path dir = fresh_dir("time_limited_" + std::to_string(stopped_at) + "_of_" + std::to_string(steps));
  const std::string log = dir.string() + ".log";
  EXPECT_EQ(run_shell(pretrain_cmd(dir, "--set train.max_steps=" + std::to_string(steps) +
                                            " --set train.time_limit_min=0.0001") + " > " + log + " 2>&1"),
            75)
      << slurp(log);
  EXPECT_NE(slurp(dir / "train.log").find("after step " + std::to_string(stopped_at) + " of " + std::to_string(steps)),
            std::string::npos) << slurp(log);
  EXPECT_FALSE(fs::exists(dir / "summary.json"));
  return dir;
}

// A start model short of its pretraining is said: --init of a run folder without summary.json (a
// pretraining stopped at step 92 of 2000) took its newest checkpoint unsaid. train.time_limit_min
// was pretraining's only (and warned about); fine-tuning honours it now (test_finetune_resume.cpp),
// and a limit the run stays within changes nothing.
TEST(FinetuneOutputs, AnUnfinishedStartRunIsWarned) {
  const fs::path pre = time_limited_run(1, 3), ft = fresh_dir("unfinished_ft"), log = ft.string() + ".log";
  ASSERT_EQ(run_shell(finetune_cmd(pre, ft, "--overwrite --set train.time_limit_min=5 --set finetune.results_file=" + (ft / "r.jsonl").string()) +
                      " > " + log.string() + " 2>&1"),
            0)
      << slurp(log);
  const std::string text = slurp(log);
  EXPECT_EQ(text.find("time_limit_min"), std::string::npos) << text;
  EXPECT_NE(text.find("--init " + pre.string() + ": its pretraining has not finished (no summary.json): fine-tuning from its "
                      "newest checkpoint, step 1 of 3 ("),
            std::string::npos)
      << text;
  // A finished run: no such warning.
  const fs::path ft2 = fresh_dir("finished_ft");
  ASSERT_EQ(run_shell(finetune_cmd(tiny_pretrained_run(), ft2, "--overwrite --set finetune.results_file=" + (ft2 / "r.jsonl").string()) +
                      " > " + log.string() + " 2>&1"),
            0)
      << slurp(log);
  EXPECT_EQ(slurp(log).find("its pretraining"), std::string::npos) << slurp(log);
  EXPECT_EQ(slurp(log).find("time_limit_min"), std::string::npos) << slurp(log);
}

// A pretraining stopped at the time limit after its last step has written its final checkpoint:
// it trained every step, and lacks only its final held-out evaluation and summary.json (the stop
// comes before them). --init of it said "has not finished ... step 1 of 1"; now what is missing.
TEST(FinetuneOutputs, AStartRunStoppedAfterItsLastStepIsWarnedOfItsMissingEvaluationOnly) {
  const fs::path pre = time_limited_run(1, 1), ft = fresh_dir("all_steps_ft"), log = ft.string() + ".log";
  ASSERT_TRUE(fs::exists(pre / "checkpoints" / "step_00000001.pt"));
  ASSERT_EQ(run_shell(finetune_cmd(pre, ft, "--overwrite --set finetune.results_file=" + (ft / "r.jsonl").string()) + " > " +
                      log.string() + " 2>&1"),
            0)
      << slurp(log);
  const std::string text = slurp(log);
  EXPECT_EQ(text.find("not finished"), std::string::npos) << text;
  EXPECT_NE(text.find("--init " + pre.string() + ": its pretraining trained all its steps (1 of 1); only its final held-out "
                      "evaluation and summary.json are missing (it stopped after its last step, e.g. at "
                      "train.time_limit_min, or is still evaluating): fine-tuning from its final checkpoint (" +
                      (pre / "checkpoints" / "step_00000001.pt").string() + "); `pretrain --resume` of that run folder "
                      "evaluates it and writes summary.json"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace rpe::test

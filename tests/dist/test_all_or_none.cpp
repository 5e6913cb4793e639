// A start-up step that fails on one rank stops every rank at once with that rank's reason
// (dist/all_or_none.h): on two Gloo ranks of this test binary, and end to end with the
// rpe-train binary launched as two ranks the way srun does it (no agent that ends the others):
// rank 0 refusing an existing run folder (pretraining, fine-tuning) and rank 1 alone unable to
// read the corpus; and mid-run, rank 0 unable to write a checkpoint. Before, the other rank waited at the rendezvous or at its next collective
// until train.dist_timeout_s and then blamed the network.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "../train/tiny_run.h"
#include "../train/toy_engine.h"
#include "dist/all_or_none.h"
#include "dist/data_parallel.h"
#include "launch_ranks.h"
#include "util/errors.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;
using test::finetune_cmd;
using test::launch_pair;
using test::pretrain_cmd;
using test::slurp;
using test::tiny_pretrained_run;

// The exception `f` throws, as (kind, message): kind "user", "internal" or "none".
template <class F> std::pair<std::string, std::string> thrown(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return {"user", e.what()};
  } catch (const std::exception& e) {
    return {"internal", e.what()};
  }
  return {"none", ""};
}

TEST(AllOrNone, InOneProcessTheStepsErrorPassesUnchanged) {
  dist::DataParallel single;
  EXPECT_EQ(dist::all_or_none(single, "counting", [] { return 7; }), 7);
  EXPECT_EQ(thrown([&] { dist::all_or_none(single, "x", [] { throw UserError("bad file"); }); }),
            std::make_pair(std::string("user"), std::string("bad file")));
}

// One rank of AllOrNone.RanksStopTogetherOnTwoGlooRanks (skipped unless launched by it).
TEST(AllOrNoneWorker, DISABLED_RanksStopTogether) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of AllOrNone.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, 25.0);
  const int64_t me = dp.rank();
  // Every rank succeeds: each gets its own value.
  EXPECT_EQ(dist::all_or_none(dp, "counting", [&] { return 10 + me; }), 10 + me);
  // A user error on rank 1 alone: rank 1 keeps its own, rank 0 gets it named, as a user error.
  const auto user = thrown([&] {
    dist::all_or_none(dp, "reading the corpus", [&] {
      if (me == 1) throw UserError("données/corpus.txt: no such file");
    });
  });
  EXPECT_EQ(user.first, "user");
  EXPECT_EQ(user.second, me == 1 ? "données/corpus.txt: no such file"
                                 : "rank 1 stopped while reading the corpus: données/corpus.txt: no such file");
  // Any other error on rank 0 alone: an internal error on rank 1 too, and a value-returning step.
  const auto internal = thrown([&] {
    return dist::all_or_none(dp, "loading", [&] {
      if (me == 0) throw std::logic_error("boom");
      return std::string("loaded");
    });
  });
  EXPECT_EQ(internal.first, "internal");
  EXPECT_EQ(internal.second, me == 0 ? "boom" : "rank 0 stopped while loading: boom");
  // Both fail: each rank its own error; a long message arrives cut at 1000 bytes.
  const std::string longer(1500, 'x');
  const auto both = thrown([&] {
    dist::all_or_none(dp, "x", [&] { throw UserError(me == 0 ? longer : std::string("rank 1's own")); });
  });
  EXPECT_EQ(both.second, me == 0 ? longer : "rank 1's own");
  const auto cut = thrown([&] {
    dist::all_or_none(dp, "y", [&] {
      if (me == 0) throw UserError(longer);
    });
  });
  EXPECT_EQ(cut.second, me == 1 ? "rank 0 stopped while y: " + longer.substr(0, 1000) : longer);
  // The group still works after all that.
  EXPECT_EQ(dp.sum({1.0})[0], 2.0);
}

TEST(AllOrNone, RanksStopTogetherOnTwoGlooRanks) {
  test::run_two_ranks("AllOrNoneWorker.DISABLED_RanksStopTogether", "all_or_none");
}

// One rank of AllOrNone.ACheckpointRankZeroCannotWriteStopsBothRanks: rank 0's checkpoint
// folder is a file, so its first save fails; rank 1 must stop there too, with that reason,
// instead of going on to step 3's gradient all-reduce with a peer that is gone.
TEST(AllOrNoneWorker, DISABLED_CheckpointWriteFailureStopsBoth) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of AllOrNone.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, 25.0);
  auto t = test::toy_options(6, 1);
  t.save_every = 2;
  const fs::path run = test::fresh_dir("unwritable_r" + std::to_string(env.rank));
  if (env.rank == 0) std::ofstream(run / "checkpoints") << "not a folder";
  int64_t last_step = 0;
  EngineHooks hooks;
  hooks.on_step = [&](int64_t step, double) { last_step = step; };
  test::ToyRun r(t, hooks, {}, run, &dp);
  const auto [kind, message] = thrown([&] { r.engine->run(TrainState{}); });
  EXPECT_EQ(kind, "user") << message;
  EXPECT_EQ(last_step, 2);
  if (env.rank == 1) {
    EXPECT_EQ(message.rfind("rank 0 stopped while saving the checkpoint of step 2: ", 0), 0u) << message;
    EXPECT_NE(message.find("checkpoints"), std::string::npos) << message;
  } else {
    EXPECT_EQ(message.find("rank 0 stopped"), std::string::npos) << message;  // its own error
  }
}

TEST(AllOrNone, ACheckpointRankZeroCannotWriteStopsBothRanks) {
  test::run_two_ranks("AllOrNoneWorker.DISABLED_CheckpointWriteFailureStopsBoth", "all_or_none_save");
}

// One rank of AllOrNone.RankZeroThatCannotWriteItsMetricsStopsBothRanks: rank 0's
// metrics.jsonl is a folder, so its first row (step 2) cannot be written; rank 1 stops there
// with that reason instead of at step 3's gradient all-reduce.
TEST(AllOrNoneWorker, DISABLED_MetricsWriteFailureStopsBoth) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of AllOrNone.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, 25.0);
  const fs::path metrics = test::fresh_dir("unwritable_metrics_r" + std::to_string(env.rank));  // a folder
  int64_t last_step = 0;
  EngineHooks hooks;
  hooks.on_step = [&](int64_t step, double) { last_step = step; };
  test::ToyRun r(test::toy_options(6, 1), hooks, env.rank == 0 ? metrics : fs::path(), {}, &dp);
  const auto [kind, message] = thrown([&] { r.engine->run(TrainState{}); });
  EXPECT_EQ(kind, "user") << message;
  EXPECT_EQ(last_step, 2);
  if (env.rank == 1) {
    EXPECT_EQ(message.rfind("rank 0 stopped while writing metrics.jsonl at step 2: ", 0), 0u) << message;
    EXPECT_NE(message.find("unwritable_metrics_r0: Is a directory"), std::string::npos) << message;  // rank 0's file
  } else {
    EXPECT_EQ(message.find("rank 0 stopped"), std::string::npos) << message;  // its own error
  }
}

TEST(AllOrNone, RankZeroThatCannotWriteItsMetricsStopsBothRanks) {
  test::run_two_ranks("AllOrNoneWorker.DISABLED_MetricsWriteFailureStopsBoth", "all_or_none_metrics");
}

// A job resubmitted into its old run folder without --resume/--overwrite: rank 0 refuses it,
// and rank 1 stops at once with the reason (exit 2 each), not after the rendezvous timeout.
TEST(StartUp, RankZeroRefusingTheRunFolderStopsEveryRank) {
  const fs::path run = test::fresh_dir("startup_refused");
  std::ofstream(run / "metrics.jsonl") << "{\"step\":2}\n";  // an earlier run's
  const std::string cmd = pretrain_cmd(run, "--set train.max_steps=2 --set train.dist_timeout_s=30", "");
  ASSERT_EQ(launch_pair(cmd, cmd, run), 22);
  const std::string refusal = "run folder " + run.string() + " already exists: pass --resume to continue it";
  EXPECT_NE(slurp(run.string() + ".r0.log").find("error: " + refusal), std::string::npos)
      << slurp(run.string() + ".r0.log");
  const std::string r1 = slurp(run.string() + ".r1.log");
  EXPECT_NE(r1.find("error: rank 0 stopped while readying the run folder: " + refusal), std::string::npos) << r1;
  EXPECT_EQ(slurp(run / "metrics.jsonl"), "{\"step\":2}\n");  // untouched
}

// --resume where there is no run yet: rank 0 alone looks at the folder and every rank follows
// it (a fresh run), rather than each deciding by itself.
TEST(StartUp, ResumingWhereNoRunExistsStartsAFreshRunOnEveryRank) {
  const fs::path run = test::fresh_dir("startup_resume_nothing");
  fs::remove_all(run);
  const std::string cmd = pretrain_cmd(run, "--set train.max_steps=2", "--resume");
  const int codes = launch_pair(cmd, cmd, run);
  const std::string r0 = slurp(run.string() + ".r0.log"), r1 = slurp(run.string() + ".r1.log");
  ASSERT_EQ(codes, 0) << r0 << r1;
  for (const auto* log : {&r0, &r1}) EXPECT_EQ(log->find("no usable checkpoint"), std::string::npos) << *log;
  EXPECT_TRUE(fs::exists(run / "summary.json"));
}

TEST(StartUp, RankZeroRefusingTheFineTuningFolderStopsEveryRank) {
  const fs::path ft = test::fresh_dir("startup_ft");
  std::ofstream(ft / "results.jsonl") << "{}\n";
  const std::string cmd = finetune_cmd(tiny_pretrained_run(), ft);
  ASSERT_EQ(launch_pair(cmd, cmd, ft), 22);
  const std::string r1 = slurp(ft.string() + ".r1.log");
  // Refused before the inputs are read (finetune.cpp's first check), as when the folder is created.
  EXPECT_NE(r1.find("error: rank 0 stopped while checking the run folder and finetune.results_file: run folder " +
                    ft.string() + " already exists: pass --resume to continue it, --overwrite to replace it, or --run-dir DIR for a new "
                    "run beside it"),
            std::string::npos)
      << r1;
}

// Rank 1 alone cannot read the SQuAD training file: rank 0 stops with its reason at once
// (before, rank 1 stopped before the ranks met and rank 0 waited at the rendezvous).
TEST(StartUp, FineTuningRankThatCannotReadItsDataStopsEveryRank) {
  const fs::path ft = test::fresh_dir("startup_ft_data");
  fs::remove_all(ft);
  const std::string missing = (test::tiny_data_dir() / "no-train-v1.1.json").string();
  ASSERT_EQ(launch_pair(finetune_cmd(tiny_pretrained_run(), ft), finetune_cmd(tiny_pretrained_run(), ft, "--set finetune.train_file=" + missing), ft),
            22);
  const std::string r0 = slurp(ft.string() + ".r0.log");
  EXPECT_NE(r0.find("error: rank 1 stopped while reading the fine-tuning inputs: "), std::string::npos) << r0;
  EXPECT_NE(r0.find(missing), std::string::npos) << r0;
  EXPECT_FALSE(fs::exists(ft));  // the folder is created only after every rank read its inputs
}

// Mid-run: rank 0 alone evaluates each seed and records its results; here it cannot
// (finetune.results_file is /dev/full: no line fits). Rank 1 stops with that reason after
// seed 1 instead of starting seed 2 alone.
TEST(StartUp, RankZeroFailingToRecordAFineTuningResultStopsEveryRank) {
  const fs::path ft = test::fresh_dir("startup_ft_results");
  fs::remove_all(ft);
  // Opens for appending at the start (a folder would be refused then), fails at the first line.
  const fs::path results = "/dev/full";
  if (!fs::exists(results)) GTEST_SKIP() << "no /dev/full";
  const std::string cmd = finetune_cmd(tiny_pretrained_run(), ft, "--seeds 1,2 --set finetune.results_file=" + results.string());
  const int codes = launch_pair(cmd, cmd, ft);
  const std::string r0 = slurp(ft.string() + ".r0.log"), r1 = slurp(ft.string() + ".r1.log");
  ASSERT_EQ(codes, 12) << r0 << r1;  // rank 0: a full disk, an environment failure (1); rank 1: stopped by it (2)
  EXPECT_NE(r0.find(results.string()), std::string::npos) << r0;
  EXPECT_NE(r1.find("error: rank 0 stopped while evaluating seed 1: "), std::string::npos) << r1;
  EXPECT_NE(r1.find(results.string()), std::string::npos) << r1;
  EXPECT_TRUE(fs::exists(ft / "seed1" / "results.json"));  // the evaluation itself was written
  EXPECT_FALSE(fs::exists(ft / "seed2"));
}

// Rank 0 cannot rewrite metrics.jsonl on --resume (here a folder stands in its place): every rank
// stops before training, with rank 0's reason, instead of waiting at the first step's all-reduce.
TEST(StartUp, RankZeroFailingToOpenTheMetricsStopsEveryRank) {
  const fs::path run = test::fresh_dir("startup_metrics");
  const std::string sets = "--set train.save_every=2 --set train.dist_timeout_s=30";
  ASSERT_EQ(test::run_shell(pretrain_cmd(run, sets + " --set train.max_steps=2") + " > " + run.string() + ".log 2>&1"), 0)
      << slurp(run.string() + ".log");
  fs::remove(run / "metrics.jsonl");
  fs::create_directories(run / "metrics.jsonl" / "in_the_way");
  const std::string cmd = pretrain_cmd(run, sets + " --set train.max_steps=4", "--resume");
  const int codes = launch_pair(cmd, cmd, run);
  const std::string r0 = slurp(run.string() + ".r0.log"), r1 = slurp(run.string() + ".r1.log");
  EXPECT_EQ(codes % 10, 2) << r0 << r1;  // rank 1: stopped by rank 0
  EXPECT_NE(r0.find("metrics.jsonl"), std::string::npos) << r0;
  EXPECT_NE(r1.find("error: rank 0 stopped while writing config.yaml and metrics.jsonl: "), std::string::npos) << r1;
  EXPECT_EQ(r1.find("[train] step"), std::string::npos) << r1;
}

// Rank 1 alone cannot read the corpus (a node without the file): rank 0 stops with rank 1's
// reason, and the new run's folder is not left behind.
TEST(StartUp, RankThatCannotReadTheCorpusStopsEveryRank) {
  const fs::path run = test::fresh_dir("startup_corpus");
  fs::remove_all(run);
  const fs::path missing = test::tiny_data_dir() / "not_on_this_node.txt";
  const std::string sets = "--set train.max_steps=2 --set train.dist_timeout_s=30";
  ASSERT_EQ(launch_pair(pretrain_cmd(run, sets), pretrain_cmd(run, sets + " --set data.train_files=[" + missing.string() + "]"),
                        run),
            22);
  const std::string r0 = slurp(run.string() + ".r0.log"), r1 = slurp(run.string() + ".r1.log");
  EXPECT_NE(r0.find("error: rank 1 stopped while reading the corpus: "), std::string::npos) << r0;
  EXPECT_NE(r0.find(missing.string()), std::string::npos) << r0;
  EXPECT_NE(r1.find(missing.string()), std::string::npos) << r1;
  EXPECT_FALSE(fs::exists(run));
}

}  // namespace
}  // namespace rpe

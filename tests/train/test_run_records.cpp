// What a pretraining run records of itself beyond its losses: the held-out rows of metrics.jsonl
// say where the run stood (tokens_seen, elapsed_s) as its training rows do, across a resume too;
// summary.json gives the ranks that trained each stretch of steps, not only the last process's.
#include <gtest/gtest.h>

#include <fstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../dist/launch_ranks.h"
#include "tiny_run.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

json read_summary(const fs::path& run) {
  std::ifstream in(run / "summary.json");
  return json::parse(in);
}

// The row of `step` of one kind: held-out ("split") or training.
json row_at(const std::vector<json>& rows, int64_t step, bool valid) {
  for (const auto& r : rows)
    if (r.value("step", -1) == step && r.contains("split") == valid && !r.contains("event")) return r;
  ADD_FAILURE() << (valid ? "no held-out row at step " : "no training row at step ") << step;
  return json::object();
}

// A held-out row had only the step and the scores: a validation curve could not be drawn against
// tokens or training time from metrics.jsonl alone. A periodic evaluation gives the tokens of its
// step's training row and a time between that row's and the next one's; the final evaluation
// the run's totals, as summary.json has them.
TEST(RunRecords, HeldOutRowsSayTokensAndTimeAsTrainingRowsDo) {
  const fs::path run = test::fresh_dir("valid_rows");
  pretrain(test::tiny_config({"train.max_steps=4", "train.log_every=2", "train.eval_every=2"}), run, {});
  const auto rows = test::read_jsonl(run / "metrics.jsonl");
  const json t2 = row_at(rows, 2, false), v2 = row_at(rows, 2, true), t4 = row_at(rows, 4, false), v4 = row_at(rows, 4, true);
  ASSERT_TRUE(v2.contains("tokens_seen") && v2.contains("elapsed_s")) << v2.dump();
  EXPECT_GT(t2["tokens_seen"].get<int64_t>(), 0);
  EXPECT_EQ(v2["tokens_seen"], t2["tokens_seen"]);
  EXPECT_GE(v2["elapsed_s"].get<double>(), t2["elapsed_s"].get<double>());
  EXPECT_LE(v2["elapsed_s"].get<double>(), t4["elapsed_s"].get<double>());
  const json summary = read_summary(run);
  EXPECT_EQ(v4["tokens_seen"], t4["tokens_seen"]);
  EXPECT_EQ(v4["tokens_seen"], summary["tokens_seen"]);
  EXPECT_EQ(v4["elapsed_s"].get<double>(), summary["train_s"].get<double>());  // where training ended
}

// A resume goes on from the time of the rows it keeps, the held-out ones too: an evaluation
// taken as 1000 s long (its row written after the checkpoint its run resumes from) must not be
// followed by rows of smaller elapsed_s.
TEST(RunRecords, AResumeGoesOnFromTheLatestHeldOutRowsTime) {
  const fs::path run = test::fresh_dir("valid_rows_resumed");
  pretrain(test::tiny_config({"train.max_steps=2", "train.log_every=2"}), run, {});
  std::string text;
  double evaluated_at = 0;
  for (auto row : test::read_jsonl(run / "metrics.jsonl")) {
    if (row.contains("split")) row["elapsed_s"] = evaluated_at = row["elapsed_s"].get<double>() + 1000.0;
    text += row.dump() + "\n";
  }
  ASSERT_GE(evaluated_at, 1000.0);
  std::ofstream(run / "metrics.jsonl") << text;
  EXPECT_EQ(logged_losses(run / "metrics.jsonl").elapsed_s, evaluated_at);
  pretrain(test::tiny_config({"train.max_steps=4", "train.log_every=2"}), run, {.resume = true});
  const auto rows = test::read_jsonl(run / "metrics.jsonl");
  EXPECT_EQ(row_at(rows, 2, true)["elapsed_s"].get<double>(), evaluated_at);  // kept: the run had ended there
  EXPECT_GE(row_at(rows, 4, false)["elapsed_s"].get<double>(), evaluated_at);
  EXPECT_GE(row_at(rows, 4, true)["elapsed_s"].get<double>(), evaluated_at);
  EXPECT_GE(read_summary(run)["train_s"].get<double>(), evaluated_at);
}

using Starts = std::vector<std::pair<int64_t, int64_t>>;

TEST(RunRecords, AStretchOfRanksBeginsWhereTheWorldSizeChanges) {
  TrainState s;
  note_world_size(s, 0, 2);  // no step trained: nothing to say
  EXPECT_TRUE(s.world_sizes.empty());
  s.step = 6;
  note_world_size(s, 0, 2);
  note_world_size(s, 0, 2);  // every save of a process notes it
  EXPECT_EQ(s.world_sizes, (Starts{{0, 2}}));
  s.step = 10;
  note_world_size(s, 6, 1);  // resumed at 6 by one process
  s.step = 12;
  note_world_size(s, 10, 1);  // and again by one: the same stretch (identical runs, identical files)
  EXPECT_EQ(s.world_sizes, (Starts{{0, 2}, {6, 1}}));
  EXPECT_EQ(world_size_stretches(s.world_sizes, 12),
            json::parse(R"([{"first_step": 1, "last_step": 6, "world_size": 2},
                            {"first_step": 7, "last_step": 12, "world_size": 1}])"));
  // A checkpoint of before the record (resumed at 3): the steps before it are not known.
  EXPECT_EQ(world_size_stretches({{3, 1}}, 5),
            json::parse(R"([{"first_step": 1, "last_step": 3, "world_size": null},
                            {"first_step": 4, "last_step": 5, "world_size": 1}])"));
  EXPECT_EQ(world_size_stretches({}, 0), json::array());
}

// Started on 2 ranks and resumed by one process, a run's summary.json said "world_size": 1 and
// nothing of the ranks that trained its first steps. world_size keeps its meaning (this
// process's); world_sizes gives each stretch, and a resume on as many ranks continues one.
TEST(RunRecords, SummaryGivesTheWorldSizeOfEachStretchOfARun) {
  const fs::path run = test::fresh_dir("world_sizes");
  const std::string two = test::pretrain_cmd(run, "--set train.max_steps=2");
  ASSERT_EQ(test::launch_pair(two, two, run), 0) << test::slurp(run.string() + ".r0.log") << test::slurp(run.string() + ".r1.log");
  EXPECT_EQ(read_summary(run)["world_sizes"], json::parse(R"([{"first_step": 1, "last_step": 2, "world_size": 2}])"));
  const std::string log = run.string() + ".resumed.log";
  for (const char* steps : {"4", "6"})
    ASSERT_EQ(test::run_shell(test::pretrain_cmd(run, std::string("--set train.max_steps=") + steps, "--resume") + " >> " +
                              log + " 2>&1"),
              0)
        << test::slurp(log);
  const json summary = read_summary(run);
  EXPECT_EQ(summary["world_size"], 1);
  EXPECT_EQ(summary["world_sizes"], json::parse(R"([{"first_step": 1, "last_step": 2, "world_size": 2},
                                                    {"first_step": 3, "last_step": 6, "world_size": 1}])"));
}

}  // namespace
}  // namespace rpe

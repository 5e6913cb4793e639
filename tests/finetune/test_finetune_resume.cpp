// `rpe-train finetune ... --resume` (finetune/resume.h): a fine-tuning run of two seeds stopped
// again and again (train.time_limit_min, a real SIGTERM, a SIGKILL after a periodic checkpoint,
// a command naming one seed only) and
// resumed each time ends as the same run never stopped: the kept models' weights bitwise equal,
// the same results.json and result lines (each once, of one run), the same metrics.jsonl rows
// (timings aside), and no checkpoint left behind.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../dist/launch_ranks.h"
#include "eval/results.h"
#include "finetune/heads.h"
#include "finetune/saved_model.h"
#include "train/checkpoint.h"

namespace rpe::test {
namespace {
namespace fs = std::filesystem;

// The kept model of seed<N>/model/ as loaded tensors, by name.
std::vector<std::pair<std::string, torch::Tensor>> kept_weights(const fs::path& seed_dir) {
  const auto saved = finetune::read_saved_model(seed_dir / "model");
  finetune::QaModel model(saved.cfg.model);
  finetune::load_saved_weights(saved, *model);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model->named_parameters()) out.emplace_back(p.key(), p.value().clone());
  return out;
}

// metrics.jsonl without what differs from run to run (the timings).
std::vector<nlohmann::json> untimed_rows(const fs::path& file) {
  auto rows = read_jsonl(file);
  for (auto& row : rows)
    for (const char* key : {"elapsed_s", "tokens_per_s", "model_tflops_per_device"}) row.erase(key);
  return rows;
}

// The lines of `results_file` of seed `seed` (eval::to_json of each), in the file's order.
nlohmann::json lines_of_seed(const fs::path& results_file, int64_t seed) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : eval::read_results(results_file))
    if (row.seed == seed) out.push_back(eval::to_json(row));
  return out;
}

// Both seeds of `a` and `b` alike, and each results file with one line per seed and metric.
void expect_same_runs(const fs::path& a, const fs::path& b) {
  for (const char* seed : {"seed1", "seed2"}) {
    SCOPED_TRACE(seed);
    const auto wa = kept_weights(a / seed), wb = kept_weights(b / seed);
    ASSERT_EQ(wa.size(), wb.size());
    for (size_t i = 0; i < wa.size(); ++i) EXPECT_TRUE(torch::equal(wa[i].second, wb[i].second)) << wa[i].first;
    // Alike but for the rows each records (their run folder and times are each run's own): those
    // are the seed's lines in its own results file.
    auto ja = nlohmann::json::parse(slurp(a / seed / "results.json"));
    auto jb = nlohmann::json::parse(slurp(b / seed / "results.json"));
    for (const auto& [dir, j] : {std::pair{a, &ja}, {b, &jb}}) {
      EXPECT_EQ(j->value("rows", nlohmann::json()), lines_of_seed(dir / "r.jsonl", std::stoll(&seed[4])));
      j->erase("rows");
    }
    EXPECT_EQ(ja, jb);
    const auto ma = untimed_rows(a / seed / "metrics.jsonl"), mb = untimed_rows(b / seed / "metrics.jsonl");
    EXPECT_EQ(ma.size(), mb.size()) << "metrics.jsonl rows";
    for (size_t i = 0; i < std::min(ma.size(), mb.size()); ++i)
      if (ma[i] != mb[i]) {
        ADD_FAILURE() << "metrics.jsonl row " << i << ": " << mb[i].dump() << ", uninterrupted " << ma[i].dump();
        break;
      }
    EXPECT_FALSE(fs::exists(b / seed / "checkpoints")) << "a finished seed keeps its model, not its checkpoints";
  }
  const auto ra = eval::read_results(a / "r.jsonl"), rb = eval::read_results(b / "r.jsonl");
  ASSERT_EQ(ra.size(), 4u);  // 2 seeds x (exact, f1)
  ASSERT_EQ(rb.size(), 4u) << slurp(b / "r.jsonl");
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(rb[i].seed, ra[i].seed);
    EXPECT_EQ(rb[i].metric, ra[i].metric);
    EXPECT_EQ(rb[i].value, ra[i].value) << rb[i].metric << " of seed " << rb[i].seed;
    EXPECT_EQ(rb[i].run_started, rb[0].run_started) << "the resumed run's lines are of the run it continues";
  }
}

// Runs `cmd` in the background and sends it `signal` (TERM, KILL) once seed<N>/metrics.jsonl has
// `rows` rows (training under way); returns its exit status as the shell reports it (128 + the
// signal's number: ended by it).
int signalled_while_training(const std::string& cmd, const std::string& signal, const fs::path& metrics, int rows,
                             const fs::path& log) {
  return run_shell(cmd + " >> " + log.string() + " 2>&1 & pid=$!; for i in $(seq 3000); do "
                   "[[ $(cat " + metrics.string() + " 2>/dev/null | wc -l) -ge " + std::to_string(rows) +
                   " ]] && break; kill -0 $pid 2>/dev/null || break; sleep 0.01; done; kill -" + signal +
                   " $pid; wait $pid");
}

TEST(FinetuneResume, AStoppedRunResumesToTheRunNeverStopped) {
  const fs::path straight = fresh_dir("ft_straight"), stopped = fresh_dir("ft_stopped");
  const fs::path log = stopped.string() + ".log";
  // Dev evaluations every 20 steps keep the best model: the keeper's state must come back too.
  const std::string sets = " --set train.log_every=1 --set train.batch_size=4 --set finetune.epochs=3"
                           " --set finetune.select=best --set finetune.eval_every=20 --set finetune.save_every=25";
  auto cmd = [&](const fs::path& dir, const std::string& extra) {
    return finetune_cmd(tiny_pretrained_run(), dir, extra + sets + " --set finetune.results_file=" + (dir / "r.jsonl").string());
  };
  ASSERT_EQ(run_shell(cmd(straight, "--seeds 1,2") + " > " + straight.string() + ".log 2>&1"), 0)
      << slurp(straight.string() + ".log");
  const std::string limit = " --set train.time_limit_min=0.0001";  // past by the first step

  // 1. The time limit: exit 75 after step 1 of seed 1, with its checkpoint, naming the command.
  ASSERT_EQ(run_shell(cmd(stopped, "--seeds 1,2" + limit) + " > " + log.string() + " 2>&1"), 75) << slurp(log);
  EXPECT_TRUE(fs::exists(stopped / "seed1" / "checkpoints" / "step_00000001.pt")) << slurp(log);
  EXPECT_NE(slurp(stopped / "finetune.log").find("after step 1 of "), std::string::npos);
  EXPECT_NE(slurp(stopped / "finetune.log").find("the same `rpe-train finetune squad` command with --resume continues"),
            std::string::npos)
      << slurp(stopped / "finetune.log");
  // 2. SIGTERM while seed 1 trains its second epoch (45 steps each): a checkpoint of the step it
  // stopped after, two at most kept.
  const fs::path metrics = stopped / "seed1" / "metrics.jsonl";
  ASSERT_EQ(signalled_while_training(cmd(stopped, "--seeds 1,2 --resume"), "TERM", metrics, 60, log), 128 + SIGTERM)
      << slurp(log);
  EXPECT_NE(slurp(stopped / "finetune.log").find("stopped on request (SIGTERM) after step"), std::string::npos)
      << slurp(stopped / "finetune.log");
  EXPECT_LE(list_checkpoints(stopped / "seed1").size(), 2u);
  // 3. Seed 1 alone: killed after its periodic checkpoint of step 75 (rows past it are redone,
  // not repeated), then to its end; 4. seed 2 (seed 1 skipped) stopped at the time limit.
  ASSERT_EQ(signalled_while_training(cmd(stopped, "--seeds 1 --resume"), "KILL", metrics, 85, log), 128 + SIGKILL)
      << slurp(log);
  EXPECT_TRUE(fs::exists(stopped / "seed1" / "checkpoints" / "step_00000075.pt"));
  ASSERT_EQ(run_shell(cmd(stopped, "--seeds 1 --resume") + " >> " + log.string() + " 2>&1"), 0) << slurp(log);
  ASSERT_EQ(run_shell(cmd(stopped, "--seeds 1,2 --resume" + limit) + " >> " + log.string() + " 2>&1"), 75) << slurp(log);
  EXPECT_NE(slurp(log).find("seed 1: finished (" + (stopped / "seed1" / "results.json").string() + "), skipped"),
            std::string::npos)
      << slurp(log);
  EXPECT_TRUE(fs::exists(stopped / "seed2" / "checkpoints" / "step_00000001.pt"));
  // 5. The rest.
  ASSERT_EQ(run_shell(cmd(stopped, "--seeds 1,2 --resume") + " >> " + log.string() + " 2>&1"), 0) << slurp(log);
  expect_same_runs(straight, stopped);
}

// A seed's results.json is written just before its lines are appended to the results file: a
// kill between the two (or during the appends) is simulated by removing lines. --resume puts
// back exactly the missing ones from results.json, with the run's run_started, and adds nothing
// when none is missing; a results.json of before its "rows" is skipped as it always was.
TEST(FinetuneResume, AFinishedSeedGetsItsLostResultLinesBackOnce) {
  const fs::path run = fresh_dir("ft_lost_lines"), results = run / "r.jsonl", log = run.string() + ".log";
  auto cmd = [&](const std::string& seeds) {
    return finetune_cmd(tiny_pretrained_run(), run, "--seeds " + seeds + " --set train.batch_size=4 --set "
                        "finetune.results_file=" + results.string()) + " >> " + log.string() + " 2>&1";
  };
  auto write = [](const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::trunc) << text; };
  auto missing_notes = [&] {
    const std::string text = slurp(log);
    size_t n = 0;
    const std::string note = "were missing from";
    for (size_t at = text.find(note); at != std::string::npos; at = text.find(note, at + 1)) ++n;
    return n;
  };
  ASSERT_EQ(run_shell(cmd("1")), 0) << slurp(log);
  const std::string seed1 = slurp(results);
  ASSERT_EQ(eval::read_results(results).size(), 2u) << seed1;
  // 1. Killed right after seed 1's results.json: none of its lines. They come back as they were,
  // and seed 2's lines, trained by this resume, are of the same run (run_started).
  write(results, "");
  ASSERT_EQ(run_shell(cmd("1,2 --resume")), 0) << slurp(log);
  const std::string full = slurp(results);
  EXPECT_EQ(full.substr(0, seed1.size()), seed1);
  const auto rows = eval::read_results(results);
  ASSERT_EQ(rows.size(), 4u) << full;
  for (const auto& row : rows) EXPECT_EQ(row.run_started, rows[0].run_started) << row.seed << " " << row.metric;
  EXPECT_NE(slurp(log).find("seed 1: 2 of its 2 result line(s) were missing from " + results.string()),
            std::string::npos)
      << slurp(log);
  // 2. Killed while appending seed 2's: its last line lost, torn half-way. Only that one comes back.
  const size_t last = full.rfind('\n', full.size() - 2) + 1;
  write(results, full.substr(0, last) + full.substr(last, (full.size() - last) / 2));
  ASSERT_EQ(run_shell(cmd("1,2 --resume")), 0) << slurp(log);
  EXPECT_EQ(slurp(results), full);
  EXPECT_NE(slurp(log).find("seed 2: 1 of its 2 result line(s) were missing"), std::string::npos) << slurp(log);
  // 3. Nothing missing: nothing added.
  ASSERT_EQ(missing_notes(), 2u) << slurp(log);
  ASSERT_EQ(run_shell(cmd("1,2 --resume")), 0) << slurp(log);
  EXPECT_EQ(slurp(results), full);
  EXPECT_EQ(missing_notes(), 2u) << slurp(log);
  // 4. A results.json of before "rows": the seed is skipped, its lines are not known.
  auto old = nlohmann::json::parse(slurp(run / "seed2" / "results.json"));
  old.erase("rows");
  write(run / "seed2" / "results.json", old.dump(2));
  write(results, full.substr(0, full.rfind('\n', last - 2) + 1));
  ASSERT_EQ(run_shell(cmd("1,2 --resume")), 0) << slurp(log);
  EXPECT_EQ(eval::read_results(results).size(), 2u) << slurp(results);
  EXPECT_EQ(missing_notes(), 2u) << slurp(log);
}

// The time limit read between seeds: passed before seed 2 begins (here: during the startup of a
// resume whose seed 1 has its final checkpoint, no step left to train, only its final
// evaluation), the run stops with exit 75 before seed 2 has a folder, not after its first step;
// --resume then ends as the run never stopped.
TEST(FinetuneResume, TheTimeLimitBetweenSeedsStopsBeforeTheNextSeed) {
  const fs::path straight = fresh_dir("ft_between_straight"), stopped = fresh_dir("ft_between_stopped");
  const fs::path log = stopped.string() + ".log";
  // One step a seed (a hundredth of an epoch): a stop at the time limit after it leaves the
  // seed's final evaluation to --resume.
  auto cmd = [&](const fs::path& dir, const std::string& extra) {
    return finetune_cmd(tiny_pretrained_run(), dir, "--seeds 1,2 --set train.batch_size=4 --set finetune.epochs=0.01" +
                        extra + " --set finetune.results_file=" + (dir / "r.jsonl").string()) + " >> " + dir.string() +
           ".log 2>&1";
  };
  ASSERT_EQ(run_shell(cmd(straight, "")), 0) << slurp(straight.string() + ".log");
  const std::string limit = " --set train.time_limit_min=0.0001";  // past by the first step
  ASSERT_EQ(run_shell(cmd(stopped, limit)), 75) << slurp(log);
  ASSERT_TRUE(fs::exists(stopped / "seed1" / "checkpoints" / "step_00000001.pt")) << slurp(log);
  ASSERT_FALSE(fs::exists(stopped / "seed1" / "results.json"));
  // Seed 1 evaluated and finished, then the stop before seed 2.
  ASSERT_EQ(run_shell(cmd(stopped, " --resume" + limit)), 75) << slurp(log);
  EXPECT_TRUE(fs::exists(stopped / "seed1" / "results.json")) << slurp(log);
  EXPECT_EQ(eval::read_results(stopped / "r.jsonl").size(), 2u);
  EXPECT_FALSE(fs::exists(stopped / "seed2")) << slurp(log);
  EXPECT_NE(slurp(stopped / "finetune.log")
                .find("stopped at the time limit (train.time_limit_min 0.0001) before seed 2 (the seeds before it "
                      "finished); the same `rpe-train finetune squad` command with --resume continues the run"),
            std::string::npos)
      << slurp(stopped / "finetune.log");
  ASSERT_EQ(run_shell(cmd(stopped, " --resume")), 0) << slurp(log);
  expect_same_runs(straight, stopped);
}

// Two Gloo ranks: the time limit stops both after the same step with one checkpoint (rank 0's),
// and both resume from it to the end of the same run never stopped (on two ranks as well).
TEST(FinetuneResume, TwoRanksStopAndResumeTogether) {
  const fs::path straight = fresh_dir("ft2_straight"), stopped = fresh_dir("ft2_stopped");
  auto cmd = [&](const fs::path& dir, const std::string& extra) {
    return finetune_cmd(tiny_pretrained_run(), dir, "--seeds 1,2 --set train.batch_size=4 " + extra +
                        " --set finetune.results_file=" + (dir / "r.jsonl").string());
  };
  ASSERT_EQ(launch_pair(cmd(straight, ""), cmd(straight, ""), straight), 0) << slurp(straight.string() + ".r0.log");
  const std::string limit = "--set train.time_limit_min=0.0001";
  ASSERT_EQ(launch_pair(cmd(stopped, limit), cmd(stopped, limit), stopped), (75 * 10 + 75) % 256)  // both 75
      << slurp(stopped.string() + ".r0.log") << slurp(stopped.string() + ".r1.log");
  EXPECT_EQ(list_checkpoints(stopped / "seed1").size(), 1u);
  ASSERT_EQ(launch_pair(cmd(stopped, "--resume"), cmd(stopped, "--resume"), stopped), 0)
      << slurp(stopped.string() + ".r0.log") << slurp(stopped.string() + ".r1.log");
  // Rank 1 logs warnings only; had it not resumed from rank 0's step, the ranks' check of it
  // (require_same_on_every_rank) would have stopped both.
  EXPECT_NE(slurp(stopped.string() + ".r0.log").find("seed 1: resumed from "), std::string::npos)
      << slurp(stopped.string() + ".r0.log");
  expect_same_runs(straight, stopped);
}

}  // namespace
}  // namespace rpe::test

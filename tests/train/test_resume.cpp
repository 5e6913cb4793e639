// End-to-end properties of the training loop on the tiny CPU model (dropout on):
// - 2N steps == N steps + crash + --resume + N steps, bitwise (losses and parameters), for
//   AdamW and LAMB, with gradient accumulation;
// - gradient accumulation gives the gradient of the doubled batch (dropout off);
// - a non-finite loss skips the update; N in a row stop the run with a checkpoint kept;
// - --resume with every checkpoint broken stops (UserError) and leaves metrics.jsonl alone;
//   --resume of a run killed before its first checkpoint starts from step 0.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "model/bert.h"
#include "tiny_run.h"
#include "train/checkpoint.h"
#include "train/lamb.h"
#include "train/optim.h"
#include "train/trainer.h"
#include "util/errors.h"
#include "util/torch_compat.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

struct Crash : std::runtime_error {
  Crash() : std::runtime_error("simulated crash") {}
};

// Parameters stored in the newest checkpoint of a run.
std::map<std::string, torch::Tensor> final_params(const fs::path& run) {
  const auto file = latest_checkpoint(run);
  EXPECT_TRUE(file.has_value());
  const Config cfg = config_from_yaml(read_checkpoint_config(*file), file->string());
  BertModel model(cfg.model);
  load_checkpoint(*file, *model, nullptr);
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : model->named_parameters()) out[p.key()] = p.value().detach().clone();
  return out;
}

// "step loss" of every training row of a run's metrics.jsonl, in file order.
std::vector<std::string> metric_rows(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  std::vector<std::string> rows;
  std::string line;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    if (!row.contains("split")) rows.push_back(row["step"].dump() + " " + row["loss"].dump());
  }
  return rows;
}

class Resume : public ::testing::TestWithParam<std::string> {};

TEST_P(Resume, CrashAndResumeIsBitwiseIdentical) {
  const Config cfg = test::tiny_config({"train.optimizer=" + GetParam(), "train.max_steps=8", "train.save_every=4",
                                        "train.grad_accum=2"});
  std::vector<double> straight, resumed;
  PretrainHooks record;
  record.on_step = [&](int64_t, double loss) { straight.push_back(loss); };
  const fs::path a = test::fresh_dir("resume_a_" + GetParam());
  pretrain(cfg, a, {}, record);

  const fs::path b = test::fresh_dir("resume_b_" + GetParam());
  PretrainHooks crash;
  crash.on_step = [&](int64_t step, double loss) {
    if (step == 7) throw Crash();  // dies after the step-4 checkpoint and step 6's metrics row
    resumed.push_back(loss);
  };
  EXPECT_THROW(pretrain(cfg, b, {}, crash), Crash);
  ASSERT_EQ(latest_checkpoint(b)->filename(), "step_00000004.pt");
  resumed.resize(4);
  PretrainHooks after;
  after.on_step = [&](int64_t, double loss) { resumed.push_back(loss); };
  pretrain(cfg, b, {.resume = true}, after);

  ASSERT_EQ(straight.size(), 8u);
  ASSERT_EQ(resumed.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(straight[i], resumed[i]) << "loss of step " << i + 1;
  const auto pa = final_params(a), pb = final_params(b);
  for (const auto& [name, t] : pa) EXPECT_TRUE(torch::equal(t, pb.at(name))) << name;
  EXPECT_NE(straight.front(), straight.back());
  // metrics.jsonl of the resumed run: the rows of the lost steps were dropped on resume, so
  // the rows are those of the straight run, each step once.
  EXPECT_EQ(metric_rows(b), metric_rows(a));
}
INSTANTIATE_TEST_SUITE_P(Optimizers, Resume, ::testing::Values("adamw", "lamb"));

std::string file_text(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Training rows of a run's metrics.jsonl without the fields of this process's clock.
std::vector<nlohmann::json> rows_without_timings(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line)) {
    auto row = nlohmann::json::parse(line);
    if (row.contains("split")) continue;
    row.erase("tokens_per_s");
    row.erase("model_tflops_per_device");
    row.erase("elapsed_s");
    rows.push_back(row);
  }
  return rows;
}

// A checkpoint between two log steps (save_every 4, log_every 6) keeps the log window so far:
// resumed from step 4, the row of step 6 averages steps 1-6 as the uninterrupted run's does,
// not only 5-6 (loss, gradient norm and accuracy alike).
TEST(ResumeWindow, ACheckpointBetweenLogStepsKeepsTheWindowSoFar) {
  const Config cfg = test::tiny_config({"train.max_steps=12", "train.save_every=4", "train.log_every=6"});
  const fs::path a = test::fresh_dir("window_a"), b = test::fresh_dir("window_b");
  pretrain(cfg, a, {});
  PretrainHooks crash;
  crash.on_step = [](int64_t step, double) {
    if (step == 7) throw Crash();  // after the rows and checkpoint of step 6 and 4
  };
  EXPECT_THROW(pretrain(cfg, b, {}, crash), Crash);
  ASSERT_EQ(latest_checkpoint(b)->filename(), "step_00000004.pt");
  pretrain(cfg, b, {.resume = true});
  const auto rows = rows_without_timings(a);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows_without_timings(b), rows);
}

TEST(ResumeRefusal, EveryCheckpointBrokenStopsAndKeepsTheMetrics) {
  const Config cfg = test::tiny_config({"train.max_steps=4", "train.save_every=2", "train.keep_checkpoints=10"});
  const fs::path run = test::fresh_dir("resume_all_broken");
  pretrain(cfg, run, {});
  for (const auto& [step, file] : list_checkpoints(run)) fs::resize_file(file, fs::file_size(file) / 2);
  const std::string metrics = file_text(run / "metrics.jsonl");
  ASSERT_FALSE(metrics.empty());
  try {
    pretrain(cfg, run, {.resume = true});
    FAIL() << "resumed from broken checkpoints";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--resume: no usable checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file_text(run / "metrics.jsonl"), metrics);  // not rewritten from step 0
}

// The data position counts in the checkpoint's sequences, in its seed's order: other data
// (another length, so other sequences) or another order would continue from a position that
// means others. Refused, naming both.
TEST(ResumeRefusal, OtherDataThanTheCheckpointsIsRefused) {
  const fs::path run = test::fresh_dir("resume_other_data");
  pretrain(test::tiny_config({"train.max_steps=4", "train.save_every=2"}), run, {});
  try {
    pretrain(test::tiny_config({"train.max_steps=6", "train.save_every=2", "data.max_seq_len=24"}), run,
             {.resume = true});
    FAIL() << "resumed on other data";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step_00000004.pt: trained on "), std::string::npos) << msg;
    EXPECT_NE(msg.find("of length 24"), std::string::npos) << msg;
    EXPECT_NE(msg.find("its data position would mean other sequences"), std::string::npos) << msg;
  }
  // Another train.seed shuffles the same sequences into another order: refused as well (12345
  // too, whose text starts with the default 1234's).
  for (const std::string seed : {"99", "12345"}) {
    try {
      pretrain(test::tiny_config({"train.max_steps=6", "train.save_every=2", "train.seed=" + seed}), run,
               {.resume = true});
      FAIL() << "resumed in another order, seed " << seed;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("order of train.seed " + seed), std::string::npos) << e.what();
    }
  }
  // Each refusal ends train.log, which the folder keeps: its error line says why.
  EXPECT_NE(file_text(run / "train.log").find(" error " + (run / "checkpoints" / "step_00000004.pt").string() +
                                              ": trained on "),
            std::string::npos);
  pretrain(test::tiny_config({"train.max_steps=6", "train.save_every=2"}), run, {.resume = true});  // the same data
}

// --resume takes the config it is given (a longer run, another lr): it names each key that
// changed in train.log and keeps the config that ran until the checkpoint beside the new one.
TEST(ResumeConfig, AChangedConfigIsNamedAndTheOldOneKept) {
  const fs::path run = test::fresh_dir("resume_changed_config");
  const fs::path missing = run / "not_yet";  // --resume of a folder that is not there: a new run, said so
  pretrain(test::tiny_config({"train.max_steps=4", "train.save_every=2"}), missing, {.resume = true});
  EXPECT_NE(file_text(missing / "train.log").find("--resume: no run in " + missing.string() + " yet: starting a new run"),
            std::string::npos);
  const std::string before = file_text(missing / "config.yaml");
  const Config longer = test::tiny_config({"train.max_steps=6", "train.save_every=2", "train.lr=0.0005"});
  pretrain(longer, missing, {.resume = true});
  EXPECT_EQ(file_text(missing / "config.before_step_4.yaml"), before);
  const Config now = config_from_yaml(file_text(missing / "config.yaml"), "config.yaml");
  EXPECT_EQ(now.train.lr, 0.0005);
  EXPECT_EQ(now.train.max_steps, 6);
  const std::string log = file_text(missing / "train.log");
  const size_t warned = log.find("--resume with a changed config: train.lr: ");
  ASSERT_NE(warned, std::string::npos) << log;
  const std::string line = log.substr(warned, log.find('\n', warned) - warned);
  EXPECT_NE(line.find("train.lr: 0.001 -> 0.0005, train.max_steps: 4 -> 6; the run goes on with the new values "
                      "(config.before_step_4.yaml keeps the old)"),
            std::string::npos)
      << line;
  // The same config again (the finished run's final evaluation redone): nothing to say or keep.
  pretrain(longer, missing, {.resume = true});
  EXPECT_FALSE(fs::exists(missing / "config.before_step_6.yaml"));
  EXPECT_EQ(file_text(missing / "train.log").find("changed config", warned + line.size()), std::string::npos);
}

// train.decay_position_params switched on at a --resume of a LAMB run: the position table moves
// from the undecayed group to the decayed one (LAMB counts steps by group), yet its state comes
// back by parameter name and goes on counting; the change is named as any other.
TEST(ResumeConfig, SwitchingPositionDecayKeepsTheOptimizerState) {
  const fs::path run = test::fresh_dir("resume_position_decay") / "run";
  const std::vector<std::string> lamb = {"train.save_every=2", "train.optimizer=lamb"};
  auto with = [&](std::vector<std::string> sets) {
    sets.insert(sets.end(), lamb.begin(), lamb.end());
    return test::tiny_config(sets);
  };
  pretrain(with({"train.max_steps=4"}), run, {.resume = true});
  pretrain(with({"train.max_steps=6", "train.decay_position_params=true"}), run, {.resume = true});
  const std::string log = file_text(run / "train.log");
  EXPECT_NE(log.find("train.decay_position_params: false -> true"), std::string::npos) << log;
  const auto file = latest_checkpoint(run);
  ASSERT_TRUE(file.has_value());
  const Config cfg = config_from_yaml(read_checkpoint_config(*file), file->string());
  EXPECT_TRUE(cfg.train.decay_position_params);
  BertModel model(cfg.model);
  auto optimizer = make_optimizer(*model, cfg.train);
  load_checkpoint(*file, *model, optimizer.get());
  const auto table = model->named_parameters()["position.absolute"];
  const auto& state = optimizer->state().at(compat::optimizer_state_key(table));
  EXPECT_EQ(static_cast<const LambParamState&>(*state).step(), 6);
}

TEST(ResumeRefusal, ARunKilledBeforeItsFirstCheckpointStartsFromZero) {
  const Config cfg = test::tiny_config({"train.max_steps=4", "train.save_every=2"});
  const fs::path straight = test::fresh_dir("resume_first_a"), killed = test::fresh_dir("resume_first_b");
  pretrain(cfg, straight, {});
  // What a kill between the step-2 metrics row and the step-2 checkpoint leaves.
  std::ofstream(killed / "metrics.jsonl") << "{\"step\":2,\"loss\":9.0}\n";
  const auto r = pretrain(cfg, killed, {.resume = true});
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(metric_rows(killed), metric_rows(straight));
}

// A finished run (summary.json) whose checkpoints were removed is not a run killed before its
// first checkpoint: restarting it from step 0 replaced its metrics and summary (found by
// adversarial testing, with the default save_every beyond the run's length). Refused, kept.
TEST(ResumeRefusal, AFinishedRunWithoutCheckpointsIsKept) {
  const Config cfg = test::tiny_config({"train.max_steps=2", "train.save_every=0"});
  const fs::path run = test::fresh_dir("resume_finished_no_ckpt");
  pretrain(cfg, run, {});
  fs::remove_all(run / "checkpoints");
  const std::string metrics = file_text(run / "metrics.jsonl"), summary = file_text(run / "summary.json");
  try {
    pretrain(cfg, run, {.resume = true});
    FAIL() << "restarted a finished run";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("summary.json says the run finished, but"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file_text(run / "metrics.jsonl"), metrics);
  EXPECT_EQ(file_text(run / "summary.json"), summary);
}

TEST(Accumulation, TwoMicroBatchesEqualTheDoubledBatch) {
  const std::vector<std::string> common = {"train.max_steps=3", "model.dropout=0", "model.attention_dropout=0"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return test::tiny_config(extra);
  };
  const fs::path one = test::fresh_dir("accum_1"), two = test::fresh_dir("accum_2");
  pretrain(with({"train.grad_accum=1"}), one, {});
  pretrain(with({"train.grad_accum=2"}), two, {});
  const auto p1 = final_params(one), p2 = final_params(two);
  double worst = 0;
  for (const auto& [name, t] : p1) worst = std::max(worst, (t - p2.at(name)).abs().max().item<double>());
  EXPECT_LE(worst, 1e-6);
}

TEST(NonFinite, OneBadStepIsSkippedAndCounted) {
  const fs::path run = test::fresh_dir("nan_once");
  const Config cfg =
      test::tiny_config({"train.max_steps=4", "train.save_every=1", "train.keep_checkpoints=10", "train.log_every=1"});
  PretrainHooks hooks;
  hooks.on_loss = [](int64_t step, torch::Tensor& loss) {
    if (step == 2) loss = loss * std::numeric_limits<double>::quiet_NaN();
  };
  const auto r = pretrain(cfg, run, {}, hooks);
  EXPECT_EQ(r.steps, 4);
  auto params_at = [&](int step) {
    const fs::path f = run / "checkpoints" / (std::string("step_0000000") + std::to_string(step) + ".pt");
    BertModel model(config_from_yaml(read_checkpoint_config(f), f.string()).model);
    load_checkpoint(f, *model, nullptr);
    return model->parameters();
  };
  const auto before = params_at(2), skipped = params_at(3), after = params_at(4);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], skipped[i]));  // no update
  EXPECT_FALSE(torch::equal(skipped[0], after[0]));  // and training went on
  // The skip's event row, then the skipped step's window row (log_every 1): no loss, and no
  // accuracy either (its forward ran, but the row's fields average the same steps); the others
  // have both.
  int events = 0, rows = 0;
  for (const auto& row : test::read_jsonl(run / "metrics.jsonl")) {
    if (row.value("event", "") == "nonfinite_skip") {
      ++events;
      EXPECT_EQ(row.at("step"), 3);
      continue;
    }
    if (row.contains("split")) continue;
    ++rows;
    const bool skipped_step = row.at("step") == 3;
    EXPECT_EQ(row.at("skipped"), skipped_step ? 1 : 0) << row.dump();
    EXPECT_EQ(row.at("loss").is_null(), skipped_step) << row.dump();
    EXPECT_EQ(row.at("mlm_accuracy").is_null(), skipped_step) << row.dump();
  }
  EXPECT_EQ(events, 1);
  EXPECT_EQ(rows, 4);
  std::ifstream summary(run / "summary.json");
  std::string text((std::istreambuf_iterator<char>(summary)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"nonfinite_skipped\": 1"), std::string::npos) << text;
}

TEST(NonFinite, StopsAfterTooManyInARowWithCheckpointKept) {
  const fs::path run = test::fresh_dir("nan_many");
  const Config cfg = test::tiny_config({"train.max_steps=20", "train.max_nonfinite_in_a_row=3"});
  PretrainHooks hooks;
  hooks.on_loss = [](int64_t step, torch::Tensor& loss) {
    if (step >= 2) loss = loss * std::numeric_limits<double>::infinity();
  };
  try {
    pretrain(cfg, run, {}, hooks);
    FAIL() << "expected the run to stop";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("3 non-finite losses or gradient norms in a row"), std::string::npos)
        << e.what();
  }
  ASSERT_TRUE(latest_checkpoint(run).has_value());
  EXPECT_EQ(latest_checkpoint(run)->filename(), "step_00000005.pt");  // 2 good steps + 3 skipped
  // AdamW's skips are noticed one step late (engine.h), when step 6's batches are already taken:
  // the checkpoint keeps step 5's data position and token count, as a run stopped at 5 has.
  const fs::path clean = test::fresh_dir("nan_many_clean");
  pretrain(test::tiny_config({"train.max_steps=5"}), clean, {}, {});
  auto state_of = [](const fs::path& f) {
    BertModel model(config_from_yaml(read_checkpoint_config(f), f.string()).model);
    return load_checkpoint(f, *model, nullptr).state;
  };
  const TrainState stopped = state_of(*latest_checkpoint(run)), five = state_of(*latest_checkpoint(clean));
  EXPECT_EQ(stopped.cursor.epoch, five.cursor.epoch);
  EXPECT_EQ(stopped.cursor.position, five.cursor.position);
  EXPECT_EQ(stopped.tokens_seen, five.tokens_seen);
  EXPECT_EQ(stopped.nonfinite_in_a_row, 3);
  // ... and step 5's random streams: step 6's forward pass drew dropout masks before the stop
  // was noticed, and those draws are undone (a resume continues as the clean run would).
  auto rng_of = [](const fs::path& f) {
    const Config c = config_from_yaml(read_checkpoint_config(f), f.string());
    BertModel model(c.model);
    const auto optimizer = make_optimizer(*model, c.train);
    load_checkpoint(f, *model, optimizer.get());  // sets the saved streams into torch's generators
    return RandomStates::capture(torch::kCPU).cpu;
  };
  EXPECT_TRUE(torch::equal(rng_of(*latest_checkpoint(run)), rng_of(*latest_checkpoint(clean))));
}

}  // namespace
}  // namespace rpe

// The training engine (train/engine.h) on a toy least-squares task, against closed-form
// references: the step's on-device statistics, gradient accumulation, the non-finite guard, the
// log rows; and two pretraining properties: a resumed run's summary.json equals an
// uninterrupted one's, and non-finite weights are never saved (issue 17, train.lr = inf).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "config/model_size.h"
#include "tiny_run.h"
#include "toy_engine.h"
#include "train/checkpoint.h"
#include "train/engine.h"
#include "train/log_window.h"
#include "train/metrics.h"
#include "train/optim.h"
#include "train/trainer.h"
#include "util/errors.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;
using test::ToyRun;
using test::toy_options;

TEST(Engine, StepReturnsOnDeviceStatsEqualToClosedForm) {
  ToyRun r(toy_options(1, 1));
  const auto w = r.model->weight.detach().to(torch::kDouble).clone();  // [1, 4]
  const auto b = r.model->bias.detach().to(torch::kDouble).clone();    // [1]
  const auto x = r.data.x.to(torch::kDouble), y = r.data.y.to(torch::kDouble);
  const auto err = x.matmul(w.t()).squeeze(-1) + b - y;                 // [16]
  const double loss_ref = err.pow(2).mean().item<double>();
  // d/dw mean(err^2) = 2/N err^T x ; d/db = 2/N sum(err)
  const auto gw = 2.0 / 16 * err.matmul(x), gb = 2.0 / 16 * err.sum();
  const double gnorm_ref = std::sqrt(gw.pow(2).sum().item<double>() + gb.pow(2).item<double>());

  const StepStats st = r.engine->step(0);
  for (const auto* t : {&st.loss, &st.correct, &st.count, &st.tokens, &st.grad_norm, &st.finite}) {
    ASSERT_TRUE(t->defined());
    EXPECT_EQ(t->dim(), 0);
    EXPECT_EQ(t->device(), torch::Device(torch::kCPU));  // the engine's device: tensors, not host numbers
  }
  EXPECT_NEAR(st.loss.item<double>(), loss_ref, 1e-6 * loss_ref);
  EXPECT_NEAR(st.grad_norm.item<double>(), gnorm_ref, 1e-5 * gnorm_ref);
  EXPECT_EQ(st.count.item<double>(), 16.0);
  EXPECT_EQ(st.tokens.item<double>(), 48.0);
  EXPECT_TRUE(st.finite.item<bool>());
  EXPECT_TRUE(torch::equal(r.model->weight.detach().to(torch::kDouble), w));  // step() leaves the update to run()
}

// Pretraining and fine-tuning alike: the global batch splits evenly over micro-batches and
// ranks, or the run is refused (a floored share would train on 30 of a "batch 32" on 3 GPUs).
TEST(Engine, TheBatchSplitsEvenlyOverMicroBatchesAndRanksOrIsRefused) {
  TrainOptions t;
  t.batch_size = 32;
  t.grad_accum = 2;
  EXPECT_EQ(micro_batch_size(t, 1), 16);
  EXPECT_EQ(micro_batch_size(t, 4), 4);
  try {
    micro_batch_size(t, 3);
    FAIL() << "batch 32 over 2 x 3 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("train.batch_size (32) is not divisible by grad_accum x world size (2 x 3)"),
              std::string::npos) << e.what();
  }
}

// A learned absolute table with fewer rows than the pretraining length is refused before any
// data is read (it would fail at the first forward pass); a relative method clips instead.
TEST(PretrainSummary, AnAbsoluteTableShorterThanTheSequencesIsRefusedUpFront) {
  for (const std::string sets : {"model.attention.method=absolute", "model.attention.add_absolute=true"}) {
    const Config cfg = test::tiny_config({sets, "model.max_position=16", "data.max_seq_len=32"});
    try {
      pretrain(cfg, test::fresh_dir("short_table"), {});
      FAIL() << sets << ": pretrained";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("data.max_seq_len: 32 exceeds model.max_position (16)"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Engine, AccumulationOfHalfBatchesEqualsTheFullBatch) {
  ToyRun one(toy_options(4, 1)), two(toy_options(4, 2));
  one.engine->run(TrainState{});
  two.engine->run(TrainState{});
  EXPECT_LE((one.model->weight - two.model->weight).abs().max().item<double>(), 1e-6);
  EXPECT_LE((one.model->bias - two.model->bias).abs().max().item<double>(), 1e-6);
  EXPECT_FALSE(torch::equal(one.model->weight, ToyRun(toy_options(4, 1)).model->weight));  // it did train
}

// Both update paths: AdamW's and LAMB's skip decided on the device (the host settles the flag
// a step later), LibTorch's SGD's on the host.
TEST(Engine, NonFiniteLossSkipsTheUpdateAndLeavesWeightsUnchanged) {
  for (const char* optimizer : {"adamw", "lamb", "sgd"}) {
    SCOPED_TRACE(optimizer);
    std::vector<torch::Tensor> after;  // weights after each optimizer step
    torch::nn::Linear* m = nullptr;
    EngineHooks hooks;
    hooks.on_loss = [](int64_t step, torch::Tensor& loss) {
      if (step == 1) loss = loss * std::numeric_limits<double>::quiet_NaN();
    };
    hooks.on_step = [&](int64_t, double) { after.push_back((*m)->weight.detach().clone()); };
    auto t = toy_options(3, 2);
    t.optimizer = optimizer;
    ToyRun r(t, hooks);
    m = &r.model;
    const EngineResult e = r.engine->run(TrainState{});
    ASSERT_EQ(after.size(), 3u);
    EXPECT_TRUE(torch::equal(after[0], after[1]));  // step 2 skipped
    EXPECT_FALSE(torch::equal(after[1], after[2]));
    EXPECT_EQ(e.state.nonfinite_total, 1);
    EXPECT_EQ(e.state.nonfinite_in_a_row, 0);
    EXPECT_TRUE(torch::isfinite(r.model->weight).all().item<bool>());
  }
}

TEST(Engine, TooManyNonFiniteStepsInARowStop) {
  for (const char* optimizer : {"adamw", "lamb", "sgd"}) {
    SCOPED_TRACE(optimizer);
    EngineHooks hooks;
    hooks.on_loss = [](int64_t step, torch::Tensor& loss) {
      if (step >= 1) loss = loss * std::numeric_limits<double>::infinity();
    };
    auto t = toy_options(10, 1);
    t.optimizer = optimizer;
    t.log_every = 7;  // the stop comes from the step's own bookkeeping, not from a log line
    ToyRun r(t, hooks);
    const auto msg = test::user_error([&] { r.engine->run(TrainState{}); });
    EXPECT_NE(msg.find("training stopped at step 4: 3 non-finite"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("last good weights"), std::string::npos) << msg;
  }
}

// A step whose batches score nothing (an MLM step that masked no token: count 0, loss 0) is no
// loss of 0 in its window: the window's loss is the mean over the items it scored.
TEST(Engine, AStepThatScoresNothingLeavesTheWindowsLoss) {
  const fs::path file = test::fresh_dir("engine_unscored") / "metrics.jsonl";
  std::vector<double> losses;
  EngineHooks hooks;
  hooks.on_step = [&](int64_t, double loss) { losses.push_back(loss); };
  ToyRun r(toy_options(4, 1), hooks, file);
  r.task->unscored = 1;  // step 1's only micro-batch
  r.engine->run(TrainState{});
  const auto rows = test::read_jsonl(file);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_EQ(losses[1], 0.0);
  EXPECT_NEAR(rows[0]["loss"].get<double>(), losses[0], 1e-12);
  EXPECT_NEAR(rows[1]["loss"].get<double>(), (losses[2] + losses[3]) / 2, 1e-12);
}

// A checkpoint written before the loss was summed over items kept six entries, the loss summed
// over steps: restored as the steps' mean over the window's items, its row reads the same.
TEST(Engine, AnOlderLogWindowSnapshotIsRestoredOverItems) {
  LogWindow w(torch::kCPU);
  w.restore({5.0, 1.0, 4.0, 10.0, 2, 0});  // two steps of mean loss 2 and 3, 10 items scored
  EXPECT_DOUBLE_EQ(w.sums[0].item<double>() / w.sums[3].item<double>(), 2.5);
  EXPECT_EQ(w.snapshot(), (std::vector<double>{25.0, 1.0, 4.0, 10.0, 2, 0, 1}));
  LogWindow again(torch::kCPU);
  again.restore(w.snapshot());  // today's seven: as they are
  EXPECT_EQ(again.snapshot(), w.snapshot());
}

// The progress line's ETA: a paper-scale run counts in days.
TEST(Progress, DurationsReadAsTheirLargestUnits) {
  EXPECT_EQ(format_duration(12.4), "12s");
  EXPECT_EQ(format_duration(200), "3m20s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(2 * 86400 + 5 * 3600 + 59), "2d05h");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(std::nan("")), "?");
}

// FLOP/s on the progress line: three significant digits, tera from 1e12 on, giga below (a CPU).
TEST(Progress, FlopsReadAsTeraOrGiga) {
  EXPECT_EQ(flops_text(142.37e12), "142 TFLOP/s");
  EXPECT_EQ(flops_text(3.1534e12), "3.15 TFLOP/s");
  EXPECT_EQ(flops_text(86.23e9), "86.2 GFLOP/s");
  EXPECT_EQ(flops_text(2250.4e12), "2250 TFLOP/s");  // no exponent for a device beyond 1 PFLOP/s
  EXPECT_EQ(flops_text(std::nan("")), "?");
}

// Each training row's model FLOP/s per device is its tokens/s times the model FLOPs of a token
// (config/model_size.h) of the run's resolved config.
TEST(Progress, RowsGiveModelFlopsPerDevice) {
  const fs::path run = test::fresh_dir("flops_rows");
  pretrain(test::tiny_config({"train.max_steps=4", "train.log_every=2"}), run, {});
  const Config cfg = load_config(run / "config.yaml");
  const double per_token = model_flops_per_token(cfg.model, 0, cfg.data.max_seq_len, cfg.data.mask_prob);
  ASSERT_GT(per_token, 0.0);
  int rows = 0;
  for (const auto& row : test::read_jsonl(run / "metrics.jsonl")) {
    if (row.contains("split")) continue;
    ++rows;
    EXPECT_NEAR(row.at("model_tflops_per_device").get<double>(), row.at("tokens_per_s").get<double>() * per_token / 1e12,
                1e-12 * per_token) << row.dump();
  }
  EXPECT_EQ(rows, 2);
}

// The progress line's means of nothing -- the accuracy of a window whose batches masked no token,
// the loss and gradient norm of one whose steps were all skipped -- read "none", never "nan".
TEST(Progress, AMeanOfNothingIsNone) {
  EXPECT_EQ(mean_text(3, 4, 3), "0.750");
  EXPECT_EQ(mean_text(0, 0, 3), "none");
  EXPECT_EQ(mean_text(9.87654, 2, 4), "4.9383");  // a window's mean loss; none when every step was skipped
  EXPECT_EQ(mean_text(std::nan(""), 0, 4), "none");
}

TEST(Engine, LogRowsEqualTheStepsTheyAverage) {
  const fs::path file = test::fresh_dir("engine_log") / "metrics.jsonl";
  std::vector<double> losses;
  EngineHooks hooks;
  hooks.on_step = [&](int64_t, double loss) { losses.push_back(loss); };
  ToyRun r(toy_options(4, 2), hooks, file);
  r.engine->run(TrainState{});
  const auto rows = test::read_jsonl(file);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_EQ(rows[0]["step"], 2);
  EXPECT_NEAR(rows[0]["loss"].get<double>(), (losses[0] + losses[1]) / 2, 1e-12);
  EXPECT_NEAR(rows[1]["loss"].get<double>(), (losses[2] + losses[3]) / 2, 1e-12);
  EXPECT_EQ(rows[1]["tokens_seen"], 4 * 48);
  EXPECT_FALSE(rows[0].contains("mlm_accuracy"));  // the toy task reports no accuracy
  EXPECT_DOUBLE_EQ(logged_losses(file).first, rows[0]["loss"].get<double>());
  EXPECT_DOUBLE_EQ(logged_losses(file).last, rows[1]["loss"].get<double>());
}

TEST(Engine, GradNormAndClippingMatchTheDoubleReference) {
  torch::manual_seed(11);
  std::vector<torch::Tensor> params;
  double sq = 0;
  for (int64_t n : {3, 17, 64}) {
    auto p = torch::randn({n}).requires_grad_();
    p.mutable_grad() = torch::randn({n});
    sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
    params.push_back(p);
  }
  const auto norm = global_grad_norm(params);
  EXPECT_NEAR(norm.item<double>(), std::sqrt(sq), 1e-5 * std::sqrt(sq));
  clip_gradients(params, norm, std::sqrt(sq) / 4);
  EXPECT_NEAR(global_grad_norm(params).item<double>(), std::sqrt(sq) / 4, 1e-4 * std::sqrt(sq));
  const auto before = params[0].grad().clone();
  clip_gradients(params, global_grad_norm(params), 1e9);  // below the limit: unchanged
  EXPECT_TRUE(torch::equal(before, params[0].grad()));
}

// A run folder's summary.json without the fields that differ between identical runs.
nlohmann::json summary_without_timings(const fs::path& run) {
  std::ifstream in(run / "summary.json");
  auto j = nlohmann::json::parse(in);
  for (const char* k : {"wall_s", "train_s", "peak_rss_bytes", "peak_device_bytes"}) j.erase(k);
  return j;
}

// A new run that stops on its inputs before it trains anything leaves no folder (the corrected
// command is not refused as "already exists"); one that had trained its tokenizer first keeps the
// folder, tokenizer and train.log, whatever the error (another rank's failure or a collective's
// timeout reach rank 0 as user errors too, and used to delete a tokenizer that may take hours).
TEST(PretrainFolder, AFailureAfterTheTokenizerIsTrainedKeepsIt) {
  const fs::path early = test::fresh_dir("fails_early") / "run";
  EXPECT_THROW(pretrain(test::tiny_config({"data.train_files=[" + (early.parent_path() / "missing.txt").string() + "]"}),
                       early, {}),
               UserError);
  EXPECT_FALSE(fs::exists(early));
  const fs::path late = test::fresh_dir("fails_after_tokenizer") / "run";
  const Config cfg = test::tiny_config({"data.tokenizer_model=", "data.tokenizer_vocab_size=200", "model.vocab_size=50"});
  try {
    pretrain(cfg, late, {});
    FAIL() << "a vocabulary smaller than the tokenizer's was taken";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("smaller than the tokenizer's"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(late / "tokenizer.model"));
  std::ifstream log(late / "train.log");
  std::string line, last;
  while (std::getline(log, line)) last = line;
  EXPECT_NE(last.find("smaller than the tokenizer's"), std::string::npos) << last;
}

// summary.json of a run resumed after a crash equals the uninterrupted run's, timings aside.
TEST(PretrainSummary, ResumedRunReportsTheSameSummary) {
  const Config cfg = test::tiny_config({"train.max_steps=8", "train.save_every=4"});
  struct Crash : std::runtime_error {
    Crash() : std::runtime_error("crash") {}
  };
  const fs::path a = test::fresh_dir("summary_a"), b = test::fresh_dir("summary_b");
  pretrain(cfg, a, {});
  PretrainHooks crash;
  crash.on_step = [](int64_t step, double) {
    if (step == 7) throw Crash();
  };
  EXPECT_THROW(pretrain(cfg, b, {}, crash), Crash);
  pretrain(cfg, b, {.resume = true});
  EXPECT_EQ(summary_without_timings(a), summary_without_timings(b));
}

// The run's training time goes on across processes: a resume starts from the elapsed_s of the
// last row before its checkpoint (summary.json's train_s, later rows' elapsed_s), where wall_s
// is this process's alone. (Not kept in checkpoints: identical runs write identical files.)
TEST(PretrainSummary, TrainingTimeAddsUpAcrossResumes) {
  const fs::path run = test::fresh_dir("train_seconds");
  pretrain(test::tiny_config({"train.max_steps=4", "train.save_every=2", "train.log_every=2"}), run, {});
  {  // as if the first process had trained for 1000 s more: its rows say so
    std::ifstream in(run / "metrics.jsonl");
    std::string text;
    for (std::string line; std::getline(in, line);) {
      auto row = nlohmann::json::parse(line);
      if (row.contains("elapsed_s")) row["elapsed_s"] = row["elapsed_s"].get<double>() + 1000.0;
      text += row.dump() + "\n";
    }
    std::ofstream(run / "metrics.jsonl") << text;
  }
  pretrain(test::tiny_config({"train.max_steps=8", "train.save_every=2", "train.log_every=2"}), run, {.resume = true});
  std::ifstream in(run / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  EXPECT_GE(summary["train_s"].get<double>(), 1000.0);
  EXPECT_LT(summary["wall_s"].get<double>(), 1000.0);
  std::ifstream metrics(run / "metrics.jsonl");
  int later = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto row = nlohmann::json::parse(line);
    if (row.contains("elapsed_s") && row["step"].get<int64_t>() > 4) {
      EXPECT_GE(row["elapsed_s"].get<double>(), 1000.0) << line;
      ++later;
    }
  }
  EXPECT_GT(later, 0);
}

// A finished run resumed to train further is unfinished until it ends again: its old
// summary.json goes, so `finetune` without --init does not take it for a finished run.
TEST(PretrainSummary, ARunResumedToMoreStepsIsNotFinishedUntilItEnds) {
  const fs::path run = test::fresh_dir("summary_extended");
  pretrain(test::tiny_config({"train.max_steps=4", "train.save_every=2"}), run, {});
  ASSERT_TRUE(fs::exists(run / "summary.json"));
  struct Crash : std::runtime_error {
    Crash() : std::runtime_error("crash") {}
  };
  PretrainHooks crash;
  crash.on_step = [](int64_t step, double) {
    if (step == 6) throw Crash();
  };
  const Config longer = test::tiny_config({"train.max_steps=8", "train.save_every=2"});
  EXPECT_THROW(pretrain(longer, run, {.resume = true}, crash), Crash);
  EXPECT_FALSE(fs::exists(run / "summary.json"));
  pretrain(longer, run, {.resume = true});
  EXPECT_TRUE(fs::exists(run / "summary.json"));
}

// Killed after the final checkpoint was written, before summary.json (with or without the
// final evaluation's row): the resumed run redoes the final evaluation once and reports the
// uninterrupted run's metrics.jsonl and summary.json (the kill test found the duplicate row
// and a final_loss of 0 by chance).
TEST(PretrainSummary, ResumedFromTheFinalCheckpointRedoesOnlyTheEnd) {
  const Config cfg = test::tiny_config({"train.max_steps=8", "train.save_every=4", "train.log_every=4"});
  const fs::path a = test::fresh_dir("final_a");
  pretrain(cfg, a, {});
  // metrics rows without their timings
  auto read_rows = [](const fs::path& f) {
    auto rows = test::read_jsonl(f);
    for (auto& row : rows)
      for (const char* k : {"elapsed_s", "tokens_per_s", "model_tflops_per_device"}) row.erase(k);
    return rows;
  };
  const auto rows = read_rows(a / "metrics.jsonl");
  ASSERT_FALSE(rows.empty());
  ASSERT_EQ(rows.back().value("split", ""), "valid");  // the final evaluation is the last row
  ASSERT_EQ(rows.back()["step"], 8);
  for (const bool eval_row_written : {true, false}) {
    SCOPED_TRACE(eval_row_written ? "killed after the final evaluation" : "killed before it");
    const fs::path b = test::fresh_dir(eval_row_written ? "final_b1" : "final_b2");
    fs::copy(a, b, fs::copy_options::recursive);
    fs::remove(b / "summary.json");
    if (!eval_row_written) {
      std::string kept;
      for (size_t i = 0; i + 1 < rows.size(); ++i) kept += rows[i].dump() + "\n";
      std::ofstream(b / "metrics.jsonl") << kept;
    }
    pretrain(cfg, b, {.resume = true});
    EXPECT_EQ(read_rows(b / "metrics.jsonl"), rows);
    EXPECT_EQ(summary_without_timings(b), summary_without_timings(a));
  }
}

// Issue 17: with train.lr = inf the first update makes the weights non-finite; the run must
// stop without saving them or calling anything "last good weights".
TEST(PretrainSummary, NonFiniteWeightsAreNeverSaved) {
  Config cfg = test::tiny_config({"train.max_steps=20", "train.max_nonfinite_in_a_row=2"});
  cfg.train.lr = std::numeric_limits<double>::infinity();  // set past the config's validation
  const fs::path run = test::fresh_dir("lr_inf");
  const auto msg = test::user_error([&] { pretrain(cfg, run, {}); });
  EXPECT_NE(msg.find("weights became non-finite"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not saved"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("last good weights"), std::string::npos) << msg;
  EXPECT_FALSE(latest_checkpoint(run).has_value());
}

// fp16 at S = 2^100: every step overflows and is skipped, the run goes on.
// No window has a training loss: summary.json says null, not a loss of 0.
TEST(PretrainSummary, ARunWithoutUpdatesReportsNoTrainingLoss) {
  const Config cfg = test::tiny_config({"train.max_steps=4", "train.log_every=2", "train.precision=fp16",
                                        "train.fp16_init_scale=1.2676506002282294e30"});
  const fs::path run = test::fresh_dir("all_skipped");
  const PretrainResult r = pretrain(cfg, run, {});
  EXPECT_TRUE(std::isnan(r.first_loss));
  EXPECT_TRUE(std::isnan(r.final_loss));
  const auto j = summary_without_timings(run);
  EXPECT_TRUE(j["first_loss"].is_null()) << j.dump();
  EXPECT_TRUE(j["final_loss"].is_null()) << j.dump();
  EXPECT_EQ(j["nonfinite_skipped"], 4);
  EXPECT_TRUE(j["valid_loss"].is_number()) << j.dump();  // the held-out loss of the initial weights
}

}  // namespace
// train.activation_checkpointing changes memory, not training: the same losses and gradient
// norms, step by step, as the plain run (dropout on, so the recomputed pieces must draw the
// masks the forward pass drew).
TEST(PretrainSummary, ActivationCheckpointingTrainsAsThePlainRun) {
  const std::vector<std::string> base{"train.max_steps=4", "train.log_every=1", "model.dropout=0.1",
                                      "model.attention.method=m4"};
  auto training_rows = [](const fs::path& run) {  // the progress rows (metrics.jsonl also holds evaluations)
    std::vector<nlohmann::json> rows;
    for (const auto& row : test::read_jsonl(run / "metrics.jsonl"))
      if (row.contains("grad_norm")) rows.push_back(row);
    return rows;
  };
  const fs::path plain = test::fresh_dir("recompute_none");
  pretrain(test::tiny_config(base), plain, {});
  const auto a = training_rows(plain);
  ASSERT_EQ(a.size(), 4u);
  for (const std::string what : {"layers", "attention", "bias"}) {
    auto with = base;
    with.push_back("train.activation_checkpointing=" + what);
    const fs::path run = test::fresh_dir("recompute_" + what);
    pretrain(test::tiny_config(with), run, {});
    const auto b = training_rows(run);
    ASSERT_EQ(b.size(), a.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) {
      const double loss = a[i]["loss"].get<double>(), norm = a[i]["grad_norm"].get<double>();
      EXPECT_NEAR(b[i]["loss"].get<double>(), loss, 1e-5 * loss) << what << ", row " << i;
      EXPECT_NEAR(b[i]["grad_norm"].get<double>(), norm, 1e-5 * norm) << what << ", row " << i;
    }
  }
}

}  // namespace rpe

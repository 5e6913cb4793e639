// Stopping on a signal (util/stop_signals.h, train/engine.h): the handlers' own rules, and a
// pretraining run that gets SIGTERM mid-run stops after the next step with a checkpoint from
// which --resume ends bitwise equal to an uninterrupted run (losses, parameters, metrics rows).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <csignal>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model/bert.h"
#include "tiny_run.h"
#include "toy_engine.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "util/stop_signals.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

int g_foreign = 0;  // the handler a test installs before StopSignals, to see it put back
extern "C" void foreign_handler(int signal) { g_foreign = signal; }

void (*handler_of(int signal))(int) {
  struct sigaction now {};
  sigaction(signal, nullptr, &now);
  return now.sa_handler;
}

TEST(StopSignals, TheFirstIsKeptEachIsCaughtOnceIgnoredOnesStayIgnoredAndTheOldHandlersComeBack) {
  std::signal(SIGUSR1, foreign_handler);
  EXPECT_EQ(StopSignals::requested(), 0);
  {
    StopSignals signals;
    EXPECT_THROW(StopSignals(), std::logic_error);
    EXPECT_EQ(StopSignals::requested(), 0);
    std::raise(SIGUSR1);
    EXPECT_EQ(StopSignals::requested(), SIGUSR1);
    EXPECT_EQ(handler_of(SIGUSR1), SIG_DFL);  // a second SIGUSR1 would act as usual (here: kill)
    EXPECT_NE(handler_of(SIGINT), SIG_DFL);   // the other signals are still caught ...
    std::raise(SIGINT);
    EXPECT_EQ(StopSignals::requested(), SIGUSR1);  // ... but the first one is the one reported
    EXPECT_EQ(g_foreign, 0);
  }
  EXPECT_EQ(StopSignals::requested(), 0);  // forgotten with the handlers
  EXPECT_EQ(handler_of(SIGUSR1), foreign_handler);
  EXPECT_EQ(handler_of(SIGINT), SIG_DFL);
  std::signal(SIGUSR1, SIG_DFL);
  std::signal(SIGHUP, SIG_IGN);  // as nohup starts a process
  {
    StopSignals signals;
    std::raise(SIGHUP);
    EXPECT_EQ(StopSignals::requested(), 0);
    EXPECT_EQ(handler_of(SIGHUP), SIG_IGN);
  }
  EXPECT_EQ(handler_of(SIGHUP), SIG_IGN);
  std::signal(SIGHUP, SIG_DFL);
  EXPECT_EQ(StopSignals::name(SIGTERM), "SIGTERM");
  EXPECT_EQ(StopSignals::name(SIGHUP), "SIGHUP");
}

std::map<std::string, torch::Tensor> params_of(const fs::path& checkpoint) {
  BertModel model(config_from_yaml(read_checkpoint_config(checkpoint), checkpoint.string()).model);
  load_checkpoint(checkpoint, *model, nullptr);
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : model->named_parameters()) out[p.key()] = p.value().detach().clone();
  return out;
}

// metrics.jsonl's rows without the fields of this process's clock.
std::vector<nlohmann::json> untimed_rows(const fs::path& run) {
  auto rows = test::read_jsonl(run / "metrics.jsonl");
  for (auto& row : rows) {
    row.erase("tokens_per_s");
    row.erase("elapsed_s");
  }
  return rows;
}

// {optimizer, the step after which SIGTERM arrives}. The run stops after the next step: step 4
// lies between two log steps (its window resumes), step 6 is a log step (its row is written
// before the stop), with an evaluation at 6 as well.
class StopOnSignal : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(StopOnSignal, StopsAfterTheNextStepWithACheckpointAndResumesExactly) {
  const auto [optimizer, signal_at] = GetParam();
  const std::string name = optimizer + "_" + std::to_string(signal_at);
  const Config cfg = test::tiny_config({"train.optimizer=" + optimizer, "train.max_steps=9", "train.log_every=3",
                                        "train.eval_every=6", "train.save_every=0"});
  std::vector<double> straight, stopped;
  PretrainHooks record;
  record.on_step = [&](int64_t, double loss) { straight.push_back(loss); };
  const fs::path a = test::fresh_dir("stop_a_" + name), b = test::fresh_dir("stop_b_" + name);
  pretrain(cfg, a, {}, record);

  PretrainHooks term;
  term.on_step = [&](int64_t step, double loss) {
    stopped.push_back(loss);
    if (step == signal_at) std::raise(SIGTERM);
  };
  try {
    pretrain(cfg, b, {}, term);
    FAIL() << "the run did not stop";
  } catch (const StopRequested& e) {
    EXPECT_EQ(e.signal(), SIGTERM);
    EXPECT_NE(std::string(e.what()).find("stopped on request (SIGTERM) after step " + std::to_string(signal_at + 1)),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(StopSignals::requested(), 0);  // handlers gone with the run
  EXPECT_EQ(handler_of(SIGTERM), SIG_DFL);
  const auto kept = list_checkpoints(b);  // the stop's checkpoint alone (save_every 0)
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept.front().first, signal_at + 1);
  EXPECT_FALSE(fs::exists(b / "summary.json"));  // not finished

  // The device-stepped optimizers read the request one step late: the next step's forward and
  // backward ran, and were undone (data position, random streams).
  ASSERT_EQ(stopped.size(), static_cast<size_t>(signal_at + 1));
  PretrainHooks after;
  after.on_step = [&](int64_t, double loss) { stopped.push_back(loss); };
  pretrain(cfg, b, {.resume = true}, after);
  ASSERT_EQ(stopped, straight);
  const auto pa = params_of(*latest_checkpoint(a)), pb = params_of(*latest_checkpoint(b));
  for (const auto& [key, t] : pa) EXPECT_TRUE(torch::equal(t, pb.at(key))) << key;
  EXPECT_EQ(untimed_rows(b), untimed_rows(a));
}
INSTANTIATE_TEST_SUITE_P(Steps, StopOnSignal,
                         ::testing::Combine(::testing::Values("adamw", "lamb"), ::testing::Values(3, 5)));

// An optimizer the host steps (LibTorch's SGD): the flag is read with the step's own, the run
// stops after that step.
TEST(StopOnSignal, AHostSteppedOptimizerStopsAfterTheStepItReads) {
  auto t = test::toy_options(10, 1);
  t.optimizer = "sgd";
  EngineHooks hooks;
  hooks.on_step = [](int64_t step, double) {
    if (step == 2) std::raise(SIGINT);
  };
  const fs::path run = test::fresh_dir("stop_sgd");
  test::ToyRun r(t, hooks, {}, run, nullptr, /*stop_on_signals=*/true);
  try {
    r.engine->run(TrainState{});
    FAIL() << "the run did not stop";
  } catch (const StopRequested& e) {
    EXPECT_EQ(e.signal(), SIGINT);
  }
  const auto kept = list_checkpoints(run);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept.front().first, 3);
}

}  // namespace
}  // namespace rpe

// Stopping on a signal (util/stop_signals.h, train/engine.h): the handlers' own rules (the
// first signal kept, its echoes taken as the same request, a late repeat ending the process,
// ignored signals left ignored), and a pretraining run that gets SIGTERM mid-run stops after
// the next step with a checkpoint from which --resume ends bitwise equal to an uninterrupted run
// (losses, parameters, metrics rows); fp16's loss scale and accumulation included (toy task).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "dist/data_parallel.h"
#include "finetune/resume.h"
#include "finetune/seed_run.h"
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

// Each test starts with the four signals at their default action and puts back what the test
// process had (a test binary started in the background by a script has SIGINT ignored).
class StopSignalTest : public ::testing::Test {
 protected:
  static constexpr std::array<int, 4> kSignals = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
  void SetUp() override {
    for (size_t i = 0; i < kSignals.size(); ++i) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigaction(kSignals[i], &dfl, &before_[i]);
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &before_[i], nullptr);
  }

 private:
  std::array<struct sigaction, kSignals.size()> before_{};
};

using StopSignalsTest = StopSignalTest;

TEST_F(StopSignalsTest, TheFirstIsKeptItsEchoesAreOneRequestIgnoredOnesStayIgnoredOldHandlersComeBack) {
  std::signal(SIGUSR1, foreign_handler);
  EXPECT_EQ(StopSignals::requested(), 0);
  {
    StopSignals signals;
    EXPECT_THROW(StopSignals(), std::logic_error);
    EXPECT_EQ(StopSignals::requested(), 0);
    std::raise(SIGUSR1);
    EXPECT_EQ(StopSignals::requested(), SIGUSR1);
    std::raise(SIGUSR1);  // torchrun's copy of Slurm's signal, milliseconds later: the same request
    std::raise(SIGINT);
    EXPECT_EQ(StopSignals::requested(), SIGUSR1);  // the first one is the one reported
    EXPECT_NE(handler_of(SIGUSR1), SIG_DFL);       // still caught
    EXPECT_EQ(g_foreign, 0);
  }
  EXPECT_EQ(StopSignals::requested(), 0);  // forgotten with the handlers
  EXPECT_EQ(handler_of(SIGUSR1), foreign_handler);
  EXPECT_EQ(handler_of(SIGINT), SIG_DFL);
  std::signal(SIGHUP, SIG_IGN);  // as nohup starts a process
  {
    StopSignals signals;
    std::raise(SIGHUP);
    EXPECT_EQ(StopSignals::requested(), 0);
    EXPECT_EQ(handler_of(SIGHUP), SIG_IGN);
  }
  EXPECT_EQ(handler_of(SIGHUP), SIG_IGN);
  EXPECT_EQ(StopSignals::name(SIGTERM), "SIGTERM");
  EXPECT_EQ(StopSignals::name(SIGHUP), "SIGHUP");
}

// A repeat later than the echo window (a second Ctrl-C while the checkpoint is written) ends the
// process by that signal. In a child process: exit 0 = it survived, 3 = no request recorded.
TEST_F(StopSignalsTest, ALateRepeatEndsTheProcessByTheSignal) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    StopSignals signals;
    std::raise(SIGTERM);
    std::raise(SIGTERM);
    if (StopSignals::requested() != SIGTERM) ::_exit(3);
    std::this_thread::sleep_for(std::chrono::nanoseconds(StopSignals::kEchoWindowNs) + std::chrono::milliseconds(200));
    const char alive = 'a';  // survived the first two: the one below must be what ends it
    if (::write(pipe_fds[1], &alive, 1) != 1) ::_exit(4);
    std::raise(SIGTERM);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char got = 0;
  const ssize_t n = ::read(pipe_fds[0], &got, 1);
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(n, 1) << "the child did not live until the late repeat";
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

// Fine-tuning holds the handlers over all its seeds (a signal in a seed's final evaluation lets
// it finish): the engine leaves an outer StopSignals in place, and the check before the next
// seed ends the run by the signal that came, naming it and what continues the run.
TEST_F(StopSignalsTest, ASignalBetweenSeedsStopsBeforeTheNextSeed) {
  dist::DataParallel single;
  finetune::SeedContext ctx;
  ctx.dp = &single;
  ctx.seed = 2;
  ctx.resume_hint = "--resume continues";
  EXPECT_NO_THROW(finetune::stop_between_seeds(ctx, /*trained_one=*/true, 0.0)) << "no signal, no limit";
  StopSignals outer;
  EXPECT_TRUE(StopSignals::installed());
  std::raise(SIGUSR1);  // caught: the process goes on
  try {
    finetune::stop_between_seeds(ctx, /*trained_one=*/false, 0.0);
    ADD_FAILURE() << "no stop before seed 2";
  } catch (const StopRequested& e) {
    EXPECT_EQ(e.signal(), SIGUSR1);
    EXPECT_EQ(std::string(e.what()),
              "stopped on request (SIGUSR1) before seed 2 (the seeds before it finished); --resume continues");
  }
}

std::map<std::string, torch::Tensor> checkpoint_params(const fs::path& checkpoint) {
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
    row.erase("model_tflops_per_device");
    row.erase("elapsed_s");
  }
  return rows;
}

// {optimizer, the 0-based step in whose first forward pass SIGTERM arrives}: the run stops
// after that step (the request is read just before the step's all-reduce). Step 4 lies between
// two log steps (its window resumes), step 6 is a log step (its row is written before the stop),
// with an evaluation at 6 as well.
class StopOnSignal : public StopSignalTest, public ::testing::WithParamInterface<std::tuple<std::string, int>> {};

TEST_P(StopOnSignal, StopsAfterTheStepTheSignalCameInAndResumesExactly) {
  const auto [optimizer, signal_at] = GetParam();
  const std::string name = optimizer + "_" + std::to_string(signal_at);
  const Config cfg = test::tiny_config({"train.optimizer=" + optimizer, "train.max_steps=9", "train.log_every=3",
                                        "train.eval_every=6", "train.save_every=0", "train.grad_accum=2"});
  std::vector<double> straight, stopped;
  PretrainHooks record;
  record.on_step = [&](int64_t, double loss) { straight.push_back(loss); };
  const fs::path a = test::fresh_dir("stop_a_" + name), b = test::fresh_dir("stop_b_" + name);
  pretrain(cfg, a, {}, record);

  PretrainHooks term;
  term.on_step = [&](int64_t, double loss) { stopped.push_back(loss); };
  bool raised = false;
  term.on_loss = [&](int64_t step, torch::Tensor&) {
    if (step == signal_at && !raised) {  // once: two micro-batches a step
      raised = true;
      std::raise(SIGTERM);
    }
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
  const auto pa = checkpoint_params(*latest_checkpoint(a)), pb = checkpoint_params(*latest_checkpoint(b));
  for (const auto& [key, t] : pa) EXPECT_TRUE(torch::equal(t, pb.at(key))) << key;
  EXPECT_EQ(untimed_rows(b), untimed_rows(a));
}
INSTANTIATE_TEST_SUITE_P(Steps, StopOnSignal,
                         ::testing::Combine(::testing::Values("adamw", "lamb"), ::testing::Values(3, 5)));

using StopAtTheEnd = StopSignalTest;

// SIGTERM in the last step: the run stops after its final checkpoint, before the final
// evaluation and summary.json, which --resume then does alone (the same rows as a run never
// stopped).
TEST_F(StopAtTheEnd, ASignalInTheLastStepStopsAfterTheFinalCheckpoint) {
  const Config cfg = test::tiny_config({"train.max_steps=4", "train.log_every=2"});
  const fs::path a = test::fresh_dir("stop_end_a"), b = test::fresh_dir("stop_end_b");
  pretrain(cfg, a, {});
  PretrainHooks term;
  term.on_step = [](int64_t step, double) {
    if (step == 4) std::raise(SIGTERM);
  };
  EXPECT_THROW(pretrain(cfg, b, {}, term), StopRequested);
  ASSERT_TRUE(latest_checkpoint(b).has_value());
  EXPECT_EQ(latest_checkpoint(b)->filename(), checkpoint_file(b, 4).filename());
  EXPECT_FALSE(fs::exists(b / "summary.json"));
  pretrain(cfg, b, {.resume = true});
  EXPECT_TRUE(fs::exists(b / "summary.json"));
  EXPECT_EQ(untimed_rows(b), untimed_rows(a));
}

using StopOnSignalToy = StopSignalTest;

// fp16 from loss scale 2^30 (the first steps overflow and halve it) with two micro-batches a
// step, a constant lr: stopped after step 4 by a signal after step 3, the checkpoint holds what
// an uninterrupted 4-step run ends with (weights, loss scale and its streak, data position,
// tokens, skipped steps; not the log window: that run logged at its end), though step 5's forward and backward ran (and updated the scale) before
// the stop was read.
TEST_F(StopOnSignalToy, Fp16LossScaleAndAccumulationAreThoseOfTheStepStoppedAfter) {
  auto options = [](int64_t steps) {
    auto t = test::toy_fp16_options(steps, 2, std::pow(2.0, 30));
    t.min_lr_ratio = 1.0;  // the same lr whatever max_steps
    t.log_every = 3;
    return t;
  };
  const fs::path straight = test::fresh_dir("stop_fp16_a"), stopped = test::fresh_dir("stop_fp16_b");
  test::ToyRun a(options(4), {}, {}, straight);
  a.engine->run(TrainState{});
  EngineHooks hooks;
  hooks.on_step = [](int64_t step, double) {
    if (step == 3) std::raise(SIGTERM);
  };
  test::ToyRun b(options(10), hooks, {}, stopped, nullptr, /*stop_on_signals=*/true);
  EXPECT_THROW(b.engine->run(TrainState{}), StopRequested);
  auto load = [](const fs::path& run, torch::nn::Linear& model) {
    const auto file = latest_checkpoint(run);
    EXPECT_TRUE(file.has_value()) << run;
    return load_checkpoint(*file, *model, nullptr).state;
  };
  torch::nn::Linear ma(4, 1), mb(4, 1);
  const TrainState sa = load(straight, ma), sb = load(stopped, mb);
  EXPECT_EQ(sb.step, 4);
  EXPECT_GT(sa.nonfinite_total, 0);  // the scale did move
  EXPECT_EQ(sb.loss_scale, sa.loss_scale);
  EXPECT_EQ(sb.loss_scale_streak, sa.loss_scale_streak);
  EXPECT_EQ(sb.nonfinite_total, sa.nonfinite_total);
  EXPECT_EQ(sb.cursor.position, sa.cursor.position);
  EXPECT_EQ(sb.tokens_seen, sa.tokens_seen);
  EXPECT_TRUE(torch::equal(ma->weight, mb->weight));
  EXPECT_TRUE(torch::equal(ma->bias, mb->bias));
}

// How a toy run that should stop on request ended: StopRequested's message and signal (empty, 0:
// it did not stop) and the steps of the checkpoints it kept.
struct ToyStop {
  std::string message;
  int signal = 0;
  std::vector<int64_t> kept;
};

ToyStop run_toy_until_stopped(const TrainOptions& t, EngineHooks hooks, const std::string& name,
                              std::optional<std::chrono::steady_clock::time_point> stop_at = std::nullopt) {
  const fs::path run = test::fresh_dir(name);
  test::ToyRun r(t, std::move(hooks), {}, run, nullptr, /*stop_on_signals=*/true, stop_at);
  ToyStop out;
  try {
    r.engine->run(TrainState{});
  } catch (const StopRequested& e) {
    out.message = e.what();
    out.signal = e.signal();
  }
  for (const auto& [step, file] : list_checkpoints(run)) out.kept.push_back(step);
  return out;
}

// train.time_limit_min: a run past EngineSetup::stop_at stops as on a signal, after the step
// under way (here the fourth: the third's hook waits the deadline out), with its checkpoint and
// signal 0 (main's exit code 75).
TEST_F(StopOnSignalToy, PastTheTimeLimitTheRunStopsAfterTheStepUnderWay) {
  auto t = test::toy_options(10, 1);
  t.time_limit_min = 0.025;  // as the message gives it (the toy's deadline is stop_at)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  EngineHooks hooks;
  hooks.on_step = [&](int64_t step, double) {
    if (step == 3) std::this_thread::sleep_until(deadline);
  };
  const ToyStop stop = run_toy_until_stopped(t, hooks, "stop_time_limit", deadline);
  EXPECT_EQ(stop.signal, 0);
  EXPECT_NE(stop.message.find("stopped at the time limit (train.time_limit_min 0.025) after step 4 of 10; checkpoint "),
            std::string::npos)
      << stop.message;
  EXPECT_EQ(stop.kept, std::vector<int64_t>{4});
}

// An optimizer the host steps (LibTorch's SGD): the flag is read with the step's own, the run
// stops after the step whose forward pass the signal came in (0-based 2: the third).
TEST_F(StopOnSignalToy, AHostSteppedOptimizerStopsAfterTheStepTheSignalCameIn) {
  auto t = test::toy_options(10, 1);
  t.optimizer = "sgd";
  EngineHooks hooks;
  hooks.on_loss = [](int64_t step, torch::Tensor&) {
    if (step == 2) std::raise(SIGINT);
  };
  const ToyStop stop = run_toy_until_stopped(t, hooks, "stop_sgd");
  EXPECT_EQ(stop.signal, SIGINT) << "the run did not stop";
  EXPECT_EQ(stop.kept, std::vector<int64_t>{3});
}

// A signal just before a periodic checkpoint (here: in the step-4 hook, the save comes next):
// the run stops with that checkpoint, not after another step and a second one.
TEST_F(StopOnSignalToy, ASignalBeforeAPeriodicCheckpointStopsWithIt) {
  auto t = test::toy_options(10, 1);
  t.save_every = 4;
  t.keep_checkpoints = 10;
  EngineHooks hooks;
  hooks.on_step = [](int64_t step, double) {
    if (step == 4) std::raise(SIGTERM);
  };
  const ToyStop stop = run_toy_until_stopped(t, hooks, "stop_at_save");
  EXPECT_NE(stop.message.find("after step 4 of 10"), std::string::npos) << stop.message;
  EXPECT_EQ(stop.kept, std::vector<int64_t>{4});
}

}  // namespace
}  // namespace rpe

// fp16 training (train.precision: fp16): the dynamic loss scale (train/loss_scaler.h) against
// GradScaler's rule worked by hand, and the engine on the toy least-squares task: loss scaling
// rescues gradients that fp16 would flush to zero, overflowing steps are skipped while the
// scale halves, a run whose gradients overflow at every scale stops, a gradient norm that
// overflows without an fp16 overflow counts as a divergence, and a resumed run continues from
// the saved scale exactly.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "tiny_run.h"
#include "toy_engine.h"
#include "train/checkpoint.h"
#include "train/loss_scaler.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;
using test::ToyRun;
using test::toy_options;

constexpr double kU = 1.0 / 2048;  // fp16 unit roundoff 2^-11

TrainOptions fp16_options(double init_scale, int64_t window = 2000) {
  TrainOptions t;
  t.precision = "fp16";
  t.fp16_init_scale = init_scale;
  t.fp16_scale_window = window;
  return t;
}

double value(const torch::Tensor& t) { return t.item<double>(); }

// Window 2: an overflow halves S and restarts the streak; two clean steps in a row double S.
TEST(LossScaler, FollowsTheDynamicScalingRule) {
  for (const auto& device : test::devices_to_test()) {
    SCOPED_TRACE(device.str());
    LossScaler s(fp16_options(8.0, 2), device);
    ASSERT_TRUE(s.enabled());
    EXPECT_EQ(value(s.scale()), 8.0);
    EXPECT_EQ(s.scale().device().type(), device.type());  // "cuda" asked for, "cuda:<current>" made
    EXPECT_EQ(s.scale().device(), torch::zeros({}, torch::TensorOptions().device(device)).device());  // the index too
    const std::vector<std::pair<double, std::array<double, 2>>> steps = {
        // overflow?  (S, streak) after the update, worked by hand
        {0, {8, 1}}, {0, {16, 0}}, {1, {8, 0}}, {0, {8, 1}}, {0, {16, 0}}, {0, {16, 1}}, {1, {8, 0}}, {1, {4, 0}},
    };
    for (size_t i = 0; i < steps.size(); ++i) {
      s.update(torch::full({}, steps[i].first, s.scale().options()));
      const auto snap = s.snapshot();
      EXPECT_EQ(value(snap[0]), steps[i].second[0]) << "step " << i;
      EXPECT_EQ(value(snap[1]), steps[i].second[1]) << "step " << i;
    }
  }
}

TEST(LossScaler, UnscalesExactlyAndFlagsAnyNonFiniteGradient) {
  for (const auto& device : test::devices_to_test()) {
    SCOPED_TRACE(device.str());
    LossScaler s(fp16_options(1024.0), device);
    const auto on = torch::TensorOptions(torch::kFloat).device(device);
    EXPECT_EQ(value(s.scaled(torch::full({}, 2.5, on))), 2560.0);
    const auto fp16_loss = s.scaled(torch::full({}, 100.0, on.dtype(torch::kHalf)));  // 102400 > fp16's 65504
    EXPECT_EQ(fp16_loss.scalar_type(), torch::kFloat);
    EXPECT_EQ(value(fp16_loss), 102400.0);
    auto a = torch::tensor({3.0F, -5.5F}).to(device), b = torch::tensor({{0.25F}}).to(device);
    const auto a0 = a.clone(), b0 = b.clone();
    EXPECT_EQ(value(s.unscale_({a, b})), 0.0);
    EXPECT_TRUE(torch::equal(a, a0 / 1024)) << a;  // a power of two: exact
    EXPECT_TRUE(torch::equal(b, b0 / 1024)) << b;
    for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      auto c = torch::tensor({1.0F, bad}).to(device);
      EXPECT_EQ(value(s.unscale_({a, c})), 1.0) << bad;
    }
  }
  // Any other precision: a passthrough that launches nothing.
  TrainOptions bf16;
  bf16.precision = "bf16";
  LossScaler off(bf16, torch::kCPU);
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(value(off.scaled(torch::full({}, 2.5))), 2.5);
  auto d = torch::tensor({3.0F, -5.5F});
  const auto d0 = d.clone();
  EXPECT_FALSE(off.unscale_({d}).defined());
  EXPECT_TRUE(torch::equal(d, d0));
}

TEST(LossScaler, TravelsThroughACheckpoint) {
  LossScaler s(fp16_options(8.0, 3), torch::kCPU);
  for (double overflow : {0.0, 1.0, 0.0, 0.0}) s.update(torch::full({}, overflow));  // S 4, streak 2
  TrainState state;
  s.save(state);
  EXPECT_EQ(state.loss_scale, 4.0);
  EXPECT_EQ(state.loss_scale_streak, 2);
  torch::nn::Linear model(2, 1);
  const fs::path file = test::fresh_dir("loss_scale_ckpt") / "step.pt";
  write_checkpoint(file, *model, nullptr, &state, "");
  const auto back = load_checkpoint(file, *model, nullptr).state;
  EXPECT_EQ(back.loss_scale, 4.0);
  EXPECT_EQ(back.loss_scale_streak, 2);
  LossScaler resumed(fp16_options(8.0, 3), torch::kCPU);
  resumed.load(back);
  resumed.update(torch::full({}, 0.0));  // the third clean step in a row: S doubles
  EXPECT_EQ(value(resumed.scale()), 8.0);
  LossScaler fresh(fp16_options(8.0, 3), torch::kCPU);
  fresh.load(TrainState{});  // no saved scale (a bf16 checkpoint): the initial one stays
  EXPECT_EQ(value(fresh.scale()), 8.0);
  // A streak saved under a longer window resumes one step short of this run's window.
  TrainState long_streak = back;
  long_streak.loss_scale_streak = 50;
  LossScaler shorter(fp16_options(8.0, 3), torch::kCPU);
  shorter.load(long_streak);
  EXPECT_EQ(value(shorter.snapshot()[1]), 2.0);
  shorter.update(torch::full({}, 0.0));
  EXPECT_EQ(value(shorter.scale()), 8.0);  // 4 doubled: it can still grow
  // A bf16 run resumed from an fp16 checkpoint writes no stale scale into its own.
  TrainOptions bf16;
  bf16.precision = "bf16";
  TrainState carried = back;
  LossScaler(bf16, torch::kCPU).save(carried);
  EXPECT_EQ(carried.loss_scale, 0.0);
  EXPECT_EQ(carried.loss_scale_streak, 0);
}

// The toy's loss times 1e-9: its gradients (~1e-9) lie below fp16's smallest subnormal (6e-8).
// Without scaling (S = 1) the fp16 backward flushes them to zero; with S = 2^30 they survive,
// and once divided by S they equal the fp32 gradients to fp16's precision.
TEST(Fp16Training, LossScalingKeepsGradientsThatFp16WouldFlushToZero) {
  EngineHooks tiny;
  tiny.on_loss = [](int64_t, torch::Tensor& loss) { loss = loss * 1e-9; };
  auto fp32 = toy_options(1, 1);
  ToyRun ref(fp32, tiny);
  const double g32 = value(ref.engine->step(0).grad_norm);
  auto t = test::toy_fp16_options(1, 1, 1.0);
  ToyRun unscaled(t, tiny);
  const auto flushed = unscaled.engine->step(0);
  t.fp16_init_scale = std::pow(2.0, 30);
  ToyRun scaled(t, tiny);
  const auto kept = scaled.engine->step(0);
  ASSERT_GT(g32, 1e-9);
  EXPECT_LT(value(flushed.grad_norm), 0.01 * g32) << "fp16 without a loss scale kept the gradients";
  // x, w and the output's gradient rounded to fp16 (u each), the products accumulated in fp32.
  EXPECT_NEAR(value(kept.grad_norm), g32, 8 * kU * g32);
  EXPECT_TRUE(kept.finite.item<bool>());
  EXPECT_EQ(value(scaled.engine->loss_scaler().scale()), std::pow(2.0, 30));  // no overflow: S stays
}

// S = 2^40 overflows fp16 (max 65504) until it has halved enough: each such step is skipped
// and halves S, more of them in a row than max_nonfinite_in_a_row (3) without stopping the
// run, and the training then goes on at the scale found (device- and host-decided updates;
// with 2 micro-batches per step, S multiplies each one's loss and is unscaled once).
TEST(Fp16Training, OverflowingStepsHalveTheScaleAndTheRunGoesOn) {
  for (const auto& [optimizer, accum] : {std::pair{"adamw", 1}, std::pair{"sgd", 1}, std::pair{"adamw", 2}}) {
    SCOPED_TRACE(std::string(optimizer) + " accum " + std::to_string(accum));
    const fs::path metrics =
        test::fresh_dir("fp16_overflow_" + std::string(optimizer) + std::to_string(accum)) / "metrics.jsonl";
    auto t = test::toy_fp16_options(40, accum, std::pow(2.0, 40));
    t.optimizer = optimizer;
    t.log_every = 10;
    ToyRun r(t, {}, metrics);
    const auto w0 = r.model->weight.detach().clone();
    const EngineResult e = r.engine->run(TrainState{});
    int64_t overflows = 0;
    double last_logged_scale = 0;
    for (const auto& row : test::read_jsonl(metrics)) {
      if (row.value("event", "") == "overflow_skip") {
        ++overflows;
        EXPECT_EQ(row["step"], overflows);  // the first steps, one after another
        EXPECT_EQ(row["loss_scale"].get<double>(), std::pow(2.0, 40 - overflows));
      } else if (row.contains("loss_scale")) {
        last_logged_scale = row["loss_scale"].get<double>();
      }
    }
    EXPECT_GT(overflows, t.max_nonfinite_in_a_row);
    EXPECT_LT(overflows, 35);  // it found a scale and trained
    EXPECT_EQ(e.state.step, 40);
    EXPECT_EQ(e.state.nonfinite_total, overflows);
    EXPECT_EQ(e.state.nonfinite_in_a_row, 0);  // overflows are not a divergence streak
    EXPECT_EQ(value(r.engine->loss_scaler().scale()), std::pow(2.0, 40 - overflows));
    EXPECT_EQ(last_logged_scale, std::pow(2.0, 40 - overflows));
    EXPECT_TRUE(torch::isfinite(r.model->weight).all().item<bool>());
    EXPECT_FALSE(torch::equal(r.model->weight, w0));
    EXPECT_LT(e.final_loss, e.first_loss);
  }
}

// S = 2^100 with min_loss_scale 2^90: every step overflows; the 11th takes S to 2^89 and stops
// the run, weights untouched, S as it was after that step.
TEST(Fp16Training, GradientsOverflowingAtEveryScaleStopTheRun) {
  for (const char* optimizer : {"adamw", "sgd"}) {
    SCOPED_TRACE(optimizer);
    auto t = test::toy_fp16_options(30, 1, std::pow(2.0, 100));
    t.optimizer = optimizer;
    t.min_loss_scale = std::pow(2.0, 90);
    ToyRun r(t);
    const auto w0 = r.model->weight.detach().clone();
    const auto msg = test::user_error([&] { r.engine->run(TrainState{}); });
    EXPECT_NE(msg.find("training stopped at step 11: the fp16 gradients overflow at every loss scale down to "
                       "6.1897e+26 (train.min_loss_scale 1.23794e+27)"),
              std::string::npos)
        << msg;
    EXPECT_TRUE(torch::equal(r.model->weight, w0));
    EXPECT_EQ(value(r.engine->loss_scaler().scale()), std::pow(2.0, 89));
  }
}

// Gradients that are finite after unscaling but whose norm overflows fp32 (4 entries of 2e38:
// norm 4e38 > 3.4e38) are no fp16 overflow: the unscale kernel's flag stays 0 and S does not
// move, so no smaller scale would help. Such steps are non-finite steps like any other and stop
// the run after max_nonfinite_in_a_row (3) of them, weights untouched (classified by the loss
// alone, they were taken for overflows and the run went on to its end).
TEST(Fp16Training, FiniteGradientsWithAnOverflowingNormAreNoOverflow) {
  for (const char* optimizer : {"adamw", "sgd"}) {
    SCOPED_TRACE(optimizer);
    auto t = test::toy_fp16_options(10, 1, 1.0);
    t.optimizer = optimizer;
    torch::Tensor w;  // the model's weight, once built
    EngineHooks huge;
    huge.on_loss = [&w](int64_t, torch::Tensor& loss) { loss = loss + (w - w.detach()).sum() * 2e38; };  // value +0
    ToyRun r(t, huge);
    w = r.model->weight;
    const auto w0 = w.detach().clone();
    const auto msg = test::user_error([&] { r.engine->run(TrainState{}); });
    EXPECT_NE(msg.find("3 non-finite losses or gradient norms in a row"), std::string::npos) << msg;
    EXPECT_TRUE(torch::equal(r.model->weight, w0));
    EXPECT_EQ(value(r.engine->loss_scaler().scale()), 1.0);
  }
}

// Resumed from a checkpoint taken while S is still halving, a run ends with the same weights and
// scale as the uninterrupted one (a resumed run restarting at fp16_init_scale would skip more).
TEST(Fp16Training, AResumedRunContinuesFromTheSavedScale) {
  auto t = test::toy_fp16_options(40, 1, std::pow(2.0, 40));
  t.save_every = 6;
  ToyRun whole(t);
  whole.engine->run(TrainState{});

  struct Crash : std::runtime_error {
    Crash() : std::runtime_error("crash") {}
  };
  EngineHooks crash;
  crash.on_step = [](int64_t step, double) {
    if (step == 8) throw Crash();
  };
  const fs::path dir = test::fresh_dir("fp16_resume");
  {
    ToyRun first(t, crash, {}, dir);
    EXPECT_THROW(first.engine->run(TrainState{}), Crash);
  }
  ToyRun second(t, {}, {}, dir);
  const auto saved = load_checkpoint(dir / "checkpoints" / "step_00000006.pt", *second.model, second.opt.get());
  ASSERT_EQ(saved.state.step, 6);
  EXPECT_EQ(saved.state.loss_scale, std::pow(2.0, 34));  // six overflows so far
  second.engine->run(saved.state);
  EXPECT_EQ(value(second.engine->loss_scaler().scale()), value(whole.engine->loss_scaler().scale()));
  EXPECT_TRUE(torch::equal(second.model->weight, whole.model->weight));
  EXPECT_TRUE(torch::equal(second.model->bias, whole.model->bias));
}

}  // namespace
}  // namespace rpe

// A toy least-squares task for the training engine's tests (train/engine.h): a closed-form
// reference is at hand for every statistic of a step.
#pragma once
#include <torch/torch.h>

#include <filesystem>
#include <memory>

#include "train/engine.h"
#include "train/optim.h"

namespace rpe::test {

// y = x w* + noise over 16 fixed items; a micro-batch is the next `micro` items (cycling);
// loss = sum over the batch of (f(x) - y)^2, count = rows, tokens = 3 per row. The micro-batch
// numbered `unscored` (from 0; -1: none) scores nothing, as an MLM batch that masked no token:
// count 0, loss 0 (tensors[2], its weight, is 0).
struct Toy {
  torch::Tensor x, y;
  Toy() {
    torch::manual_seed(3);
    x = torch::randn({16, 4});
    y = x.matmul(torch::tensor({1.0, -2.0, 0.5, 3.0}, torch::kFloat)) + 0.1 * torch::randn({16});
  }
};

class ToyTask : public Task {
 public:
  ToyTask(const Toy& d, torch::nn::Linear model, int64_t micro) : d_(d), model_(std::move(model)), micro_(micro) {}
  MicroBatch next_batch() override {
    auto idx = (torch::arange(micro_) + next_) % d_.x.size(0);
    next_ = (next_ + micro_) % d_.x.size(0);
    const double weight = taken_++ == unscored ? 0.0 : 1.0;
    return {{d_.x.index_select(0, idx), d_.y.index_select(0, idx), torch::full({}, weight)}, {0, next_}};
  }
  torch::Tensor count(const MicroBatch& b) override {
    return static_cast<double>(b.tensors[0].size(0)) * b.tensors[2].to(torch::kDouble);
  }
  BatchSums forward(const MicroBatch& b) override {
    auto err = model_->forward(b.tensors[0]).squeeze(-1) - b.tensors[1];  // [B]
    return {err.pow(2).sum() * b.tensors[2], {}, torch::full({}, 3.0 * static_cast<double>(b.tensors[0].size(0)))};
  }
  int64_t unscored = -1;

 private:
  const Toy& d_;
  torch::nn::Linear model_;
  int64_t micro_;
  int64_t next_ = 0;
  int64_t taken_ = 0;
};

inline TrainOptions toy_options(int64_t steps, int64_t accum) {
  TrainOptions t;
  t.batch_size = 16;
  t.grad_accum = accum;
  t.max_steps = steps;
  t.lr = 0.05;
  t.warmup_steps = 0;
  t.log_every = 2;
  t.clip_norm = 0;
  t.max_nonfinite_in_a_row = 3;
  t.weight_decay = 0;
  return t;
}

// toy_options in fp16 from loss scale `init_scale`.
inline TrainOptions toy_fp16_options(int64_t steps, int64_t accum, double init_scale) {
  TrainOptions t = toy_options(steps, accum);
  t.precision = "fp16";
  t.fp16_init_scale = init_scale;
  return t;
}

struct ToyRun {
  Toy data;
  torch::nn::Linear model{nullptr};
  dist::DataParallel dp;
  std::unique_ptr<torch::optim::Optimizer> opt;
  std::unique_ptr<ToyTask> task;
  std::unique_ptr<Engine> engine;
  // `group`: the process group of a multi-process test (default: this process alone).
  explicit ToyRun(const TrainOptions& t, EngineHooks hooks = {}, const std::filesystem::path& metrics = {},
                  const std::filesystem::path& run_dir = {}, dist::DataParallel* group = nullptr,
                  bool stop_on_signals = false,
                  std::optional<std::chrono::steady_clock::time_point> stop_at = std::nullopt) {
    torch::manual_seed(5);
    model = torch::nn::Linear(4, 1);
    // adamw, lamb: skips decided on the device (DeviceSkippableStep); sgd (LibTorch's): on the host
    opt = t.optimizer == "sgd" ? std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(t.lr))
                               : make_optimizer(*model, t);
    task = std::make_unique<ToyTask>(data, model, t.batch_size / t.grad_accum);
    EngineSetup s;
    s.train = t;
    s.dp = group ? group : &dp;
    s.hooks = std::move(hooks);
    if (!metrics.empty()) s.metrics = MetricsWriter(metrics);
    s.run_dir = run_dir;
    s.stop_on_signals = stop_on_signals;
    s.stop_at = stop_at;
    engine = std::make_unique<Engine>(std::move(s), *model, *opt, *task);
  }
};

}  // namespace rpe::test

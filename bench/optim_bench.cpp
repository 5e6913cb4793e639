// rpe-bench-optim: one optimizer step over a whole BERT model's parameters (BERT-base unless
// sized down), per optimizer: LibTorch's torch::optim::AdamW (its per-tensor loop), rpe-train's
// ForeachAdamW (train/foreach_adamw.h) as step() (_foreach ops) and as step_if (the fused kernel
// that skips non-finite steps on the device: what training runs), and LAMB (train/lamb.h) as
// step() and as step_if (training's), with the decay groups training uses. Prints one JSON line
// per optimizer (the -train ones are step_if):
//   {"impl": "optim", "optimizer", "device", "tensors", "parameters", "step_ms", "ops_per_step"}
// Time: median of --steps timed steps after --warmup, each ended by a device sync. Ops: the
// top-level ATen ops of one step (util/op_counter.h), which on CUDA are its kernel launches.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_common.h"
#include "model/bert.h"
#include "train/device_update.h"
#include "train/optim.h"
#include "util/op_counter.h"

namespace {

struct Options {
  std::string device = "cuda";
  rpe::bench::ModelSize size;
  int steps = 20, warmup = 3;
};

using rpe::bench::sync;

std::unique_ptr<torch::optim::Optimizer> make(const std::string& name, torch::nn::Module& model) {
  rpe::TrainOptions t;
  t.lr = 1e-4, t.weight_decay = 0.01;
  if (name == "adamw-libtorch") {  // the same groups and options as make_adamw, LibTorch's own loop
    auto g = rpe::split_decay_groups(model, t.decay_position_params);
    const auto opts = torch::optim::AdamWOptions(t.lr).betas({t.adam_beta1, t.adam_beta2}).eps(t.adam_eps);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(g.decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(opts).weight_decay(t.weight_decay)));
    groups.emplace_back(g.no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(opts).weight_decay(0.0)));
    return std::make_unique<torch::optim::AdamW>(groups, opts);
  }
  t.optimizer = name.rfind("lamb", 0) == 0 ? "lamb" : "adamw";  // adamw-foreach, adamw-train: ForeachAdamW
  return rpe::make_optimizer(model, t);
}

nlohmann::json measure(const Options& a, const std::string& name, rpe::BertModel& model, const torch::Device& device) {
  auto opt = make(name, *model);
  const auto finite = torch::ones({}, torch::TensorOptions(torch::kBool).device(device));  // as the engine's flag
  auto one_step = [&] {
    if (name.ends_with("-train"))
      dynamic_cast<rpe::DeviceSkippableStep&>(*opt).step_if(finite);
    else
      opt->step();
  };
  std::vector<double> ms;
  int ops = 0;
  for (int i = 0; i < a.warmup + a.steps; ++i) {
    sync(device);
    const auto t0 = std::chrono::steady_clock::now();
    if (i == a.warmup) {
      rpe::TopLevelOpCounter counter;  // one step with the state in place
      one_step();
      ops = counter.ops();
    } else {
      one_step();
    }
    sync(device);
    if (i >= a.warmup) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  int64_t numel = 0;
  for (const auto& p : model->parameters()) numel += p.numel();
  return {{"impl", "optim"},           {"optimizer", name},
          {"device", device.str()},    {"tensors", model->parameters().size()},
          {"parameters", numel},       {"step_ms", ms[ms.size() / 2]},
          {"ops_per_step", ops}};
}

}  // namespace

int main(int argc, char** argv) {
  Options a;
  CLI::App app{"rpe-bench-optim: one optimizer step over a BERT model's parameters (JSON lines)"};
  app.add_option("--device", a.device, "cuda, cuda:N or cpu");
  rpe::bench::add_size_options(app, a.size);
  app.add_option("--steps", a.steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", a.warmup, "untimed steps first");
  CLI11_PARSE(app, argc, argv);
  if (!rpe::bench::device_available(a.device, "rpe-bench-optim")) return 2;
  try {
    const torch::Device device(a.device);
    torch::manual_seed(0);
    rpe::BertModel model(rpe::bench::model_options(a.size));
    model->to(device);
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.mutable_grad() = torch::randn_like(p) * 1e-3;
    for (const char* name : {"adamw-libtorch", "adamw-foreach", "adamw-train", "lamb", "lamb-train"})
      std::cout << measure(a, name, model, device).dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "rpe-bench-optim: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

// rpe-bench-model: training throughput of the whole BERT MLM model, one position method at a
// time, as pretraining runs it: embeddings -> encoder -> MLM loss on the masked 15% ->
// backward -> AdamW step, bf16 autocast (--bf16), fused attention on CUDA, packed unpadded
// batches (no padding mask), dropout 0.1. Prints one JSON line per (method, length):
//   {"impl": "rpe", "method", "length", "batch", "tokens_per_s", "peak_mib", "step_ms"}
// bench/hf_bench.py prints the same for Hugging Face BertForMaskedLM, and
// scripts/gpu_check.sh turns both into bench/results/gpu_<device>.md (MFU included).
// Time: median of --steps timed steps after --warmup steps, each ended by a device sync;
// --max-seconds caps a case's timed steps (at least 3), so one slow method cannot spend a
// lent GPU's minutes (the row's "steps" says how many were timed).
// Peak memory: the CUDA caching allocator's peak allocated bytes (0 on CPU).
// --profile-steps N (for --profile-methods): N more steps under the Kineto profiler, summed
// per kernel into the row's "profile" (bench/profile_steps.h; the report's "Where the step's
// time goes").
// --graph-methods (CUDA): those methods also as "rpe-graph" rows, the same step captured as one
// CUDA graph and replayed (train/cuda_graph.h, as train.cuda_graphs does per micro-batch): the share of the eager step that is the
// host launching kernels. A case whose capture fails prints {"impl": "rpe-graph", "error"}.
// --relative-blocks N: the relative methods' skew split into N query blocks instead of the
// default 4 (model/attention/position_method.h), rows labelled "rpe (relative blocks N)":
// the two layouts of the same scores compared on one device (the skew runs on the CPU, and on
// CUDA with --no-relative-kernel).
// --no-relative-kernel: the relative methods' [L, L] layout by the skew path instead of its CUDA
// kernels (model/attention/relative_layout.h), rows labelled "rpe (relative skew path)".
// --unfused-add-norm: the post-LN add & norm as separate ATen kernels instead of its fused CUDA
// kernel (model/add_norm.h), rows labelled "rpe (unfused add-norm)": what the fusion buys.
// --max-relative K: the relative methods clipped at k = K (Table 4's models), rows labelled
// "rpe (clipped k = K)" (methods with no clipping distance keep "rpe"): the clipped ends'
// summed gradients against the default k = max_position - 1.
// --activation-checkpointing attention|layers|bias: each layer's attention core, each whole layer,
// or only the fused kernel's saved position bias recomputed in backward (model/recompute.h,
// model/saved_mask.h), rows labelled "rpe (recompute attention)", "rpe (recompute layers)" or
// "rpe (recompute bias)": the memory it saves and the time it costs.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "profile_steps.h"
#include "config/method_catalogue.h"
#include "model/add_norm.h"
#include "model/attention/position_method.h"
#include "model/attention/relative_layout.h"
#include "model/attention/registry.h"
#include "model/bert.h"
#include "train/cuda_graph.h"
#include "train/foreach_adamw.h"
#include "train/mlm_task.h"
#include "train/precision.h"

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define RPE_BENCH_CUDA 1
#endif

namespace {

struct Options {
  std::string methods = "all", lengths = "128,512", device = "cuda", profile_methods = "absolute,m4", graph_methods;
  rpe::bench::ModelSize size;
  int64_t batch_tokens = 16384;
  int steps = 20, warmup = 3, profile_steps = 0;
  int64_t relative_blocks = 0;  // 0: the default (4)
  int64_t max_relative = 0;     // 0: the default, max_position - 1
  double max_seconds = 0;  // 0: no cap
  bool bf16 = true;
  bool graphs_only = false;  // only the --graph-methods cases, as graphs (no eager rows)
  bool unfused_add_norm = false;
  bool no_relative_kernel = false;
  std::string recompute = "none";  // --activation-checkpointing
};

using rpe::bench::sync;

// A row's "impl": rpe, rpe-graph, or rpe with --relative-blocks, --no-relative-kernel,
// --max-relative (only on methods with a clipping distance), --unfused-add-norm or
// --activation-checkpointing.
std::string impl_label(const Options& a, const std::string& method, bool graph) {
  if (graph) return "rpe-graph";
  std::vector<std::string> variants;
  if (a.relative_blocks != 0) variants.push_back("relative blocks " + std::to_string(a.relative_blocks));
  if (a.no_relative_kernel) variants.push_back("relative skew path");
  const rpe::MethodFacts* facts = rpe::find_method_facts(method);
  if (a.max_relative != 0 && facts && facts->clipped) variants.push_back("clipped k = " + std::to_string(a.max_relative));
  if (a.unfused_add_norm) variants.push_back("unfused add-norm");
  if (a.recompute != "none") variants.push_back("recompute " + a.recompute);
  if (variants.empty()) return "rpe";
  std::string label = "rpe (" + variants[0];
  for (size_t i = 1; i < variants.size(); ++i) label += ", " + variants[i];
  return label + ")";
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// One case; `graph`: time replays of the step captured as a CUDA graph instead of eager steps.
nlohmann::json measure(const Options& a, const std::string& method, int64_t L, bool graph) {
  const torch::Device device(a.device);
  torch::manual_seed(0);
  rpe::ModelOptions o = rpe::bench::model_options(a.size);
  o.max_position = std::max<int64_t>(512, L);
  o.attention.method = method;
  o.attention.max_relative = a.max_relative;
  rpe::BertModel model(o);
  model->to(device);
  model->train();
  model->set_fused_attention(device.is_cuda());
  model->set_activation_checkpointing(rpe::parse_recompute(a.recompute));
  rpe::ForeachAdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-4).weight_decay(0.01));  // as training
  const int64_t B = std::max<int64_t>(1, a.batch_tokens / L);
  const auto lopt = torch::TensorOptions().dtype(torch::kLong).device(device);
  auto ids = torch::randint(5, a.size.vocab, {B, L}, lopt);
  const int64_t n = std::max<int64_t>(1, B * L * 15 / 100);  // masked positions
  auto index = torch::randperm(B * L, lopt).narrow(0, 0, n);
  auto targets = torch::randint(5, a.size.vocab, {n}, lopt);
  auto zero_grad = [&] { opt.zero_grad(); };
  auto body = [&] {
    torch::Tensor loss;
    {
      rpe::AutocastGuard autocast(device, a.bf16 ? at::kBFloat16 : at::kFloat);
      loss = rpe::mlm_loss(model, ids, torch::Tensor(), index, targets).loss / static_cast<double>(n);
    }
    loss.backward();
    opt.step_if(torch::isfinite(loss));  // the training loop's update (no host read)
  };
  std::function<void()> step = [&] {
    zero_grad();
    body();
  };
  auto reset_peak = [&] {
#ifdef RPE_BENCH_CUDA
    if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
#endif
  };
  // A graph's peak is its capture's (the step's memory, allocated once in the graph's pool).
  // Captured after the warm-up steps (they create the optimizer's state) with the gradients set
  // to none: the captured backward allocates them in the graph's pool, each replay writes them anew.
  if (graph) {
    auto g = std::make_shared<rpe::CudaGraph>(device, step, std::max(1, a.warmup), zero_grad, body, reset_peak);
    step = [g] { g->replay(); };
  } else
    for (int i = 0; i < a.warmup; ++i) step();
  sync(device);
  if (!graph) reset_peak();
  std::vector<double> ms;
  double spent_ms = 0;
  for (int i = 0; i < a.steps; ++i) {
    if (a.max_seconds > 0 && i >= 3 && spent_ms > a.max_seconds * 1000) break;
    const auto t0 = std::chrono::steady_clock::now();
    step();
    sync(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    spent_ms += ms.back();
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  double peak = 0;
#ifdef RPE_BENCH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    peak = static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
  }
#endif
  nlohmann::json row = {{"impl", impl_label(a, method, graph)}, {"method", method},
          {"length", L},            {"batch", B},
          {"tokens_per_s", static_cast<double>(B * L) / (med / 1000.0)},
          {"peak_mib", peak},       {"step_ms", med},
          {"hidden", a.size.hidden}, {"layers", a.size.layers},
          {"heads", a.size.heads},   {"ffn", a.size.ffn},
          {"vocab", a.size.vocab},   {"bf16", a.bf16},
          {"steps", ms.size()}};
  const auto profiled = split(a.profile_methods);
  if (!graph && a.profile_steps > 0 && std::find(profiled.begin(), profiled.end(), method) != profiled.end())
    row["profile"] = rpe::bench::profile_steps(device, a.profile_steps, step, [&] { sync(device); });
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rpe-bench-model: whole-model MLM training throughput per position method (JSON lines)"};
  Options a;
  app.add_option("--methods", a.methods, "comma-separated methods, or all");
  app.add_option("--lengths", a.lengths, "comma-separated sequence lengths");
  app.add_option("--device", a.device, "cuda, cuda:N or cpu");
  app.add_option("--batch-tokens", a.batch_tokens, "tokens per step (batch = this / length)");
  rpe::bench::add_size_options(app, a.size);
  app.add_option("--steps", a.steps, "timed steps");
  app.add_option("--warmup", a.warmup, "untimed steps first");
  app.add_option("--max-seconds", a.max_seconds, "stop a case's timed steps after this many seconds (at least 3 steps)");
  app.add_option("--profile-steps", a.profile_steps, "profile this many more steps of each --profile-methods case");
  app.add_option("--profile-methods", a.profile_methods, "comma-separated methods to profile");
  app.add_option("--graph-methods", a.graph_methods, "comma-separated methods also timed as one CUDA graph per step (CUDA)");
  app.add_flag("--graphs-only", a.graphs_only, "only the --graph-methods cases, as CUDA graphs");
  app.add_flag("!--fp32", a.bf16, "fp32 instead of bf16 autocast");
  rpe::bench::add_relative_blocks_option(app, a.relative_blocks);
  rpe::bench::add_max_relative_option(app, a.max_relative);
  app.add_flag("--no-relative-kernel", a.no_relative_kernel, "relative scores laid out by the skew path, not the kernel (CUDA)");
  app.add_flag("--unfused-add-norm", a.unfused_add_norm, "post-LN add & norm as separate kernels, not fused (CUDA)");
  app.add_option("--activation-checkpointing", a.recompute, "recompute in backward: none, attention, layers or bias")
      ->check(CLI::IsMember({"none", "attention", "layers", "bias"}));
  CLI11_PARSE(app, argc, argv);
  rpe::set_relative_skew_blocks(a.relative_blocks);
  rpe::set_fused_add_norm(!a.unfused_add_norm);
  rpe::set_relative_layout_kernel(!a.no_relative_kernel);
  if (!rpe::bench::device_available(a.device, "rpe-bench-model")) return 2;
  const auto methods = a.methods == "all" ? rpe::attention_method_names() : split(a.methods);
  const auto graphed = split(a.graph_methods);
  if (!graphed.empty() && (!torch::Device(a.device).is_cuda() || !rpe::CudaGraph::built())) {
    std::cerr << "rpe-bench-model: --graph-methods needs a CUDA device and a CUDA LibTorch\n";
    return 2;
  }
  if (!graphed.empty() && a.recompute != "none") {  // as train.cuda_graphs: a captured graph cannot reset the generators
    std::cerr << "rpe-bench-model: --graph-methods and --activation-checkpointing cannot be used together\n";
    return 2;
  }
  // A case that fails (out of memory, a kernel that cannot launch) is a row with its error, and
  // the other cases still run: one stage of a GPU call must not cost the rows after it.
  const auto error_text = [](const std::exception& e) {
    const auto* c10 = dynamic_cast<const c10::Error*>(&e);
    return std::string(c10 ? c10->what_without_backtrace() : e.what()).substr(0, 400);
  };
  for (const auto& L : split(a.lengths))
    for (const auto& m : methods) {
      if (a.graphs_only) continue;
      nlohmann::json row = {{"impl", impl_label(a, m, false)}, {"method", m}, {"length", std::stoll(L)}};
      try {
        row = measure(a, m, std::stoll(L), false);
      } catch (const std::exception& e) {  // c10::Error included: the report lists the failure
        row["error"] = error_text(e);
      }
      std::cout << row.dump() << std::endl;
    }
  // The graph cases after every eager one, and none after a failed capture: PyTorch may leave the
  // process's CUDA state unusable then (train/cuda_graph.h), and the eager rows must not be lost.
  std::string failed;
  for (const auto& L : split(a.lengths))
    for (const auto& m : methods) {
      if (std::find(graphed.begin(), graphed.end(), m) == graphed.end()) continue;
      nlohmann::json row = {{"impl", "rpe-graph"}, {"method", m}, {"length", std::stoll(L)}};
      try {
        if (failed.empty()) row = measure(a, m, std::stoll(L), true);
        else row["error"] = "not run: an earlier capture failed (" + failed + ")";
      } catch (const std::exception& e) {
        row["error"] = error_text(e);
        failed = m + " at L = " + L;
      }
      std::cout << row.dump() << std::endl;
    }
  return 0;
}

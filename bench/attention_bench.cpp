// rpe-bench-attention: forward+backward time and peak memory of one BERT-base encoder layer
// (hidden 768, 12 heads, FFN 3072, dropout 0.1, training mode) for every position method,
// at each length, as ratios to `absolute` measured in the same run. Prints a Markdown table.
//
// Time: median over --reps repetitions after one warm-up, of forward + loss + backward
// (the method's input positions included). Memory, on CPU: each (method, length) runs in
// a forked child that resets its peak-RSS mark (/proc/self/clear_refs = 5), so the peak is
// VmHWM - VmRSS-at-start: every byte the layer's forward+backward had resident at once
// (weights, gradients, activations, allocator slack). On CUDA: the caching allocator's
// peak allocated bytes. The parent runs no tensor op before forking (OpenMP and fork do
// not mix), it only collects the children's numbers. --max-relative K clips the relative
// methods at k = K (Table 4's models) instead of the default k = max_position - 1.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.h"
#include "model/attention/position_method.h"
#include "model/attention/registry.h"
#include "model/encoder.h"
#include "util/cpu_memory.h"

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define RPE_BENCH_CUDA 1
#endif

namespace {

struct Result {
  double ms = 0, peak_mib = 0;
  bool ok = false;
};

// A field of /proc/self/status in KiB (VmRSS, VmHWM).
double status_kib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1));
  return 0;
}

// The measured layer's position table size; the clipped relative methods' default distance is
// one less (k = max_position - 1).
constexpr int64_t kMaxPosition = 512;

// What every measured case shares (the command line's settings).
struct Setup {
  int64_t batch = 2;
  int reps = 3, threads = 0;
  std::string device = "cpu";
  int64_t max_relative = 0;  // the relative methods' clipping distance k; 0 = the default (kMaxPosition - 1)
};

Result measure(const std::string& method, int64_t L, const Setup& setup) {
  const int64_t batch = setup.batch;
  const int reps = setup.reps;
  if (setup.threads > 0) torch::set_num_threads(setup.threads);
  torch::manual_seed(0);
  const torch::Device device(setup.device);
  rpe::ModelOptions o;  // BERT-base defaults
  o.max_position = kMaxPosition;
  o.attention.method = method;
  o.attention.max_relative = setup.max_relative;
  auto pos_method = rpe::make_position_method(o);
  rpe::EncoderLayer layer(o, pos_method->make_layer_term(0));
  pos_method->to(device);
  layer->to(device);
  layer->train();
  layer->attention->set_fused(device.is_cuda());  // the trainer's choice: fused where allowed on CUDA
  // The input needs its gradient, as in every layer but the first of a stack: otherwise
  // only absolute (whose table is added to x) would pay for the backward to the input.
  auto x = torch::randn({batch, L, o.hidden}, torch::TensorOptions().device(device)).requires_grad_();
  auto pad = torch::zeros({batch, L}, torch::TensorOptions().dtype(torch::kBool).device(device));

  double base_kib = 0;
  if (device.is_cpu()) {
    std::ofstream("/proc/self/clear_refs") << "5";  // reset VmHWM to the current RSS
    base_kib = status_kib("VmRSS");
  }
#ifdef RPE_BENCH_CUDA
  if (device.is_cuda()) {
    torch::cuda::synchronize();
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
  }
#endif
  auto step = [&] {
    auto pos = pos_method->input_embeddings(L);
    auto out = layer->forward(pos.defined() ? x + pos.unsqueeze(0) : x, pad);  // [B, L, D]
    out.square().mean().backward();
    for (auto& p : layer->parameters()) p.mutable_grad() = torch::Tensor();
    for (auto& p : pos_method->parameters()) p.mutable_grad() = torch::Tensor();
    x.mutable_grad() = torch::Tensor();
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  step();  // warm-up
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  Result res;
  res.ms = ms[ms.size() / 2];
  res.ok = true;
  if (device.is_cpu()) res.peak_mib = (status_kib("VmHWM") - base_kib) / 1024.0;
#ifdef RPE_BENCH_CUDA
  if (device.is_cuda()) {
    const int idx = device.index() < 0 ? 0 : device.index();
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(idx);
    res.peak_mib = static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
  }
#endif
  return res;
}

// Runs measure() in a child process; the parent reads "ms peak" back through a pipe.
Result measure_in_child(const std::string& method, int64_t L, const Setup& setup) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string msg = "fail";
    try {
      auto r = measure(method, L, setup);
      msg = std::to_string(r.ms) + " " + std::to_string(r.peak_mib);
    } catch (const std::exception& e) {
      std::cerr << method << " L=" << L << ": " << e.what() << "\n";
    }
    if (write(fds[1], msg.data(), msg.size()) < 0) _exit(1);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  std::istringstream in(text);
  if (in >> r.ms >> r.peak_mib) r.ok = true;
  return r;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

struct Options : Setup {
  std::vector<int64_t> lengths{128, 512};
  std::vector<std::string> methods = rpe::attention_method_names();
  int rounds = 1;
  std::string out_file;
  int64_t relative_blocks = 0;  // the relative methods' skew blocks; 0 = the default (4)
};

using Key = std::pair<std::string, int64_t>;  // (method, L)

// One method at one length over all rounds: medians, and the median of per-round time ratios
// against absolute.
struct Summary {
  bool ok = false;
  double ms = 0, peak_mib = 0, time_ratio = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

// rounds x (method, L) measurements, interleaved so that a shared machine's drift spreads over
// all methods alike; each logged to stderr as it ends.
std::map<Key, std::vector<Result>> measure_rounds(const Options& o) {
  std::map<Key, std::vector<Result>> runs;
  for (int round = 0; round < o.rounds; ++round)
    for (int64_t L : o.lengths)
      for (const auto& m : o.methods) {
        auto r = measure_in_child(m, L, o);
        runs[{m, L}].push_back(r);
        std::cerr << "round " << round + 1 << "/" << o.rounds << " " << m << " L=" << L << ": "
                  << (r.ok ? fixed(r.ms, 1) + " ms, " + fixed(r.peak_mib, 1) + " MiB" : "failed") << "\n";
      }
  return runs;
}

// Per (method, L): medians over the rounds that succeeded; time ratios against absolute from the
// same round. A method that failed in every round has no entry.
std::map<Key, Summary> summarize(const Options& o, std::map<Key, std::vector<Result>>& runs) {
  std::map<Key, Summary> results;
  for (int64_t L : o.lengths)
    for (const auto& m : o.methods) {
      const auto& mine = runs[{m, L}];
      const auto& base = runs[{"absolute", L}];
      std::vector<double> ms, peaks, ratios;
      for (size_t i = 0; i < mine.size(); ++i) {
        if (!mine[i].ok) continue;
        ms.push_back(mine[i].ms);
        peaks.push_back(mine[i].peak_mib);
        if (base[i].ok) ratios.push_back(mine[i].ms / base[i].ms);
      }
      if (!ms.empty()) results[{m, L}] = Summary{true, median(ms), median(peaks), median(ratios)};
    }
  return results;
}

// The Markdown table (a row per method and length) and the goals line at the longest length.
std::string markdown_table(const Options& o, std::map<Key, Summary>& results) {
  std::ostringstream md;
  md << "| method | L | fwd+bwd ms | × absolute | peak MiB | × absolute |\n|---|---:|---:|---:|---:|---:|\n";
  for (int64_t L : o.lengths) {
    const auto& base = results[{"absolute", L}];
    for (const auto& m : o.methods) {
      const auto& r = results[{m, L}];
      if (!r.ok) {
        md << "| " << m << " | " << L << " | failed | | | |\n";
        continue;
      }
      md << "| " << m << " | " << L << " | " << fixed(r.ms, 1) << " | " << fixed(r.time_ratio, 2) << " | "
         << fixed(r.peak_mib, 1) << " | " << fixed(r.peak_mib / base.peak_mib, 2) << " |\n";
    }
  }
  auto ratio = [&](const std::string& a, const std::string& b, int64_t L, bool time) {
    auto ra = results.find({a, L}), rb = results.find({b, L});
    if (ra == results.end() || rb == results.end() || !ra->second.ok || !rb->second.ok) return std::string("n/a");
    if (time && b == "absolute") return fixed(ra->second.time_ratio, 2);  // per-round ratio
    return fixed(time ? ra->second.ms / rb->second.ms : ra->second.peak_mib / rb->second.peak_mib, 2);
  };
  const int64_t Lmax = *std::max_element(o.lengths.begin(), o.lengths.end());
  md << "\nGoals at L = " << Lmax << ": m4 time / absolute time = " << ratio("m4", "absolute", Lmax, true)
     << " (goal <= 1.3); m3 peak / m4 peak = " << ratio("m3", "m4", Lmax, false) << " (goal <= 1.5).\n";
  return md.str();
}

// What was measured where and how: the lines above the table.
std::string header(const Options& o) {
  std::ostringstream h;
  h << "Device: " << o.device
    << (o.device == "cpu" ? " (" + cpu_name() + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores)" : "")
    << "; batch " << o.batch << ", median of " << o.reps << " after 1 warm-up, " << o.rounds
    << " interleaved round(s) (ratios: median of per-round ratios); one BERT-base layer (D=768, H=12, "
    << "FFN 3072, max_position " << kMaxPosition << ", k = "
    << (o.max_relative > 0 ? o.max_relative : kMaxPosition - 1) << "), training mode";
  if (o.relative_blocks > 0) h << "; relative scores skewed in " << o.relative_blocks << " query blocks";
  h << ".\n"
    << (o.device == "cpu" ? "Peak memory: child process VmHWM after resetting it (clear_refs 5) minus RSS at start.\n"
                          : "Peak memory: CUDA caching allocator peak allocated bytes.\n")
    << "\n";
  return h.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Forward+backward time and peak memory of one BERT-base layer per position method"};
  Options o;
  app.add_option("--lengths", o.lengths, "sequence lengths")->delimiter(',');
  app.add_option("--methods", o.methods, "methods (default: all registered)")->delimiter(',');
  app.add_option("--batch", o.batch, "sequences per batch");
  app.add_option("--reps", o.reps, "timed repetitions (median reported)");
  app.add_option("--rounds", o.rounds,
                 "measure every method this many times, interleaved; times and ratios are medians over rounds, "
                 "each ratio taken within its round (robust to a shared machine's drift)");
  app.add_option("--threads", o.threads, "CPU threads (0 = LibTorch default)");
  app.add_option("--device", o.device, "cpu or cuda");
  app.add_option("--out", o.out_file, "also write the Markdown table to this file");
  rpe::bench::add_relative_blocks_option(app, o.relative_blocks);
  rpe::bench::add_max_relative_option(app, o.max_relative);
  CLI11_PARSE(app, argc, argv);
  rpe::set_relative_skew_blocks(o.relative_blocks);  // before the forks: every child inherits it
  rpe::keep_freed_host_memory();  // as rpe-train does
  rpe::flush_denormals();      // as rpe-train does
  if (std::find(o.methods.begin(), o.methods.end(), "absolute") == o.methods.end())
    o.methods.insert(o.methods.begin(), "absolute");

  auto runs = measure_rounds(o);
  auto results = summarize(o, runs);
  const std::string text = header(o) + markdown_table(o, results);
  std::cout << text;
  if (!o.out_file.empty()) std::ofstream(o.out_file) << text;
  return 0;
}

// The engine's reports (see engine.h): the held-out evaluation, the progress line and
// metrics.jsonl rows of each log window, and the token count.
#include <chrono>
#include <cmath>

#include "dist/all_or_none.h"
#include "dist/rank0_only.h"
#include "train/engine.h"
#include "train/precision.h"
#include "util/log.h"

namespace rpe {
using Clock = std::chrono::steady_clock;

void continue_metrics(const std::filesystem::path& file, TrainState& state, bool final_redone, EngineSetup& setup) {
  if (const auto n = drop_metrics_after(file, state.step, final_redone))
    log::info(setup.log_tag.c_str(), "{}: dropped {} row{} that the run redoes from the checkpoint of step {}{}",
              file.filename().string(), n, n == 1 ? "" : "s", state.step,
              final_redone ? " (its final evaluation among them)" : "");
  setup.metrics = MetricsWriter(file);
  if (state.step == 0) return;
  const LoggedLosses logged = logged_losses(file);
  setup.first_loss = logged.first;
  setup.last_loss = logged.last;
  state.train_seconds = logged.elapsed_s;  // to the last row before the checkpoint (later rows were dropped)
}

EvalOutputs Engine::held_out_outputs() {
  torch::NoGradGuard no_grad;
  AutocastGuard autocast(s_.device, s_.train.precision);
  model_.eval();
  EvalOutputs outputs = task_.eval_outputs(*s_.dp);  // every rank: its share of the pass, then the gather
  model_.train();
  return outputs;
}

nlohmann::json Engine::record_evaluation(const TrainState& at, const EvalOutputs& outputs) {
  nlohmann::json fields = task_.score(outputs);
  if (fields.empty()) return fields;
  std::string line;
  for (const auto& [k, v] : fields.items())
    line += fmt::format(" | {} {}", k, v.is_number() ? fmt::format("{:.4f}", v.get<double>()) : v.dump());
  log::info("valid", "step {}{}", at.step, line);
  s_.metrics.write_evaluation(at.step, at.tokens_seen, at.train_seconds, fields);
  return fields;
}

nlohmann::json Engine::evaluate(const TrainState& at) {
  auto& dp = *s_.dp;
  const EvalOutputs outputs = held_out_outputs();
  // Rank 0 scores and records (its failure, e.g. a full disk, stops every rank).
  return dist::all_or_none(dp, "evaluating at step " + std::to_string(at.step), [&] {
    return dp.rank() == 0 ? record_evaluation(at, outputs) : nlohmann::json::object();
  });
}

bool Engine::evaluate_and_stop(TrainState& state) {
  auto& dp = *s_.dp;
  // The row says where the run stands, as a training row does: the tokens so far (a host read;
  // the device is idle at an evaluation anyway) and the training time as the evaluation begins
  // (on the clock of train_seconds(), which a resume continues).
  flush_tokens(state);
  state.train_seconds = train_seconds();
  const int64_t step = state.step;
  const EvalOutputs outputs = held_out_outputs();
  // Rank 0 scores, records and decides (it may write, e.g. the best model so far: a model's
  // write to a slow shared file system, which rank0_only's heartbeat lets outlast
  // train.dist_timeout_s as a checkpoint's does); one agreement for all of it.
  bool stop = false;
  dist::rank0_only(dp, "evaluating at step " + std::to_string(step),
                   [&] { stop = task_.after_evaluation(step, record_evaluation(state, outputs)); });
  return dp.any(stop);  // it reaches every rank (once per evaluation, not per step)
}

void Engine::flush_tokens(TrainState& state) {
  state.tokens_seen += static_cast<int64_t>(seen_tokens_.item<double>());
  seen_tokens_.zero_();
}

void Engine::record(const nlohmann::json& row, int64_t step) {
  dist::all_or_none(*s_.dp, "writing metrics.jsonl at step " + std::to_string(step), [&] { s_.metrics.write(row); });
}

void Engine::log_window(LogWindow& w, TrainState& state, double lr, EngineResult& result) {
  const auto& t = s_.train;
  // The window's one device -> host copy (fp16: the loss scale rides along as entry 5).
  const auto h = (scaler_.enabled() ? torch::cat({w.sums, scaler_.scale().to(torch::kDouble).view({1})}) : w.sums).cpu();
  const double* v = h.data_ptr<double>();
  flush_tokens(state);
  const double secs = std::chrono::duration<double>(Clock::now() - w.start).count();
  const double done_secs = std::chrono::duration<double>(Clock::now() - loop_start_).count();
  const double eta = done_secs / static_cast<double>(state.step - first_step_) *
                     static_cast<double>(t.max_steps - state.step);
  const double steps = static_cast<double>(w.finite_steps);
  const double mean_loss = v[3] > 0 ? v[0] / v[3] : std::nan("");  // over the items scored (count N)
  const double mean_grad = w.finite_steps ? v[1] / steps : std::nan("");
  const double acc = v[3] > 0 ? v[2] / v[3] : std::nan("");  // no masked token (or skipped steps only): none
  const double tok_s = v[4] / std::max(secs, 1e-9);
  const double flops = s_.flops_per_token * tok_s / static_cast<double>(s_.dp->world());  // per device
  const std::string acc_name = task_.accuracy_name();
  log::info(s_.log_tag.c_str(), "step {}/{} | loss {}{} | lr {:.2e} | gnorm {}{} | {:.0f} tok/s{} | ETA {}{}",
            state.step, t.max_steps, mean_text(v[0], v[3], 4), acc_name.empty() ? "" : " | acc " + mean_text(v[2], v[3], 3),
            lr, mean_text(v[1], steps, 2), scaler_.enabled() ? fmt::format(" | scale {:g}", v[5]) : std::string(), tok_s,
            flops > 0 ? " | " + flops_text(flops) + (s_.device.is_cuda() ? "/GPU" : "/process") : std::string(),
            format_duration(eta), w.skipped ? fmt::format(" | {} skipped", w.skipped) : std::string());
  nlohmann::json row = {{"step", state.step}, {"loss", mean_loss}, {"lr", lr}, {"grad_norm", mean_grad},
                        {"tokens_per_s", tok_s}, {"tokens_seen", state.tokens_seen}, {"skipped", w.skipped},
                        {"elapsed_s", train_seconds()}};  // the run's, across resumes (the ETA: this process's pace)
  if (!acc_name.empty()) row[acc_name] = acc;
  if (flops > 0) row["model_tflops_per_device"] = flops / 1e12;
  if (scaler_.enabled()) row["loss_scale"] = v[5];
  record(row, state.step);
  if (v[3] > 0) {
    if (std::isnan(result.first_loss)) result.first_loss = mean_loss;
    result.final_loss = mean_loss;
  }
  w = LogWindow(s_.device);
}

}  // namespace rpe

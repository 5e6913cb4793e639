// The training engine (see engine.h).
#include "train/engine.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <cmath>

#include "dist/rank0_only.h"
#include "dist/replica_check.h"
#include "train/micro_step_graph.h"
#include "train/optim.h"
#include "train/precision.h"
#include "util/errors.h"
#include "util/stop_signals.h"
#include "util/torch_compat.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

Engine::Engine(EngineSetup setup, torch::nn::Module& model, torch::optim::Optimizer& optimizer, Task& task)
    : s_(std::move(setup)), model_(model), optimizer_(optimizer), task_(task), params_(model.parameters()),
      scaler_(s_.train, s_.device) {
  require(s_.dp != nullptr, "Engine: no DataParallel given");
  device_update_ = dynamic_cast<DeviceSkippableStep*>(&optimizer_);
  for (const auto& group : optimizer_.param_groups())  // ForeachAdamW::step_if has no amsgrad: decide on the host
    if (auto* o = dynamic_cast<const torch::optim::AdamWOptions*>(&group.options()); o && o->amsgrad())
      device_update_ = nullptr;
  s_.dp->attach_gradient_hooks(params_);  // multi-process: all-reduce overlapped with backward
  if (s_.train.cuda_graphs || s_.emulate_cuda_graphs) {
    auto no = [](const std::string& why) { throw UserError("train.cuda_graphs: " + why + " (set it to false)"); };
    if (!task_.fixed_shapes()) no("pretraining only (these batches change shape)");
    if (s_.dp->distributed()) no("one process outside a process group only for now");
    if (!s_.emulate_cuda_graphs && !s_.device.is_cuda()) no("needs a CUDA device, got " + s_.device.str());
    if (!s_.emulate_cuda_graphs && !CudaGraph::built()) no("this build's LibTorch has no CUDA graphs (a CPU one, or one before 2.1)");
    if (s_.hooks.on_loss) no("the on_loss hook cannot see inside a graph");
    if (scaler_.enabled()) no("needs precision fp32 or bf16 (fp16's loss scale is not in the graph)");
    graphs_ = std::make_unique<MicroStepGraphs>(task_, params_, s_.device, autocast_dtype(s_.train.precision),
                                                s_.dp->world(), s_.emulate_cuda_graphs);
  }
}

Engine::~Engine() = default;

MicroBatch Engine::to_device(MicroBatch b) const {
  if (s_.device.is_cpu()) return b;
  for (auto& t : b.tensors) {
    if (!t.defined() || t.device() == s_.device) continue;
    // pinned staging buffer -> asynchronous copy on the current stream, ordered before the step's kernels
    t = t.pin_memory().to(s_.device, /*non_blocking=*/true);
  }
  return b;
}

MicroBatch Engine::take_batch() {
  if (!next_) next_ = to_device(task_.next_batch());
  MicroBatch b = std::move(*next_);
  // Prepared (read, masked, copy queued) while the GPU runs what was queued: the host never waits. The
  // copy shares the compute stream (a few hundred KB a micro-batch: a copy stream would not pay for its events).
  next_ = to_device(task_.next_batch());
  return b;
}

StepStats Engine::step(int64_t step) {
  const auto& t = s_.train;
  auto& dp = *s_.dp;
  const auto dopt = torch::TensorOptions(torch::kDouble).device(s_.device);
  if (graphs_) graphs_->zero_grad();  // in place: the graphs accumulate into these tensors
  else optimizer_.zero_grad();
  std::vector<MicroBatch> batches;
  auto local_count = torch::zeros({}, dopt);
  for (int64_t m = 0; m < t.grad_accum; ++m) {
    batches.push_back(take_batch());
    local_count = local_count + task_.count(batches.back()).to(torch::kDouble);
  }
  // N: items of the whole optimizer step over all ranks (the loss's denominator), on device.
  auto n = local_count.clone();
  dp.all_reduce_sum(n);
  const auto scale = torch::full({}, static_cast<double>(dp.world()), dopt).div(n.clamp_min(1.0));  // [ ] W / N
  auto local = torch::zeros({5}, dopt);  // [loss / W, correct, tokens, refused, stop] of this rank
  const auto autocast_type = autocast_dtype(t.precision);
  for (size_t i = 0; i < batches.size(); ++i) {
    const auto& batch = batches[i];
    if (graphs_) {  // forward and backward replayed (one process: no gradient sync to arm)
      local.slice(0, 0, 3) += graphs_->run(batch, scale);  // [loss / W, correct, tokens]
      consumed_ = batch.cursor;
      continue;
    }
    // The last micro-batch's backward all-reduces each gradient bucket as soon as it is final.
    if (i + 1 == batches.size()) dp.arm_gradient_sync();
    BatchSums sums;
    {
      AutocastGuard autocast(s_.device, autocast_type);
      sums = task_.forward(batch);
    }
    auto loss = sums.loss * scale.to(sums.loss.scalar_type());
    if (s_.hooks.on_loss) s_.hooks.on_loss(step, loss);
    scaler_.scaled(loss).backward();  // fp16: the loss times the loss scale S, else the loss
    local[0] += loss.detach().to(torch::kDouble) / static_cast<double>(dp.world());
    if (sums.correct.defined()) local[1] += sums.correct.detach().to(torch::kDouble);
    local[2] += sums.tokens.to(torch::kDouble);
    consumed_ = batch.cursor;
  }
  // The step's only gradient communication: waits, grads <- mean over ranks. A rank that refused
  // them (dist/grad_sync.h) makes the step's loss NaN on every rank, so it is skipped everywhere
  // and settled as non-finite, where refused > 0 stops every rank (stop_if_refused).
  if (dp.finish_gradient_sync()) {
    local[0].fill_(std::nan(""));
    local[3].fill_(1.0);
  }
  // A stop request (util/stop_signals.h, or the time limit) read as late as possible: a signal
  // that came during this step's forward and backward stops the run after this step.
  if (asks_to_stop()) local[4].fill_(1.0);
  dp.all_reduce_sum(local);  // on-device statistics, no host copy
  StepStats st{local[0], local[1], n, local[2], {}, {}, {}, local[3], local[4]};  // loss, correct, count, tokens, .., refused, stop
  st.overflow = scaler_.unscale_(defined_grads(params_));  // fp16: grads / S, and whether one overflowed
  st.grad_norm = global_grad_norm(params_);
  if (t.clip_norm > 0) clip_gradients(params_, st.grad_norm, t.clip_norm);
  st.finite = torch::isfinite(st.loss).logical_and(torch::isfinite(st.grad_norm));
  scaler_.update(st.overflow);  // fp16: halve S after an overflow, double it after fp16_scale_window clean steps
  return st;
}

double Engine::train_seconds() const {
  return prior_seconds_ + std::chrono::duration<double>(Clock::now() - loop_start_).count();
}

fs::path Engine::save(TrainState& state, const LogWindow& w) {
  flush_tokens(state);
  state.log_window = w.snapshot();  // a checkpoint between two log steps resumes into the same rows
  state.cursor = consumed_;
  state.train_seconds = train_seconds();
  note_world_size(state, first_step_, s_.dp->world());  // this process's stretch (summary.json's world_sizes)
  // Every rank takes part (one small all-reduce per checkpoint, never in a step): a checkpoint
  // is written only while the replicas agree, so the newest one is always safe to resume from.
  if (const auto diff = dist::replica_difference(*s_.dp, model_); !diff.empty()) {
    const auto good = s_.run_dir.empty() ? std::nullopt : latest_checkpoint(s_.run_dir);
    throw std::runtime_error(
        "data-parallel replicas diverged by step " + std::to_string(state.step) + ": " + diff +
        "; every rank must apply the same update to the same weights (a rank-dependent step, a "
        "non-deterministic kernel or a faulty GPU); not saved" +
        (good ? "; newest checkpoint, from when they agreed: " + good->string() : std::string()));
  }
  if (s_.run_dir.empty()) return {};
  // Rank 0 writes every rank's dropout stream; none when one process resumed a multi-GPU run (not its streams).
  const bool ranks = s_.dp->distributed() && s_.device.is_cuda();
  state.rng_device_ranks = ranks ? every_rank_row(*s_.dp, RandomStates::capture(s_.device).device) : torch::Tensor();
  // Rank 0 alone writes; its failure (a full disk, weights gone non-finite) stops every rank at
  // once with its reason rather than at their next gradient all-reduce; the others wait on its
  // heartbeat, so a slow shared file system is no timeout (dist/rank0_only.h).
  // Every rank returns the file (the others name rank 0's), so a stop's message says where it is.
  saved_file_ = checkpoint_file(s_.run_dir, state.step);
  dist::rank0_only(*s_.dp, "saving the checkpoint of step " + std::to_string(state.step), [&] {
    const auto start = Clock::now();
    saved_file_ = write_checkpoint(state);
    // What a save costs on this file system, and the newest step a crash would resume from.
    std::error_code ec;
    const auto bytes = fs::file_size(saved_file_, ec);
    log::info(s_.log_tag.c_str(), "checkpoint {} written ({:.0f} MiB, {:.1f} s)", saved_file_.string(),
              ec ? 0.0 : static_cast<double>(bytes) / (1 << 20), std::chrono::duration<double>(Clock::now() - start).count());
  });
  saved_step_ = state.step;
  return saved_file_;
}

fs::path Engine::write_checkpoint(TrainState& state) {
  if (device_update_) device_update_->sync_host_state();  // its step counts, kept on the device
  scaler_.save(state);                                    // fp16: the loss scale, for an exact resume
  state.task_state = task_.saved_state();                 // rank 0's task: what it decided up to this step
  if (!all_finite(params_)) {
    // issue 17: never keep (or call "good") weights that are NaN/inf
    const auto good = latest_checkpoint(s_.run_dir);
    throw UserError("training stopped at step " + std::to_string(state.step) +
                    ": the weights became non-finite (an update diverged: lower train.lr, check model.layer_norm_eps); "
                    "not saved; newest checkpoint with finite weights: " +
                    (good ? good->string() : std::string("none")));
  }
  return save_checkpoint(s_.run_dir, model_, &optimizer_, state, s_.config_yaml, s_.train.keep_checkpoints);
}

void Engine::update_on_device(const StepStats& st, TrainState& state, LogWindow& w) {
  settle(w, state);  // the previous step's flags: it is done while this one runs
  if (stop_asked_) return;  // the run stops as it was after the previous step: this one's update is dropped
  device_update_->step_if(st.finite);
  const auto logged = torch::stack({st.loss * st.count, st.grad_norm.to(torch::kDouble)});
  w.sums.slice(0, 0, 2) += torch::where(st.finite, logged, torch::zeros_like(logged));  // finite steps only
}

std::string Engine::update_on_host(const StepStats& st, TrainState& state, LogWindow& w) {
  const auto flags = st.flags().cpu();  // the one host read of such a step
  stop_asked_ = flags[1].item<bool>();  // after this step: run() stops once it is counted
  if (flags[0].item<bool>()) {
    optimizer_.step();
    state.nonfinite_in_a_row = 0;
    w.sums.slice(0, 0, 2) += torch::stack({st.loss * st.count, st.grad_norm.to(torch::kDouble)});
    ++w.finite_steps;
    return "";
  }
  stop_if_refused(state.step + 1, st.refused);
  ++w.skipped;
  const auto scale = scaler_.enabled() ? scaler_.snapshot() : torch::Tensor();
  return note_nonfinite(state.step + 1, st.loss, st.grad_norm, st.overflow, scale, state);
}

void Engine::queue_pending(const StepStats& st, int64_t step) {
  PendingStep p{step,      st.flags(), nullptr, st.loss, st.grad_norm, st.overflow,
                scaler_.enabled() ? scaler_.snapshot() : torch::Tensor(),
                st.refused, consumed_, RandomStates::capture(s_.device)};
  if (s_.device.is_cuda()) {  // a pinned copy on the stream, and an event to wait for it alone
    auto flags = torch::empty({2}, torch::TensorOptions(torch::kBool).pinned_memory(true));
    flags.copy_(p.flags, /*non_blocking=*/true);
    p.flags = flags;
    p.copied = std::make_shared<c10::Event>(c10::DeviceType::CUDA);
    p.copied->record(c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(s_.device));
  }
  pending_ = std::move(p);
}

void Engine::settle(LogWindow& w, TrainState& state) {
  if (!pending_) return;
  PendingStep p = std::move(*pending_);
  pending_.reset();
  if (p.copied) compat::wait(*p.copied);
  // p.flags is host memory, done (the pinned copy on CUDA; on the CPU the flags themselves): read in place
  const bool* flags = compat::const_data_ptr<bool>(p.flags);
  // Settled one step late, the next step's batches may be taken but its update is not queued
  // yet: a stop here leaves the run as it was after step p.step (weights, optimizer, data
  // position, counters, loss scale).
  const auto back_to_step_end = [&] {
    consumed_ = p.cursor;
    if (p.scale.defined()) scaler_.restore(p.scale);
    p.rng.restore();  // the next step's forward drew dropout masks: its draws are undone too
  };
  if (flags[0]) {
    state.nonfinite_in_a_row = 0;
    ++w.finite_steps;
  } else {
    stop_if_refused(p.step, p.refused);
    ++w.skipped;
    const auto why = note_nonfinite(p.step, p.loss, p.grad_norm, p.overflow, p.scale, state);
    if (!why.empty()) {
      back_to_step_end();
      stop_nonfinite(state, w, why);
    }
  }
  if (flags[1]) {
    back_to_step_end();
    stop_asked_ = true;
  }
}

EngineResult Engine::run(TrainState state) {
  const auto& t = s_.train;
  task_.restore(state.cursor);
  scaler_.load(state);  // fp16: the saved loss scale (a fresh run keeps train.fp16_init_scale)
  consumed_ = state.cursor;
  model_.train();
  EngineResult result;
  result.first_loss = s_.first_loss;
  result.final_loss = s_.last_loss;  // kept when resumed from the final checkpoint (no step left)
  LogWindow w(s_.device);
  w.restore(state.log_window);  // resumed between two log steps: the window so far
  loop_start_ = Clock::now();
  first_step_ = state.step;
  prior_seconds_ = state.train_seconds;
  seen_tokens_ = torch::zeros({}, torch::TensorOptions(torch::kDouble).device(s_.device));
  // Signals caught until run() ends, or longer where the caller holds them (fine-tuning's seeds).
  can_stop_ = (s_.stop_on_signals && !s_.run_dir.empty()) || has_time_limit();
  std::optional<StopSignals> signals;
  if (s_.stop_on_signals && !s_.run_dir.empty() && !StopSignals::installed()) signals.emplace();
  pending_.reset();
  stop_asked_ = false;
  saved_step_ = -1;

  while (state.step < t.max_steps) {
    const double lr = learning_rate(t, state.step);
    set_learning_rate(optimizer_, lr);
    const StepStats st = step(state.step);
    std::string stop;  // why the run must stop after this step (host-decided updates only)
    if (device_update_) {
      update_on_device(st, state, w);
      if (stop_asked_) stop_on_request(state, w);  // the previous step's end: this one is dropped
    } else {
      stop = update_on_host(st, state, w);
    }
    w.add_scored(st.finite, st.correct, st.count, st.tokens);
    seen_tokens_ += st.tokens;
    ++state.step;
    if (device_update_) queue_pending(st, state.step);
    if (s_.hooks.on_step) s_.hooks.on_step(state.step, st.loss.item<double>());
    if (!stop.empty()) stop_nonfinite(state, w, stop);
    if (state.step % t.log_every == 0 || state.step == t.max_steps) {
      settle(w, state);  // a log line is a host read anyway
      log_window(w, state, lr, result);
    }
    const bool eval_now = (t.eval_every > 0 && state.step % t.eval_every == 0) || task_.eval_due(state.step);
    const bool save_now = t.save_every > 0 && state.step % t.save_every == 0 && state.step != t.max_steps;
    // Evaluation and checkpoint are left out of tokens/s, from when the step's device work is done.
    if ((eval_now || save_now) && s_.device.is_cuda()) torch::cuda::synchronize(s_.device.index());
    const auto paused = Clock::now();
    if (eval_now && state.step != t.max_steps && evaluate_and_stop(state)) {
      result.stopped_early = true;
      settle(w, state);  // the steps since the last log line get theirs, as a run's last step does
      if (state.step % t.log_every != 0) log_window(w, state, lr, result);
      break;
    }
    if (save_now && !s_.run_dir.empty()) {
      settle(w, state);
      save(state, w);
    }
    w.leave_out_since(paused);
    // A request that came during this step's evaluation or checkpoint (one collective per such
    // pause, never per step): the run stops now, not after another step and checkpoint.
    if ((eval_now || save_now) && a_rank_asks_to_stop()) {
      settle(w, state);
      stop_asked_ = true;
    }
    if (stop_asked_) stop_on_request(state, w);  // this step's end (its row, evaluation and checkpoint done)
  }
  settle(w, state);
  s_.dp->barrier();  // every rank done with collectives before rank 0 saves and the group closes
  result.checkpoint = save(state, w);  // without a run folder: only the replicas' agreement check
  // A request that came in the last step or during that save (one collective a run): the final
  // evaluation and summary are left to --resume, which starts from this checkpoint. Not after an
  // early stop (the same on every rank): that run is finished, a resume would train past it. The
  // time limit only once this process has trained: a restart with no step left evaluates and ends.
  if (!result.stopped_early && a_rank_asks_to_stop(state.step > first_step_)) stop_on_request(state, w);
  state.cursor = consumed_;
  result.state = state;
  return result;
}

}  // namespace rpe

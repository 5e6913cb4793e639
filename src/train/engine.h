// The one training engine of rpe-train: pretraining (MLM) and every fine-tuning task (SQuAD,
// GLUE) run their optimizer steps through Engine. A task supplies batches, a forward pass
// that returns on-device sums, and (optionally) an evaluation; the engine owns the rest:
//   lr schedule, bf16/fp16 autocast (fp16 with dynamic loss scaling), gradient accumulation, data parallelism (dist::DataParallel),
//   gradient clipping, the non-finite guard, progress line, metrics.jsonl rows, periodic
//   evaluation and checkpoints/resume (train/checkpoint.h); at each checkpoint and at the end,
//   a check that every rank holds the same weights (dist/replica_check.h).
//
// One optimizer step (W ranks, A = grad_accum micro-batches per rank):
//   N      = sum over ranks and micro-batches of task.count(batch)   (on-device all-reduce)
//   loss_m = task.forward(batch_m).loss * W / N,  backward per micro-batch
//   grads <- mean over ranks (bucketed all-reduce overlapped with the last backward, see
//            DataParallel::attach_gradient_hooks)
// so the gradient is that of the item-mean loss over the global batch whatever W and A are.
//
// train.cuda_graphs (one GPU, pretraining): each micro-batch's forward and backward is one
// replayed CUDA graph instead of ~2,000 launches (train/micro_step_graph.h); the rest as above.
//
// Host synchronisation: the step keeps loss, counts, accuracy and gradient norm on the device
// and accumulates them over the log window; they reach the host once per log interval. The
// non-finite guard (isfinite(loss) && isfinite(grad norm)) is decided on the device by the
// project's optimizers (DeviceSkippableStep: ForeachAdamW, Lamb; the update is queued
// unconditionally and leaves everything as it was when the flag is false), and the host reads
// each step's flag one step late: the flag is copied to pinned memory as soon as it exists, and
// read after the next step's forward/backward is queued, so the host waits for the finished step
// only while the device works on the next (bookkeeping: counters, the warning, the in-a-row
// stop, which restores the cursor of the step that tripped it). Any other optimizer (LibTorch's,
// or AdamW with amsgrad) is stepped after a host read of the flag: one 1-element read per step.
//
// Stopping on request (EngineSetup::stop_on_signals: pretraining, fine-tuning): a rank that got SIGTERM,
// SIGINT, SIGHUP or SIGUSR1 (util/stop_signals.h) says so in the statistics the step under way
// all-reduces anyway (or in one agreement after a periodic evaluation or checkpoint, and one after
// the final checkpoint), so every rank learns it from the same step, reads it with that step's
// finite flag (one step late, as above) and stops as it was after that step: a checkpoint (the
// one just written, if any), then StopRequested. `--resume` continues exactly as if the run had
// not stopped. A rank past EngineSetup::stop_at (train.time_limit_min) asks the same way.
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <c10/core/Event.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "dist/data_parallel.h"
#include "train/checkpoint.h"
#include "train/device_update.h"
#include "train/gradients.h"
#include "train/log_window.h"
#include "train/loss_scaler.h"
#include "train/metrics.h"
#include "util/errors.h"

namespace rpe {

class MicroStepGraphs;  // train/micro_step_graph.h

// Items per rank and micro-batch: batch_size split evenly over grad_accum micro-batches on each
// of `world` ranks. UserError when it does not divide: a floored share would train on a smaller
// batch than the config and the log say.
inline int64_t micro_batch_size(const TrainOptions& t, int64_t world) {
  const int64_t per_rank = t.grad_accum * world;
  if (t.batch_size % per_rank != 0)
    throw UserError("train.batch_size (" + std::to_string(t.batch_size) + ") is not divisible by grad_accum x world size (" +
                    std::to_string(t.grad_accum) + " x " + std::to_string(world) +
                    "): give a batch that is (and train.lr for it: a change from the config's recipe), or another "
                    "number of ranks");
  return t.batch_size / per_rank;
}

// One micro-batch: task-defined tensors (host tensors from Task::next_batch; the engine copies
// them to the device, pinned and non-blocking on CUDA; undefined entries stay undefined).
struct MicroBatch {
  std::vector<torch::Tensor> tensors;
  LoaderCursor cursor;  // the task's data position after this batch (saved in checkpoints)
};

// On-device scalars of one micro-batch's forward pass.
struct BatchSums {
  torch::Tensor loss;     // sum of the per-item losses (the engine divides by N), with grad
  torch::Tensor correct;  // correct predictions; undefined = the task reports no accuracy
  torch::Tensor tokens;   // non-pad tokens (throughput)
};

// A held-out pass's outputs, as a task gathers them (logits, predictions, loss sums).
using EvalOutputs = std::vector<torch::Tensor>;

class Task {
 public:
  virtual ~Task() = default;
  // This rank's next micro-batch (host tensors).
  virtual MicroBatch next_batch() = 0;
  // Items in `batch`'s loss (masked tokens, examples), a 0-dim tensor on the batch's device;
  // must not read anything back from the device.
  virtual torch::Tensor count(const MicroBatch& batch) = 0;
  // Forward pass on a device batch (the engine sets autocast and train mode).
  virtual BatchSums forward(const MicroBatch& batch) = 0;
  // Continues the data stream after `cursor` (resume).
  virtual void restore(const LoaderCursor& /*cursor*/) {}
  // What the task keeps besides the data position, as text for rank 0's checkpoint
  // (TrainState::task_state, taken when rank 0 writes it); "" = nothing.
  virtual std::string saved_state() const { return ""; }
  // metrics.jsonl name of the training accuracy (correct / count); "" = the task reports none.
  virtual std::string accuracy_name() const { return ""; }
  // Whether every micro-batch has the same tensor shapes (up to a padding mask being there or
  // not), so that train.cuda_graphs can replay one captured graph for them (train/micro_step_graph.h).
  virtual bool fixed_shapes() const { return false; }
  // Held-out evaluation (no grad, eval mode; the engine sets both and autocast), in two parts.
  // eval_outputs: on every rank together, the model's outputs on the held-out data, its forward
  // passes split over the ranks and gathered (dist/sharded_eval.h); the only part that runs
  // collectives. score: rank 0, the metrics from those outputs: metric name -> value ({}: the
  // task evaluates nothing).
  virtual EvalOutputs eval_outputs(dist::DataParallel& /*dp*/) { return {}; }
  virtual nlohmann::json score(const EvalOutputs& /*outputs*/) { return nlohmann::json::object(); }
  // Besides every train.eval_every steps, evaluate also after optimizer step `step` (1-based)?
  // Must give the same answer on every rank (fine-tuning: at each epoch's end).
  virtual bool eval_due(int64_t /*step*/) const { return false; }
  // Rank 0, after each periodic evaluation (at `step`, with evaluate()'s fields): true stops the
  // training there (early stopping); the engine tells every rank.
  virtual bool after_evaluation(int64_t /*step*/, const nlohmann::json& /*fields*/) { return false; }
};

// Observation points for tests and tools; all optional.
struct EngineHooks {
  // Sees (and may replace, e.g. by NaN) each micro-batch's loss scaled by W / N, before backward
  // (and before fp16's loss scale S); step is 0-based.
  std::function<void(int64_t step, torch::Tensor& loss)> on_loss;
  // After each optimizer step (1-based count) with that step's loss over all ranks. Installing
  // it costs one host read per step (tests only).
  std::function<void(int64_t step, double loss)> on_step;
};

// EngineSetup::stop_at for train.time_limit_min counted from `start` (the command's start, as a
// job's limit counts); none when the option is 0.
std::optional<std::chrono::steady_clock::time_point> time_limit_deadline(const TrainOptions& t,
                                                                        std::chrono::steady_clock::time_point start);

struct EngineSetup {
  TrainOptions train;  // max_steps, warmup, clip_norm, grad_accum, log/eval/save intervals, precision
  torch::Device device = torch::kCPU;
  dist::DataParallel* dp = nullptr;  // required
  MetricsWriter metrics;             // rank 0's metrics.jsonl; disabled elsewhere
  std::filesystem::path run_dir;     // checkpoints go to run_dir/checkpoints (rank 0); empty = no checkpoints.
                                     // Set on every rank or on none: saving is agreed by all (dist/all_or_none.h)
  std::string config_yaml;           // embedded in checkpoints
  std::string log_tag = "train";
  // Model FLOPs of training on a token (config/model_size.h): the progress line and metrics rows
  // give FLOP/s per device (model_tflops_per_device); 0 = not shown.
  double flops_per_token = 0.0;
  double first_loss = std::nan("");  // a resumed run's first and last logged losses (from its
  double last_loss = std::nan("");   // metrics.jsonl): the summary reads as if never interrupted
  EngineHooks hooks;
  // SIGTERM, SIGINT, SIGHUP and SIGUSR1 during run() stop the run after a step, with a
  // checkpoint (see the header comment; needs run_dir); false: they act as usual (kill).
  bool stop_on_signals = false;
  // The stop's message ends with what continues the run (fine-tuning names its command).
  std::string resume_hint = "`--resume` continues the run";
  // train.time_limit_min (with run_dir): past this time, run() stops as on a signal
  // (read at the same points; StopRequested with signal 0).
  std::optional<std::chrono::steady_clock::time_point> stop_at;
  // Tests: train.cuda_graphs's static-buffer path with the graph's body run directly (no capture:
  // a CPU can show that path equals the plain one).
  bool emulate_cuda_graphs = false;
};

// On-device results of one optimizer step (all ranks together), for logging and tests.
struct StepStats {
  torch::Tensor loss;       // 0-dim float64: mean loss of the step over all ranks
  torch::Tensor correct;    // 0-dim float64: correct predictions, all ranks
  torch::Tensor count;      // 0-dim float64: N, the loss denominator, all ranks
  torch::Tensor tokens;     // 0-dim float64: non-pad tokens, all ranks
  torch::Tensor grad_norm;  // 0-dim float32: global gradient L2 norm before clipping (unscaled in fp16)
  torch::Tensor finite;     // 0-dim bool: loss and gradient norm finite
  torch::Tensor overflow;   // fp16: 0-dim float32, 1 if a scaled gradient overflowed (undefined otherwise)
  // 0-dim float64: ranks whose gradient sync refused the step (dist/grad_sync.h; their loss is
  // NaN, so the step is not finite); 0 in a single process.
  torch::Tensor refused;
  torch::Tensor stop;  // 0-dim float64: ranks asking to stop (a signal, util/stop_signals.h); 0 if none
  // [2] bool on the device, {finite, stop > 0}: what the host reads of a step.
  torch::Tensor flags() const { return torch::stack({finite, stop.gt(0.0)}); }
};

struct EngineResult {
  TrainState state;
  double first_loss = std::nan("");  // mean training loss of the first logged window
  double final_loss = std::nan("");  // mean training loss of the last logged window
  std::filesystem::path checkpoint;  // the final checkpoint (run_dir given; other ranks name rank 0's)
  bool stopped_early = false;        // the task stopped the training before train.max_steps
};

// Rank 0 of a run about to train from `state` (step 0, or the checkpoint it resumed from):
// metrics.jsonl (`file`) without the rows the run redoes (drop_metrics_after; with
// `final_redone`, the evaluation rows of state.step as well: the final evaluation comes after the
// final checkpoint), and, resumed, the first and last logged losses into `setup` and the training
// time so far into state.train_seconds, so that the run's records read as if it never stopped.
// setup.metrics then writes to `file`.
void continue_metrics(const std::filesystem::path& file, TrainState& state, bool final_redone, EngineSetup& setup);

class Engine {
 public:
  // UserError when train.cuda_graphs cannot apply (a task of changing shapes, several processes,
  // no CUDA device).
  Engine(EngineSetup setup, torch::nn::Module& model, torch::optim::Optimizer& optimizer, Task& task);
  ~Engine();
  // Trains from `state` (step 0 or a resumed checkpoint's) to train.max_steps; saves the final
  // checkpoint when run_dir is set. UserError after max_nonfinite_in_a_row skipped steps, or
  // (fp16) when overflows push the loss scale below train.min_loss_scale; StopRequested, after
  // its checkpoint, when a signal asked to stop (stop_on_signals).
  EngineResult run(TrainState state);
  // One optimizer step at 0-based `step`: forward/backward of grad_accum micro-batches, gradient
  // averaging, (fp16) unscaling and the loss scale's update, clipping; the update itself is left
  // to the caller (see run()). No host sync.
  StepStats step(int64_t step);
  // The task's held-out evaluation of the weights after `at`.step, on every rank (the pass is
  // split over them): its outputs in eval mode under the run's precision, then rank 0 scores
  // them, logs the fields and writes a {"step", "split": "valid", "tokens_seen", "elapsed_s",
  // ...} row with `at`'s tokens_seen and train_seconds (after run(): its result.state, saved at
  // the end of training); returns the fields on rank 0, {} elsewhere. A failure in rank 0's
  // part stops every rank (dist/all_or_none.h).
  nlohmann::json evaluate(const TrainState& at);
  // fp16's dynamic loss scale (disabled in fp32/bf16).
  const LossScaler& loss_scaler() const { return scaler_; }

 private:
  MicroBatch take_batch();  // the prefetched device batch; starts the copy of the following one
  MicroBatch to_device(MicroBatch host) const;
  // On every rank: takes the tokens counted so far, the log window `w` and the data position
  // into `state`, checks that the replicas agree (dist/replica_check.h; std::runtime_error if
  // not), then rank 0 writes the checkpoint when there is a run folder; returns its path (on every
  // rank: the others name rank 0's file) or {} without a run folder.
  // A failure to write stops every rank (dist/all_or_none.h).
  std::filesystem::path save(TrainState& state, const LogWindow& w);
  std::filesystem::path write_checkpoint(TrainState& state);  // rank 0's part of save()
  // The periodic evaluation at state.step (as evaluate; first brings state.tokens_seen and
  // state.train_seconds up to now) and the task's early-stopping decision after it (rank 0's),
  // the same on every rank; an evaluation that fails stops every rank.
  bool evaluate_and_stop(TrainState& state);
  // evaluate's parts: the task's outputs in eval mode under the run's precision (every rank),
  // and rank 0's scoring, log line and metrics row.
  EvalOutputs held_out_outputs();
  nlohmann::json record_evaluation(const TrainState& at, const EvalOutputs& outputs);

  // Adds the tokens counted on the device since the last call to state.tokens_seen (host read).
  void flush_tokens(TrainState& state);
  // A skipped update, step `step` (1-based): counters, the warning and a nonfinite_skip row; in
  // fp16 a finite loss whose scaled gradients overflowed (`overflow`, the unscale kernel's flag)
  // is an overflow_skip instead (the loss scale, `scale` after its backoff, adapts; the in-a-row
  // streak is left alone). Returns why the run must stop ("" to go on): the streak reached
  // max_nonfinite_in_a_row, or the scale fell below min_loss_scale.
  std::string note_nonfinite(int64_t step, const torch::Tensor& loss, const torch::Tensor& grad_norm,
                             const torch::Tensor& overflow, const torch::Tensor& scale, TrainState& state);
  // The update of `st`: queued for the device to apply or skip (DeviceSkippableStep), after
  // settling the previous step (not queued when that step's end asked to stop: stop_asked_);
  // or decided on the host, returning why the run must stop ("": go on).
  void update_on_device(const StepStats& st, TrainState& state, LogWindow& w);
  std::string update_on_host(const StepStats& st, TrainState& state, LogWindow& w);
  // A step the device decided alone, its flag on the way to the host (see the header comment).
  struct PendingStep {
    int64_t step = 0;                    // 1-based
    torch::Tensor flags;                 // [2] bool on the host, {finite, stop} (pinned; filled asynchronously on CUDA)
    std::shared_ptr<c10::Event> copied;  // CUDA: the copy's completion; null on CPU
    torch::Tensor loss, grad_norm;       // on the device, for the warning
    torch::Tensor overflow;              // fp16: StepStats::overflow, on the device
    torch::Tensor scale;                 // fp16: LossScaler::snapshot() after this step's update
    torch::Tensor refused;               // StepStats::refused, on the device
    LoaderCursor cursor;                 // the data position after this step
    RandomStates rng;                    // the random streams after this step (host copies)
  };
  void queue_pending(const StepStats& st, int64_t step);
  // Reads the pending step's flags and does its bookkeeping (window counts, non-finite warning,
  // the in-a-row stop; a stop request sets stop_asked_ and puts the data position, random
  // streams and loss scale back to that step's end); a no-op when nothing is pending.
  void settle(LogWindow& w, TrainState& state);
  // A skipped step `step` (1-based) that some rank's gradient sync refused (`refused` > 0, the
  // same on every rank: every rank calls this at the same point): every rank stops, the refusing
  // rank with its reason, the others naming it (dist/all_or_none.h); returns otherwise. A host
  // read on the non-finite path only.
  void stop_if_refused(int64_t step, const torch::Tensor& refused);
  // After too many skipped steps (`why`, from note_nonfinite): saves the last finite weights
  // (with the log window `w` so far), throws UserError.
  [[noreturn]] void stop_nonfinite(TrainState& state, const LogWindow& w, const std::string& why);
  // Whether this rank asks to stop: a signal came, or (`time_counts`) it is past s_.stop_at
  // (host only).
  bool asks_to_stop(bool time_counts = true) const;
  bool has_time_limit() const;  // train.time_limit_min, where a checkpoint can be written
  bool past_time_limit() const;
  // Whether any rank asks to stop (a collective; false while run() takes no requests: can_stop_).
  bool a_rank_asks_to_stop(bool time_counts = true);
  // The stop a signal or the time limit asked for, after step state.step: saves the checkpoint
  // (unless this step's was just saved), logs where it is, throws StopRequested.
  [[noreturn]] void stop_on_request(TrainState& state, const LogWindow& w);
  // Appends `row` to rank 0's metrics.jsonl; when that fails (a full disk) every rank stops
  // with its reason (dist/all_or_none.h), not at its next gradient all-reduce.
  void record(const nlohmann::json& row, int64_t step);
  // The progress line and metrics.jsonl row of the window ending at state.step; records the
  // window's mean loss in `result` and starts a new window.
  void log_window(LogWindow& w, TrainState& state, double lr, EngineResult& result);

  EngineSetup s_;
  torch::nn::Module& model_;
  torch::optim::Optimizer& optimizer_;
  DeviceSkippableStep* device_update_ = nullptr;  // the optimizer when it can skip on the device
  std::optional<PendingStep> pending_;
  bool stop_asked_ = false;             // a settled step (every rank's view of it) asked to stop
  bool can_stop_ = false;               // run() takes stop requests (signals, the time limit)
  int64_t saved_step_ = -1;             // the step of the checkpoint save() wrote last, and its file
  std::filesystem::path saved_file_;
  Task& task_;
  std::vector<torch::Tensor> params_;
  LossScaler scaler_;               // fp16 only; a passthrough otherwise
  std::optional<MicroBatch> next_;  // device copy in flight
  LoaderCursor consumed_;           // cursor of the last batch a step used
  torch::Tensor seen_tokens_;       // 0-dim float64 on the device: not yet in state.tokens_seen
  std::chrono::steady_clock::time_point loop_start_;  // run()'s start, for the ETA
  int64_t first_step_ = 0;                            // run()'s first step (0 or resumed)
  double prior_seconds_ = 0.0;                        // training time of the processes before (resumed)
  double train_seconds() const;                       // the run's training time so far, resumes included
  std::unique_ptr<MicroStepGraphs> graphs_;           // train.cuda_graphs (or its emulation); null: eager
};

}  // namespace rpe

// The pretraining loop. Per optimizer step (all ranks together, W = world size):
//   fetch grad_accum micro-batches per rank; N = masked tokens in the whole step (all ranks)
//   loss_r = sum over this rank's masked tokens of CE / N * W, backward per micro-batch
//   grads <- mean over ranks (one bucketed all-reduce, none on accumulation micro-steps)
// so the gradient is that of the token-mean MLM loss over the global batch, whatever W and
// grad_accum are. Non-finite loss or gradient norm: no update, counted, and after
// train.max_nonfinite_in_a_row in a row the run stops with a checkpoint kept.
#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "data/mlm_dataset.h"
#include "data/pretrain_corpus.h"
#include "dist/data_parallel.h"
#include "model/bert.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/optim.h"
#include "train/precision.h"
#include "train/run_dir.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct StepStats {
  torch::Tensor loss_sum;  // scalar, sum of CE over the selected tokens
  int64_t correct = 0, predicted = 0;
};

// MLM loss over the selected positions only: [B, L, D] -> gather N selected -> [N, V].
StepStats mlm_step(BertModel& model, const MlmBatch& batch, const torch::Device& device, bool bf16) {
  auto ids = batch.ids.to(device), labels = batch.labels.to(device), pad = batch.padding.to(device);
  AutocastGuard autocast(device, bf16);
  auto hidden = model->encode(ids, pad);                                    // [B, L, D]
  auto flat_labels = labels.view({-1});                                     // [B*L]
  auto selected = flat_labels.ne(kIgnoreLabel).nonzero().view({-1});       // [N]
  auto h = hidden.view({-1, hidden.size(-1)}).index_select(0, selected);  // [N, D]
  auto target = flat_labels.index_select(0, selected);                      // [N]
  auto logits = model->mlm_logits(h);                                       // [N, V]
  StepStats s;
  namespace F = torch::nn::functional;
  s.loss_sum = F::cross_entropy(logits.to(torch::kFloat), target, F::CrossEntropyFuncOptions().reduction(torch::kSum));
  s.correct = logits.argmax(-1).eq(target).sum().item<int64_t>();
  s.predicted = target.size(0);
  return s;
}

struct Eval {
  double loss = 0.0, accuracy = 0.0;
};

Eval evaluate(BertModel& model, const std::shared_ptr<PackedSequences>& valid, const Tokenizer& tok,
              const Config& cfg, const torch::Device& device, int64_t micro_batch) {
  if (!valid || valid->size() == 0) return {std::nan(""), std::nan("")};
  torch::NoGradGuard no_grad;
  model->eval();
  MlmLoader loader(valid, tok, MaskingOptions::from(cfg.data), micro_batch, static_cast<uint64_t>(cfg.train.seed) + 1,
                   /*shuffle=*/false);
  const int64_t batches = std::min(cfg.train.eval_batches, std::max<int64_t>(1, valid->size() / micro_batch));
  double loss_sum = 0.0;
  int64_t correct = 0, total = 0;
  for (int64_t b = 0; b < batches; ++b) {
    auto s = mlm_step(model, loader.next(), device, cfg.train.precision == "bf16");
    loss_sum += s.loss_sum.item<double>();
    correct += s.correct;
    total += s.predicted;
  }
  model->train();
  return {loss_sum / std::max<int64_t>(1, total), static_cast<double>(correct) / std::max<int64_t>(1, total)};
}

// L2 norm of all gradients together (what clip_grad_norm_ reports), without clipping.
double global_grad_norm(const std::vector<torch::Tensor>& params) {
  double sq = 0.0;
  for (const auto& p : params)
    if (p.grad().defined()) sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  return std::sqrt(sq);
}

// In a multi-process run CUDA ranks use the GPU LOCAL_RANK.
torch::Device choose_device(const TrainOptions& t, const dist::LaunchEnv& env) {
  torch::Device d = resolve_device(t.device);
  if (d.is_cuda() && env.distributed() && (t.device == "auto" || t.device == "cuda"))
    d = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
  return d;
}

}  // namespace

PretrainResult pretrain(const Config& cfg_in, const fs::path& run_dir, bool resume, const PretrainHooks& hooks) {
  Config cfg = cfg_in;
  const auto& t = cfg.train;
  const auto start = Clock::now();
  if (t.threads > 0) torch::set_num_threads(static_cast<int>(t.threads));
  torch::manual_seed(static_cast<uint64_t>(t.seed));  // same on every rank: identical init and dropout streams
  const dist::LaunchEnv env = dist::detect_launch_env();
  const torch::Device device = choose_device(t, env);
  const bool bf16 = t.precision == "bf16";
  log::info("run", "run folder {} | {} | device {} | precision {}", run_dir.string(), describe_runtime(), device.str(),
            t.precision);
  dist::DataParallel dp(env, device, t.dist_timeout_s, t.bucket_mb);
  const bool chief = dp.rank() == 0;  // writes the run folder's files
  const int64_t per_rank = t.grad_accum * dp.world();
  if (t.batch_size % per_rank != 0)
    throw UserError("train.batch_size (" + std::to_string(t.batch_size) + ") is not divisible by grad_accum x world size (" +
                    std::to_string(t.grad_accum) + " x " + std::to_string(dp.world()) + ")");
  const int64_t micro_batch = t.batch_size / per_rank;

  // corpus -> tokenizer -> packed sequences (rank 0 trains a missing tokenizer, the others wait)
  std::unique_ptr<Tokenizer> tokenizer;
  if (chief) tokenizer = make_tokenizer(cfg.data, run_dir / "tokenizer.model");
  dp.barrier();
  if (!chief) tokenizer = make_tokenizer(cfg.data, run_dir / "tokenizer.model");
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = tokenizer->vocab_size();
  require(cfg.model.vocab_size >= tokenizer->vocab_size(),
          "model.vocab_size " + std::to_string(cfg.model.vocab_size) + " is smaller than the tokenizer's " +
              std::to_string(tokenizer->vocab_size()));
  const auto t0 = Clock::now();
  PretrainCorpus corpus = build_corpus(cfg.data, *tokenizer);
  log::info("data", "{} tokenizer, vocab {} | {} train sequences ({} tokens), {} held-out, length {} | {:.1f}s",
            tokenizer->kind(), tokenizer->vocab_size(), corpus.train->size(), corpus.train->real_tokens(),
            corpus.valid->size(), cfg.data.max_seq_len,
            std::chrono::duration<double>(Clock::now() - t0).count());
  const std::string config_yaml = to_yaml(cfg);
  if (chief) write_file_atomic(run_dir / "config.yaml", config_yaml);

  // model + optimizer
  BertModel model(cfg.model);
  model->to(device);
  model->set_fused_attention(device.is_cuda() && cfg.model.attention.backend != "plain");
  int64_t total_params = 0;
  for (const auto& p : model->parameters()) total_params += p.numel();
  log::info("model", "{} layers, hidden {}, heads {} | position: {} | {:.2f}M parameters, {} in position method",
            cfg.model.layers, cfg.model.hidden, cfg.model.heads, model->position->describe(),
            static_cast<double>(total_params) / 1e6, model->position_parameter_count());
  auto optimizer = make_optimizer(*model, t);
  const std::vector<torch::Tensor> params = model->parameters();

  TrainState state;
  state.optimizer_name = t.optimizer;
  state.schedule = t.schedule;
  if (resume) {
    if (auto ckpt = checkpoint_to_resume(run_dir, t.save_every)) {
      auto loaded = load_checkpoint(*ckpt, *model, optimizer.get()).state;
      if (!loaded.optimizer_name.empty() && loaded.optimizer_name != t.optimizer)
        throw UserError(ckpt->string() + ": written by optimizer '" + loaded.optimizer_name +
                        "' but train.optimizer is '" + t.optimizer + "'");
      loaded.optimizer_name = t.optimizer;
      loaded.schedule = t.schedule;
      state = loaded;
      log::info("train", "resumed from {} at step {}", ckpt->string(), state.step);
    } else {
      log::warn("train", "--resume: no usable checkpoint in {}, starting from step 0", run_dir.string());
    }
  }
  dp.broadcast_parameters(*model);  // after a resume too: every rank starts from rank 0's weights

  MlmLoader loader(corpus.train, *tokenizer, MaskingOptions::from(cfg.data), micro_batch,
                   static_cast<uint64_t>(t.seed), /*shuffle=*/true, dp.rank(), dp.world(), cfg.data.prefetch);
  loader.restore(state.cursor);
  MetricsWriter metrics = chief ? MetricsWriter(run_dir / "metrics.jsonl") : MetricsWriter();
  if (chief) {
    if (const auto n = drop_metrics_after(run_dir / "metrics.jsonl", state.step))
      log::info("train", "metrics.jsonl: dropped {} rows after step {} (they are redone)", n, state.step);
  }
  model->train();

  PretrainResult result;
  result.run_dir = run_dir;
  double window_loss = 0.0, window_grad = 0.0;
  int64_t window_steps = 0, window_tokens = 0, window_correct = 0, window_predicted = 0, window_skipped = 0;
  auto window_start = Clock::now();
  const auto loop_start = Clock::now();
  const int64_t first_step = state.step;
  bool first_window = true;
  auto save = [&] {
    state.cursor = loader.cursor();
    return chief ? save_checkpoint(run_dir, *model, optimizer.get(), state, config_yaml, t.keep_checkpoints) : fs::path();
  };

  while (state.step < t.max_steps) {
    const double lr = learning_rate(t, state.step);
    set_learning_rate(*optimizer, lr);
    optimizer->zero_grad();
    std::vector<MlmBatch> batches;
    int64_t local_predicted = 0;
    for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
      batches.push_back(loader.next());
      local_predicted += batches.back().labels.ne(kIgnoreLabel).sum().item<int64_t>();
    }
    // N: masked tokens of the whole optimizer step over all ranks (the loss's denominator).
    const double global_predicted = std::max(1.0, dp.sum({static_cast<double>(local_predicted)})[0]);
    double local_loss = 0.0;
    int64_t local_correct = 0, local_tokens = 0;
    for (auto& batch : batches) {
      auto s = mlm_step(model, batch, device, bf16);
      auto loss = s.loss_sum * (static_cast<double>(dp.world()) / global_predicted);
      if (hooks.on_loss) hooks.on_loss(state.step, loss);
      loss.backward();
      local_loss += loss.item<double>() / static_cast<double>(dp.world());
      local_correct += s.correct;
      local_tokens += batch.tokens;
    }
    dp.average_gradients(params);  // the only gradient communication of the step
    const auto totals = dp.sum({local_loss, static_cast<double>(local_correct), static_cast<double>(local_tokens)});
    const double step_loss = totals[0];
    const double grad_norm = t.clip_norm > 0 ? torch::nn::utils::clip_grad_norm_(params, t.clip_norm)
                                             : global_grad_norm(params);
    const bool finite = std::isfinite(step_loss) && std::isfinite(grad_norm);
    if (finite) {
      optimizer->step();
      state.nonfinite_in_a_row = 0;
    } else {
      optimizer->zero_grad();  // no update from this step
      ++state.nonfinite_total;
      ++state.nonfinite_in_a_row;
      ++window_skipped;
      log::warn("train", "step {}: non-finite {} ({}), update skipped ({} in a row, {} in total)", state.step + 1,
                std::isfinite(step_loss) ? "gradient norm" : "loss", std::isfinite(step_loss) ? grad_norm : step_loss,
                state.nonfinite_in_a_row, state.nonfinite_total);
      metrics.write({{"step", state.step + 1}, {"event", "nonfinite_skip"}, {"loss", step_loss},
                     {"grad_norm", grad_norm}, {"nonfinite_in_a_row", state.nonfinite_in_a_row},
                     {"nonfinite_total", state.nonfinite_total}});
    }
    ++state.step;
    state.tokens_seen += static_cast<int64_t>(totals[2]);
    if (hooks.on_step) hooks.on_step(state.step, step_loss);
    if (!finite && state.nonfinite_in_a_row >= t.max_nonfinite_in_a_row) {
      dp.barrier();
      const auto file = save();
      throw UserError("training stopped at step " + std::to_string(state.step) + ": " +
                      std::to_string(state.nonfinite_in_a_row) +
                      " non-finite losses or gradient norms in a row (train.max_nonfinite_in_a_row); last good weights "
                      "kept in " + (chief ? file.string() : std::string("rank 0's checkpoint")) +
                      " (lower train.lr, raise warmup_steps, or use precision fp32)");
    }
    if (finite) {
      window_loss += step_loss;
      window_grad += grad_norm;
      ++window_steps;
    }
    window_tokens += static_cast<int64_t>(totals[2]);
    window_correct += static_cast<int64_t>(totals[1]);
    window_predicted += static_cast<int64_t>(global_predicted);

    if (state.step % t.log_every == 0 || state.step == t.max_steps) {
      const double secs = std::chrono::duration<double>(Clock::now() - window_start).count();
      const double done_secs = std::chrono::duration<double>(Clock::now() - loop_start).count();
      const double eta = done_secs / static_cast<double>(state.step - first_step) *
                         static_cast<double>(t.max_steps - state.step);
      const double mean_loss = window_steps ? window_loss / static_cast<double>(window_steps) : std::nan("");
      const double mean_grad = window_steps ? window_grad / static_cast<double>(window_steps) : std::nan("");
      const double tok_s = static_cast<double>(window_tokens) / std::max(secs, 1e-9);
      const double acc = static_cast<double>(window_correct) / std::max<int64_t>(1, window_predicted);
      log::info("train", "step {}/{} | loss {:.4f} | acc {:.3f} | lr {:.2e} | gnorm {:.2f} | {:.0f} tok/s | ETA {}{}",
                state.step, t.max_steps, mean_loss, acc, lr, mean_grad, tok_s, format_duration(eta),
                window_skipped ? fmt::format(" | {} skipped", window_skipped) : std::string());
      metrics.write({{"step", state.step}, {"loss", mean_loss}, {"mlm_accuracy", acc}, {"lr", lr},
                     {"grad_norm", mean_grad}, {"tokens_per_s", tok_s}, {"tokens_seen", state.tokens_seen},
                     {"skipped", window_skipped}, {"elapsed_s", done_secs}});
      if (window_steps) {
        if (first_window) result.first_loss = mean_loss;
        first_window = false;
        result.final_loss = mean_loss;
      }
      window_loss = window_grad = 0.0;
      window_steps = window_tokens = window_correct = window_predicted = window_skipped = 0;
      window_start = Clock::now();
    }
    if (chief && t.eval_every > 0 && state.step % t.eval_every == 0 && state.step != t.max_steps) {
      const Eval e = evaluate(model, corpus.valid, *tokenizer, cfg, device, micro_batch);
      log::info("valid", "step {} | mlm loss {:.4f} | accuracy {:.3f} | perplexity {:.2f}", state.step, e.loss,
                e.accuracy, std::exp(e.loss));
      metrics.write({{"step", state.step}, {"split", "valid"}, {"loss", e.loss}, {"mlm_accuracy", e.accuracy},
                     {"perplexity", std::exp(e.loss)}});
    }
    if (t.save_every > 0 && state.step % t.save_every == 0 && state.step != t.max_steps) save();
  }

  dp.barrier();  // every rank done with collectives before rank 0 saves and the group closes
  const auto file = save();
  result.steps = state.step;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!chief) return result;
  const Eval e = evaluate(model, corpus.valid, *tokenizer, cfg, device, micro_batch);
  result.valid_loss = e.loss;
  result.valid_accuracy = e.accuracy;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  metrics.write({{"step", state.step}, {"split", "valid"}, {"loss", e.loss}, {"mlm_accuracy", e.accuracy},
                 {"perplexity", std::exp(e.loss)}});
  const int64_t rss = peak_rss_bytes(), dev_peak = peak_device_bytes(device);
  nlohmann::json summary = {{"steps", result.steps},
                            {"first_loss", result.first_loss},
                            {"final_loss", result.final_loss},
                            {"valid_loss", e.loss},
                            {"valid_accuracy", e.accuracy},
                            {"wall_s", result.seconds},
                            {"tokens_seen", state.tokens_seen},
                            {"nonfinite_skipped", state.nonfinite_total},
                            {"world_size", dp.world()},
                            {"precision", t.precision},
                            {"optimizer", t.optimizer},
                            {"peak_rss_bytes", rss},
                            {"peak_device_bytes", dev_peak},
                            {"checkpoint", file.filename().string()},
                            {"method", cfg.model.attention.method}};
  write_file_atomic(run_dir / "summary.json", summary.dump(2) + "\n");
  log::info("valid", "held-out MLM loss {:.4f}, accuracy {:.3f}, perplexity {:.2f}", e.loss, e.accuracy,
            std::exp(e.loss));
  log::info("run", "done in {} | {} tokens seen ({} ranks) | peak RSS {:.0f} MiB{} | {} steps skipped | checkpoint {}",
            format_duration(result.seconds), state.tokens_seen, dp.world(), static_cast<double>(rss) / (1 << 20),
            dev_peak >= 0 ? fmt::format(" | peak {} memory {:.0f} MiB", device.str(), static_cast<double>(dev_peak) / (1 << 20))
                          : std::string(),
            state.nonfinite_total, file.string());
  return result;
}

}  // namespace rpe

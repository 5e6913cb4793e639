// The pretraining loop.
#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "data/corpus.h"
#include "data/mlm_dataset.h"
#include "data/prepare.h"
#include "model/bert.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/optim.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Corpus {
  std::shared_ptr<PackedSequences> train, valid;
};

// Reads the corpus and packs it; held-out documents come from data.valid_files or, if
// none are given, from every (1/valid_fraction)-th document of the training files.
Corpus build_corpus(const DataOptions& d, const Tokenizer& tok) {
  const bool cross = d.packing == "full_sentences";
  if (!d.shards.empty()) {  // prepared by rpe-train prepare-data: memory-mapped shards
    const PreparedShards shards = open_prepared(d.shards, tok);
    Corpus c;
    c.train = std::make_shared<PackedSequences>(
        pack_streams(PreparedShards::streams(shards.train), tok.special(), d.max_seq_len, cross));
    c.valid = std::make_shared<PackedSequences>(
        pack_streams(PreparedShards::streams(shards.valid), tok.special(), d.max_seq_len, cross));
    return c;
  }
  std::vector<Document> train_docs, valid_docs;
  for (const auto& f : d.train_files) {
    auto docs = read_documents(f);
    train_docs.insert(train_docs.end(), std::make_move_iterator(docs.begin()), std::make_move_iterator(docs.end()));
  }
  for (const auto& f : d.valid_files) {
    auto docs = read_documents(f);
    valid_docs.insert(valid_docs.end(), std::make_move_iterator(docs.begin()), std::make_move_iterator(docs.end()));
  }
  if (d.valid_files.empty() && d.valid_fraction > 0.0 && train_docs.size() >= 2) {
    const auto every = std::max<size_t>(2, static_cast<size_t>(std::llround(1.0 / d.valid_fraction)));
    std::vector<Document> kept;
    for (size_t i = 0; i < train_docs.size(); ++i)
      (i % every == every - 1 ? valid_docs : kept).push_back(std::move(train_docs[i]));
    train_docs = std::move(kept);
  }
  Corpus c;
  c.train = std::make_shared<PackedSequences>(pack_documents(train_docs, tok, d.max_seq_len, cross));
  c.valid = std::make_shared<PackedSequences>(pack_documents(valid_docs, tok, d.max_seq_len, cross));
  return c;
}

struct StepStats {
  torch::Tensor loss;  // scalar, mean over selected tokens
  int64_t correct = 0, predicted = 0;
};

// MLM loss over the selected positions only: [B, L, D] -> gather N selected -> [N, V].
StepStats mlm_step(BertModel& model, const MlmBatch& batch, const torch::Device& device) {
  auto ids = batch.ids.to(device), labels = batch.labels.to(device), pad = batch.padding.to(device);
  auto hidden = model->encode(ids, pad);                                    // [B, L, D]
  auto flat_labels = labels.view({-1});                                     // [B*L]
  auto selected = flat_labels.ne(kIgnoreLabel).nonzero().view({-1});       // [N]
  auto h = hidden.view({-1, hidden.size(-1)}).index_select(0, selected);  // [N, D]
  auto target = flat_labels.index_select(0, selected);                      // [N]
  auto logits = model->mlm_logits(h);                                       // [N, V]
  StepStats s;
  s.loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat), target);
  s.correct = logits.argmax(-1).eq(target).sum().item<int64_t>();
  s.predicted = target.size(0);
  return s;
}

struct Eval {
  double loss = 0.0, accuracy = 0.0;
};

Eval evaluate(BertModel& model, const std::shared_ptr<PackedSequences>& valid, const Tokenizer& tok,
              const Config& cfg, const torch::Device& device) {
  if (!valid || valid->size() == 0) return {std::nan(""), std::nan("")};
  torch::NoGradGuard no_grad;
  model->eval();
  const int64_t micro_batch = cfg.train.batch_size / cfg.train.grad_accum;
  MlmLoader loader(valid, tok, MaskingOptions::from(cfg.data), micro_batch, static_cast<uint64_t>(cfg.train.seed) + 1,
                   /*shuffle=*/false);
  const int64_t batches = std::min(cfg.train.eval_batches, std::max<int64_t>(1, valid->size() / micro_batch));
  double loss_sum = 0.0;
  int64_t correct = 0, total = 0;
  for (int64_t b = 0; b < batches; ++b) {
    auto s = mlm_step(model, loader.next(), device);
    loss_sum += s.loss.item<double>() * static_cast<double>(s.predicted);
    correct += s.correct;
    total += s.predicted;
  }
  model->train();
  return {loss_sum / std::max<int64_t>(1, total), static_cast<double>(correct) / std::max<int64_t>(1, total)};
}

}  // namespace

PretrainResult pretrain(const Config& cfg_in, const fs::path& run_dir, bool resume) {
  Config cfg = cfg_in;
  const auto& t = cfg.train;
  const auto start = Clock::now();
  if (t.threads > 0) torch::set_num_threads(static_cast<int>(t.threads));
  torch::manual_seed(static_cast<uint64_t>(t.seed));
  const torch::Device device = resolve_device(t.device);
  log::info("run", "run folder {} | {} | device {}", run_dir.string(), describe_runtime(), device.str());

  // corpus -> tokenizer -> packed sequences
  auto tokenizer = make_tokenizer(cfg.data, run_dir / "tokenizer.model");
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = tokenizer->vocab_size();
  require(cfg.model.vocab_size >= tokenizer->vocab_size(),
          "model.vocab_size " + std::to_string(cfg.model.vocab_size) + " is smaller than the tokenizer's " +
              std::to_string(tokenizer->vocab_size()));
  const auto t0 = Clock::now();
  Corpus corpus = build_corpus(cfg.data, *tokenizer);
  log::info("data", "{} tokenizer, vocab {} | {} train sequences ({} tokens), {} held-out, length {} | {:.1f}s",
            tokenizer->kind(), tokenizer->vocab_size(), corpus.train->size(), corpus.train->real_tokens(),
            corpus.valid->size(), cfg.data.max_seq_len,
            std::chrono::duration<double>(Clock::now() - t0).count());
  write_file_atomic(run_dir / "config.yaml", to_yaml(cfg));
  const std::string config_yaml = to_yaml(cfg);

  // model + optimizer
  BertModel model(cfg.model);
  model->to(device);
  model->set_fused_attention(device.is_cuda() && cfg.model.attention.backend != "plain");
  int64_t total_params = 0;
  for (const auto& p : model->parameters()) total_params += p.numel();
  log::info("model", "{} layers, hidden {}, heads {} | position: {} | {:.2f}M parameters, {} in position method",
            cfg.model.layers, cfg.model.hidden, cfg.model.heads, model->position->describe(),
            static_cast<double>(total_params) / 1e6, model->position_parameter_count());
  auto optimizer = make_adamw(*model, t);

  TrainState state;
  if (resume) {
    if (auto ckpt = latest_checkpoint(run_dir)) {
      state = load_checkpoint(*ckpt, *model, optimizer.get()).state;
      log::info("train", "resumed from {} at step {}", ckpt->string(), state.step);
    } else {
      log::warn("train", "--resume: no checkpoint in {}, starting from step 0", run_dir.string());
    }
  }

  const int64_t micro_batch = t.batch_size / t.grad_accum;
  MlmLoader loader(corpus.train, *tokenizer, MaskingOptions::from(cfg.data), micro_batch,
                   static_cast<uint64_t>(t.seed), /*shuffle=*/true, /*rank=*/0, /*world=*/1, cfg.data.prefetch);
  loader.restore(state.cursor);
  MetricsWriter metrics(run_dir / "metrics.jsonl");
  model->train();

  PretrainResult result;
  result.run_dir = run_dir;
  double window_loss = 0.0, window_grad = 0.0;
  int64_t window_steps = 0, window_tokens = 0, window_correct = 0, window_predicted = 0;
  auto window_start = Clock::now();
  const auto loop_start = Clock::now();
  const int64_t first_step = state.step;
  bool first_window = true;

  while (state.step < t.max_steps) {
    const double lr = learning_rate(t, state.step);
    set_learning_rate(*optimizer, lr);
    optimizer->zero_grad();
    double step_loss = 0.0;
    for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
      MlmBatch batch = loader.next();
      auto s = mlm_step(model, batch, device);
      (s.loss / static_cast<double>(t.grad_accum)).backward();
      step_loss += s.loss.item<double>() / static_cast<double>(t.grad_accum);
      window_tokens += batch.tokens;
      window_correct += s.correct;
      window_predicted += s.predicted;
    }
    const double grad_norm =
        t.clip_norm > 0 ? torch::nn::utils::clip_grad_norm_(model->parameters(), t.clip_norm) : 0.0;
    optimizer->step();
    ++state.step;
    window_loss += step_loss;
    window_grad += grad_norm;
    ++window_steps;

    if (state.step % t.log_every == 0 || state.step == t.max_steps) {
      const double secs = std::chrono::duration<double>(Clock::now() - window_start).count();
      const double done_secs = std::chrono::duration<double>(Clock::now() - loop_start).count();
      const double eta = done_secs / static_cast<double>(state.step - first_step) *
                         static_cast<double>(t.max_steps - state.step);
      const double mean_loss = window_loss / static_cast<double>(window_steps);
      const double tok_s = static_cast<double>(window_tokens) / std::max(secs, 1e-9);
      const double acc = static_cast<double>(window_correct) / std::max<int64_t>(1, window_predicted);
      if (!std::isfinite(mean_loss)) throw UserError("training diverged: loss is " + std::to_string(mean_loss) +
                                                     " at step " + std::to_string(state.step) + " (lower train.lr?)");
      log::info("train", "step {}/{} | loss {:.4f} | acc {:.3f} | lr {:.2e} | gnorm {:.2f} | {:.0f} tok/s | ETA {}",
                state.step, t.max_steps, mean_loss, acc, lr, window_grad / static_cast<double>(window_steps), tok_s,
                format_duration(eta));
      metrics.write({{"step", state.step}, {"loss", mean_loss}, {"mlm_accuracy", acc}, {"lr", lr},
                     {"grad_norm", window_grad / static_cast<double>(window_steps)}, {"tokens_per_s", tok_s},
                     {"elapsed_s", done_secs}});
      if (first_window) result.first_loss = mean_loss;
      first_window = false;
      result.final_loss = mean_loss;
      window_loss = window_grad = 0.0;
      window_steps = window_tokens = window_correct = window_predicted = 0;
      window_start = Clock::now();
    }
    if (t.eval_every > 0 && state.step % t.eval_every == 0 && state.step != t.max_steps) {
      const Eval e = evaluate(model, corpus.valid, *tokenizer, cfg, device);
      log::info("valid", "step {} | mlm loss {:.4f} | accuracy {:.3f} | perplexity {:.2f}", state.step, e.loss,
                e.accuracy, std::exp(e.loss));
      metrics.write({{"step", state.step}, {"split", "valid"}, {"loss", e.loss}, {"mlm_accuracy", e.accuracy},
                     {"perplexity", std::exp(e.loss)}});
    }
    if (t.save_every > 0 && state.step % t.save_every == 0 && state.step != t.max_steps) {
      state.cursor = loader.cursor();
      save_checkpoint(run_dir, *model, optimizer.get(), state, config_yaml);
    }
  }

  state.cursor = loader.cursor();
  const auto file = save_checkpoint(run_dir, *model, optimizer.get(), state, config_yaml);
  const Eval e = evaluate(model, corpus.valid, *tokenizer, cfg, device);
  result.steps = state.step;
  result.valid_loss = e.loss;
  result.valid_accuracy = e.accuracy;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  metrics.write({{"step", state.step}, {"split", "valid"}, {"loss", e.loss}, {"mlm_accuracy", e.accuracy},
                 {"perplexity", std::exp(e.loss)}});
  nlohmann::json summary = {{"steps", result.steps},          {"first_loss", result.first_loss},
                            {"final_loss", result.final_loss}, {"valid_loss", e.loss},
                            {"valid_accuracy", e.accuracy},    {"wall_s", result.seconds},
                            {"checkpoint", file.filename().string()}, {"method", cfg.model.attention.method}};
  write_file_atomic(run_dir / "summary.json", summary.dump(2) + "\n");
  log::info("valid", "held-out MLM loss {:.4f}, accuracy {:.3f}, perplexity {:.2f}", e.loss, e.accuracy,
            std::exp(e.loss));
  log::info("run", "done in {} | checkpoint {}", format_duration(result.seconds), file.string());
  return result;
}

}  // namespace rpe

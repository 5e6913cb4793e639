// Config validation: every rule a read config must meet, each broken one reported as a
// one-line UserError naming the key and the file it came from (Config::fail).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/method_catalogue.h"
#include "config/model_size.h"
#include "util/errors.h"

namespace rpe {

namespace {

// A rule between two keys, reported at `key` (the one its message tells how to fix) with
// where `other` came from too: either may be the one to change. When `key` kept its default,
// or `other` came from a --set and `key` from a file, the message begins with `other`'s origin
// (the change that broke the rule) and says where both keys stand: where(key) of a default
// would name its section's line, blaming a file for a value it never set.
[[noreturn]] void fail_pair(const Config& cfg, const std::string& key, const std::string& other,
                            const std::string& message) {
  // Given where it is, or inside a section a --set replaced whole; else it kept its default.
  auto by_set = [&](const std::string& k) { return cfg.where(k).rfind("--set", 0) == 0; };
  auto given = [&](const std::string& k) { return cfg.origins.count(k) > 0 || by_set(k); };
  auto origin = [&](const std::string& k) {
    return k + (given(k) ? " from " + cfg.where(k) : std::string(" at its default"));
  };
  const bool other_leads = given(other) && (!given(key) || (by_set(other) && !by_set(key)));
  if (!other_leads) cfg.fail(key, message + " (" + origin(other) + ")");
  throw UserError(cfg.where(other) + ": " + key + ": " + message + " (" + origin(key) + ", " + origin(other) + ")");
}

// Plausibility caps on how long a run trains: far beyond any real run (BERT pretrains for 1M
// steps, fine-tuning for 2-4 epochs), so only a slip of the keyboard meets them.
constexpr double kMaxEpochs = 10000.0;
constexpr int64_t kMaxSteps = 1000000000;

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Optimizer and numerics keys: a bad value here otherwise surfaces as LibTorch's message
// (adam_beta1 = 2), a NaN loss blamed on the learning rate (layer_norm_eps = -1), or a
// silent 0.0 held-out loss (eval_batches = -5).
void validate_numbers(const Config& cfg) {
  auto finite_positive = [&](const char* path, double v) {
    if (!(std::isfinite(v) && v > 0.0)) cfg.fail(path, "must be a finite number > 0, got " + number_text(v));
  };
  auto beta = [&](const char* path, double v) {
    if (!(v >= 0.0 && v < 1.0)) cfg.fail(path, "must be in [0, 1), got " + number_text(v));
  };
  auto finite = [&](const char* path, double v) {
    if (!std::isfinite(v)) cfg.fail(path, "must be a finite number, got " + number_text(v));
  };
  const auto& t = cfg.train;
  finite_positive("train.lr", t.lr);
  beta("train.adam_beta1", t.adam_beta1);
  beta("train.adam_beta2", t.adam_beta2);
  finite_positive("train.adam_eps", t.adam_eps);
  finite("train.weight_decay", t.weight_decay);
  finite("train.clip_norm", t.clip_norm);
  finite_positive("train.dist_timeout_s", t.dist_timeout_s);
  // Converted to milliseconds and nanoseconds by c10d: a year is far beyond any use and safe.
  if (t.dist_timeout_s > 365.0 * 86400.0)
    cfg.fail("train.dist_timeout_s", "is implausibly large (" + number_text(t.dist_timeout_s) + " s > a year)");
  finite_positive("train.bucket_mb", t.bucket_mb);
  if (!(t.time_limit_min >= 0.0 && t.time_limit_min <= 365.0 * 1440.0))
    cfg.fail("train.time_limit_min", "must be in [0, 525600] minutes (0: no limit), got " + number_text(t.time_limit_min));
  if (t.eval_batches < 1) cfg.fail("train.eval_batches", "must be >= 1, got " + std::to_string(t.eval_batches));
  finite_positive("model.init_std", cfg.model.init_std);
  finite_positive("model.layer_norm_eps", cfg.model.layer_norm_eps);
  finite("model.attention.rope_base", cfg.model.attention.rope_base);
  finite_positive("finetune.epochs", cfg.finetune.epochs);
  // Papers fine-tune for 2 to a few dozen epochs; a billion (a typo, an extra 0s) would run for
  // ages, and a larger count's steps would not fit in an int64.
  if (cfg.finetune.epochs > kMaxEpochs)
    cfg.fail("finetune.epochs", "is implausibly large: must be in (0, " + number_text(kMaxEpochs) + "], got " +
                                    number_text(cfg.finetune.epochs));
  finite("finetune.null_threshold", cfg.finetune.null_threshold);
}

// run.name is one folder below run.root: no separators, not "." or "..", no control bytes.
void validate_run_name(const Config& cfg) {
  const std::string& n = cfg.run.name;
  if (n.empty() || n == "." || n == ".." || n.find('/') != std::string::npos)
    cfg.fail("run.name", "must be a plain folder name (non-empty, no '/', not . or ..), got '" + n + "'");
  for (unsigned char c : n)
    if (c < 0x20 || c == 0x7f) cfg.fail("run.name", "must not contain control characters");
  if (cfg.run.root.empty()) cfg.fail("run.root", "must not be empty");
}

// Upper bounds on sizes, then the parameter memory against this machine's.
void validate_sizes(const Config& cfg) {
  auto at_most = [&](const char* path, int64_t v, int64_t limit) {
    if (v > limit) cfg.fail(path, "is implausibly large (" + std::to_string(v) + " > " + std::to_string(limit) + ")");
  };
  const auto& m = cfg.model;
  at_most("model.hidden", m.hidden, int64_t{1} << 16);
  at_most("model.layers", m.layers, 1024);
  at_most("model.ffn", m.ffn, int64_t{1} << 20);
  at_most("model.max_position", m.max_position, int64_t{1} << 20);
  at_most("model.vocab_size", m.vocab_size, int64_t{1} << 24);
  at_most("model.type_vocab_size", m.type_vocab_size, int64_t{1} << 16);
  at_most("model.attention.max_relative", m.attention.max_relative, int64_t{1} << 20);
  at_most("model.attention.t5_buckets", m.attention.t5_buckets, int64_t{1} << 16);
  at_most("model.attention.position_buckets", m.attention.position_buckets, int64_t{1} << 16);
  at_most("data.tokenizer_vocab_size", cfg.data.tokenizer_vocab_size, int64_t{1} << 24);
  at_most("data.max_seq_len", cfg.data.max_seq_len, int64_t{1} << 20);
  at_most("data.shard_tokens", cfg.data.shard_tokens, int64_t{1} << 34);
  at_most("train.batch_size", cfg.train.batch_size, int64_t{1} << 24);
  at_most("train.max_steps", cfg.train.max_steps, kMaxSteps);
  at_most("train.warmup_steps", cfg.train.warmup_steps, kMaxSteps);
  // LibTorch starts that many threads (1000 took 25 s to start; 100000 never finished).
  at_most("train.threads", cfg.train.threads, 1024);
  at_most("finetune.max_seq_len", cfg.finetune.max_seq_len, int64_t{1} << 20);
  at_most("finetune.eval_batch_size", cfg.finetune.eval_batch_size, int64_t{1} << 24);
  at_most("finetune.pad_to_multiple", cfg.finetune.pad_to_multiple, int64_t{1} << 20);
  const std::string problem =
      model_memory_problem(m, cfg.data.tokenizer_vocab_size, "model.hidden/layers/ffn/max_position/vocab_size");
  if (!problem.empty()) cfg.fail("model", problem);
}

// The method's name and its own rules, from the registry's catalogue (empty in a program
// that links no model: then nothing is known to check).
void validate_method(const Config& cfg) {
  const auto& catalogue = method_catalogue();
  if (catalogue.empty()) return;
  const std::string& name = cfg.model.attention.method;
  const MethodFacts* facts = find_method_facts(name);
  auto valid = [&] {
    std::vector<std::string> names;
    for (const MethodFacts* m : catalogue) names.push_back(m->name);
    return join(names);
  };
  if (!facts) cfg.fail("model.attention.method", "unknown method '" + name + "' (valid: " + valid() + ")");
  if (facts->config_problem) {
    const MethodFacts::Problem problem = facts->config_problem(cfg.model);
    if (!problem.message.empty()) cfg.fail(problem.key, problem.message);
  }
  const std::string& pretrained = cfg.model.pretrained_method;
  if (!pretrained.empty() && !find_method_facts(pretrained))
    cfg.fail("model.pretrained_method", "unknown method '" + pretrained + "' (valid: " + valid() + ", or \"\")");
}

void positive(const Config& cfg, const char* path, int64_t v) {
  if (v <= 0) cfg.fail(path, "must be positive, got " + std::to_string(v));
}

void probability(const Config& cfg, const char* path, double v) {
  if (!(v >= 0.0 && v <= 1.0)) cfg.fail(path, "must be in [0, 1], got " + std::to_string(v));
}

// A dropout of 1 zeroes every output: the run would train and learn nothing.
void dropout_rate(const Config& cfg, const char* path, double v) {
  if (!(v >= 0.0 && v < 1.0)) cfg.fail(path, "must be in [0, 1), got " + std::to_string(v));
}

// Model sizes, dropouts and the attention section.
void validate_model(const Config& cfg) {
  const auto& m = cfg.model;
  positive(cfg, "model.hidden", m.hidden);
  positive(cfg, "model.layers", m.layers);
  positive(cfg, "model.heads", m.heads);
  positive(cfg, "model.ffn", m.ffn);
  positive(cfg, "model.max_position", m.max_position);
  positive(cfg, "model.type_vocab_size", m.type_vocab_size);
  if (m.vocab_size < 0) cfg.fail("model.vocab_size", "must be 0 (from the tokenizer) or positive");
  if (m.hidden % m.heads != 0)
    fail_pair(cfg, "model.heads", "model.hidden",
              "hidden (" + std::to_string(m.hidden) + ") is not divisible by heads (" + std::to_string(m.heads) + ")");
  dropout_rate(cfg, "model.dropout", m.dropout);
  dropout_rate(cfg, "model.attention_dropout", m.attention_dropout);

  const auto& a = m.attention;
  validate_method(cfg);
  if (a.max_relative < 0) cfg.fail("model.attention.max_relative", "must be >= 0 (0 = max_position - 1)");
  if (a.backend != "auto" && a.backend != "plain" && a.backend != "sdpa")
    cfg.fail("model.attention.backend", "must be auto, plain or sdpa, got '" + a.backend + "'");
  if (a.deberta_p2c != "paper" && a.deberta_p2c != "microsoft")
    cfg.fail("model.attention.deberta_p2c", "must be paper or microsoft, got '" + a.deberta_p2c + "'");
  if (!(a.rope_base > 1.0)) cfg.fail("model.attention.rope_base", "must be > 1");
}

void validate_data(const Config& cfg) {
  const auto& d = cfg.data;
  // data.train_files is required where a corpus is read (require_train_files), not here: a
  // fine-tuning config from random weights (--init none) reads none.
  // An empty name (`--set data.train_files=`) would surface later as ": file not found", naming nothing.
  for (const auto& [key, files] : {std::pair{"data.train_files", &d.train_files}, {"data.valid_files", &d.valid_files}})
    for (size_t i = 0; i < files->size(); ++i)
      if ((*files)[i].empty()) cfg.fail(key, "entry " + std::to_string(i + 1) + " is an empty file name");
  if (d.tokenizer != "sentencepiece" && d.tokenizer != "wordpiece")
    cfg.fail("data.tokenizer", "must be sentencepiece or wordpiece, got '" + d.tokenizer + "'");
  if (d.max_seq_len < 8) cfg.fail("data.max_seq_len", "must be at least 8");
  if (d.document_format != "blank_line" && d.document_format != "line")
    cfg.fail("data.document_format", "must be blank_line or line, got '" + d.document_format + "'");
  if (d.packing != "full_sentences" && d.packing != "doc_sentences" && d.packing != "contiguous")
    cfg.fail("data.packing", "must be full_sentences, doc_sentences or contiguous, got '" + d.packing + "'");
  if (!(d.mask_prob > 0.0 && d.mask_prob < 1.0)) cfg.fail("data.mask_prob", "must be in (0, 1)");
  probability(cfg, "data.mask_token_prob", d.mask_token_prob);
  probability(cfg, "data.random_token_prob", d.random_token_prob);
  if (d.mask_token_prob + d.random_token_prob > 1.0 + 1e-9)
    fail_pair(cfg, "data.random_token_prob", "data.mask_token_prob",
              "mask_token_prob + random_token_prob must not exceed 1");
  if (!(d.valid_fraction >= 0.0 && d.valid_fraction < 0.5)) cfg.fail("data.valid_fraction", "must be in [0, 0.5)");
  if (d.tokenizer_vocab_size < 16) cfg.fail("data.tokenizer_vocab_size", "must be at least 16");
  // A wordpiece tokenizer's vocab.txt is checked where the tokenizer is built
  // (make_tokenizer): a checkpoint's embedded config may legitimately carry none.
  if (d.shard_tokens < 1024) cfg.fail("data.shard_tokens", "must be at least 1024");
  if (d.prefetch < 0 || d.prefetch > 64) cfg.fail("data.prefetch", "must be in [0, 64]");
}

// Batch shape, learning-rate schedule and intervals; init.new_position_params.
void validate_train_loop(const Config& cfg) {
  const auto& t = cfg.train;
  positive(cfg, "train.batch_size", t.batch_size);
  positive(cfg, "train.grad_accum", t.grad_accum);
  positive(cfg, "train.max_steps", t.max_steps);
  positive(cfg, "train.log_every", t.log_every);
  if (t.batch_size % t.grad_accum != 0)
    fail_pair(cfg, "train.grad_accum", "train.batch_size",
              "batch_size (" + std::to_string(t.batch_size) + ") is not divisible by grad_accum");
  if (!(t.lr > 0.0)) cfg.fail("train.lr", "must be positive");
  if (t.warmup_steps < 0) cfg.fail("train.warmup_steps", "must be >= 0");
  if (t.weight_decay < 0.0) cfg.fail("train.weight_decay", "must be >= 0");
  if (t.clip_norm < 0.0) cfg.fail("train.clip_norm", "must be >= 0 (0 = off)");
  // Each key checked on its own: an error names the key (and the file or --set) that is wrong.
  if (t.eval_every < 0)
    cfg.fail("train.eval_every", "must be >= 0 (0 = only at the end), got " + std::to_string(t.eval_every));
  if (t.save_every < 0)
    cfg.fail("train.save_every", "must be >= 0 (0 = only at the end), got " + std::to_string(t.save_every));
  if (t.threads < 0) cfg.fail("train.threads", "must be >= 0 (0 = LibTorch's default)");
  if (cfg.init.new_position_params != "identity" && cfg.init.new_position_params != "random")
    cfg.fail("init.new_position_params", "must be identity or random, got '" + cfg.init.new_position_params + "'");
}

void validate_finetune(const Config& cfg) {
  const auto& f = cfg.finetune;
  const auto& tasks = finetune_task_names();
  if (std::find(tasks.begin(), tasks.end(), f.task) == tasks.end())
    cfg.fail("finetune.task", "unknown task '" + f.task + "' (valid: " + join(tasks) + ")");
  if (f.max_seq_len < 16) cfg.fail("finetune.max_seq_len", "must be at least 16");
  positive(cfg, "finetune.doc_stride", f.doc_stride);
  positive(cfg, "finetune.max_query_len", f.max_query_len);
  positive(cfg, "finetune.n_best", f.n_best);
  positive(cfg, "finetune.max_answer_len", f.max_answer_len);
  positive(cfg, "finetune.eval_batch_size", f.eval_batch_size);
  positive(cfg, "finetune.pad_to_multiple", f.pad_to_multiple);
  if (f.task == "squad" && f.max_query_len + 8 > f.max_seq_len)
    fail_pair(cfg, "finetune.max_query_len", "finetune.max_seq_len",
              "leaves no room for context within finetune.max_seq_len");
  if (!(f.epochs > 0.0)) cfg.fail("finetune.epochs", "must be positive");
  if (f.select != "final" && f.select != "best")
    cfg.fail("finetune.select", "must be final (the paper's protocol) or best (the best dev evaluation), got '" +
                                    f.select + "'");
  if (f.eval_every < 0) cfg.fail("finetune.eval_every", "must be >= 0 (0: evaluate at each epoch's end only)");
  if (f.early_stopping < 0) cfg.fail("finetune.early_stopping", "must be >= 0 (0: never stop early)");
  if (f.save_every < 0) cfg.fail("finetune.save_every", "must be >= 0 (0: a checkpoint only when the run is stopped)");
  if (f.early_stopping > 0 && f.select != "best")
    fail_pair(cfg, "finetune.early_stopping", "finetune.select",
              "needs finetune.select: best (the paper's protocol trains fixed epochs)");
  if (f.select == "best" && !f.eval_each_epoch && f.eval_every == 0)
    cfg.fail("finetune.select", "best needs dev evaluations to choose among: set finetune.eval_each_epoch: true or "
                                "finetune.eval_every > 0");
  if (!(f.warmup_fraction >= 0.0 && f.warmup_fraction < 1.0)) cfg.fail("finetune.warmup_fraction", "must be in [0, 1)");
  if (f.max_train_examples < 0) cfg.fail("finetune.max_train_examples", "must be >= 0 (0 = all)");
  if (f.max_eval_examples < 0) cfg.fail("finetune.max_eval_examples", "must be >= 0 (0 = all)");
}

// Optimizer, schedule, precision and distributed settings.
void validate_train_settings(const Config& cfg) {
  const auto& t = cfg.train;
  positive(cfg, "train.keep_checkpoints", t.keep_checkpoints);
  positive(cfg, "train.max_nonfinite_in_a_row", t.max_nonfinite_in_a_row);
  if (t.optimizer != "adamw" && t.optimizer != "lamb")
    cfg.fail("train.optimizer", "must be adamw or lamb, got '" + t.optimizer + "'");
  if (t.schedule != "linear" && t.schedule != "cosine")
    cfg.fail("train.schedule", "must be linear or cosine, got '" + t.schedule + "'");
  probability(cfg, "train.min_lr_ratio", t.min_lr_ratio);
  if (t.precision != "fp32" && t.precision != "bf16" && t.precision != "fp16")
    cfg.fail("train.precision", "must be fp32, bf16 or fp16, got '" + t.precision + "'");
  if (!(t.fp16_init_scale > 0.0 && t.fp16_init_scale <= 1e38))  // a float32 scale
    cfg.fail("train.fp16_init_scale", "must be in (0, 1e38] (2^16 = 65536 is the usual start)");
  positive(cfg, "train.fp16_scale_window", t.fp16_scale_window);
  if (t.fp16_scale_window > std::numeric_limits<int32_t>::max())  // ATen's streak is an int32
    cfg.fail("train.fp16_scale_window", "must be at most 2147483647");
  if (!(t.min_loss_scale > 0.0 && t.min_loss_scale <= t.fp16_init_scale))
    fail_pair(cfg, "train.min_loss_scale", "train.fp16_init_scale",
              "must be positive and at most train.fp16_init_scale");
  if (!(t.dist_timeout_s > 0.0)) cfg.fail("train.dist_timeout_s", "must be positive");
  if (!(t.bucket_mb > 0.0 && t.bucket_mb <= 1048576.0))  // MiB, as a byte count in an int64 (1 TiB at most)
    cfg.fail("train.bucket_mb", "must be in (0, 1048576] MiB (25 is the usual)");
  if (t.cuda_graphs && t.device == "cpu") fail_pair(cfg, "train.cuda_graphs", "train.device", "needs a CUDA device");
  if (t.activation_checkpointing != "none" && t.activation_checkpointing != "attention" &&
      t.activation_checkpointing != "layers" && t.activation_checkpointing != "bias")
    cfg.fail("train.activation_checkpointing",
             "must be none, attention, layers or bias, got '" + t.activation_checkpointing + "'");
  if (t.cuda_graphs && t.activation_checkpointing != "none")
    fail_pair(cfg, "train.cuda_graphs", "train.activation_checkpointing",
              "cannot be on together (recomputing in backward is not done inside a captured graph)");
  if (t.cuda_graphs && t.precision == "fp16")
    fail_pair(cfg, "train.cuda_graphs", "train.precision", "needs precision fp32 or bf16 (not fp16's loss scaling)");
}

}  // namespace

const std::vector<std::string>& finetune_task_names() {
  static const std::vector<std::string> tasks = {"squad", "cola", "sst2", "mrpc", "stsb",
                                                 "qqp",   "mnli", "qnli", "rte",  "wnli"};
  return tasks;
}

void validate(const Config& cfg) {
  // In this order: the first problem found is the one reported.
  validate_model(cfg);
  validate_data(cfg);
  validate_train_loop(cfg);
  validate_finetune(cfg);
  validate_train_settings(cfg);
  validate_run_name(cfg);
  validate_numbers(cfg);
  validate_sizes(cfg);
}

void require_train_files(const Config& cfg, const std::string& what) {
  if (cfg.data.train_files.empty()) cfg.fail("data.train_files", "missing required key (" + what + " reads the training files)");
}

}  // namespace rpe

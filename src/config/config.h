// Typed experiment configuration. YAML is the source of truth (see config.cpp): each
// section is a small struct whose visit() lists its fields once, with a one-line comment;
// that single list drives reading (strict: unknown keys and wrong types are errors),
// --set overrides and dumping. Defaults below are BERT-base (Devlin et al. 2019) and
// the paper's choices (Huang et al. 2020); experiment files hold only differences.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace rpe {

// Marks a field that must be given by some file in the extends chain.
inline constexpr bool kRequired = true;

struct AttentionOptions {
  std::string method = "absolute";  // position method, see registry (absolute, m4, ...)
  int64_t max_relative = 0;         // clipping distance k of relative methods; 0 = max_position - 1
  bool share_across_heads = false;  // one relative table per layer instead of one per head
  bool shaw_values = false;         // Shaw et al.'s value term a^V_ij
  bool xl_uv_bias = true;           // Transformer-XL's u, v query biases (a pair per layer, as XLNet)
  int64_t t5_buckets = 32;          // T5 relative-position buckets
  int64_t t5_max_distance = 128;    // T5 distance where the log buckets end
  double rope_base = 10000.0;       // RoPE frequency base
  int64_t position_buckets = 0;     // DeBERTa v2's log buckets of distance; 0 = clipped distances
  std::string deberta_p2c = "paper";  // DeBERTa's p2c reads P^Q at d(j,i) (paper) or d(i,j) (microsoft's code)
  bool add_absolute = false;        // also add learned absolute embeddings to the input
  std::string backend = "auto";     // plain | sdpa | auto (sdpa on CUDA where the method allows)

  template <class V> void visit(V& v) {
    v("method", method, kRequired);
    v("max_relative", max_relative);
    v("share_across_heads", share_across_heads);
    v("shaw_values", shaw_values);
    v("xl_uv_bias", xl_uv_bias);
    v("t5_buckets", t5_buckets);
    v("t5_max_distance", t5_max_distance);
    v("rope_base", rope_base);
    v("position_buckets", position_buckets);
    v("deberta_p2c", deberta_p2c);
    v("add_absolute", add_absolute);
    v("backend", backend);
  }
};

struct ModelOptions {
  int64_t vocab_size = 0;          // 0 = take it from the tokenizer
  int64_t hidden = 768;            // model width D
  int64_t layers = 12;             // encoder layers
  int64_t heads = 12;              // attention heads H (head size d = D / H)
  int64_t ffn = 3072;              // feed-forward width
  int64_t max_position = 512;      // n: absolute table size, relative tables' default reach
  int64_t type_vocab_size = 2;     // segment embeddings (kept for BERT checkpoint compatibility)
  double dropout = 0.1;            // hidden dropout
  double attention_dropout = 0.1;  // dropout on attention probabilities
  double layer_norm_eps = 1e-12;   // BERT's LayerNorm epsilon
  double init_std = 0.02;          // N(0, init_std) initialisation, as BERT
  bool pre_ln = false;             // pre-LayerNorm blocks and a final LayerNorm instead of BERT's post-LN
  AttentionOptions attention;
  // The method these weights were pretrained with, where swap-method gave them attention.method
  // without pretraining (the paper's section 4.4, Table 5); "" = attention.method's own.
  std::string pretrained_method;

  template <class V> void visit(V& v) {
    v("vocab_size", vocab_size);
    v("hidden", hidden, kRequired);
    v("layers", layers, kRequired);
    v("heads", heads, kRequired);
    v("ffn", ffn);
    v("max_position", max_position);
    v("type_vocab_size", type_vocab_size);
    v("dropout", dropout);
    v("attention_dropout", attention_dropout);
    v("layer_norm_eps", layer_norm_eps);
    v("init_std", init_std);
    v("pre_ln", pre_ln);
    v("attention", attention);
    v("pretrained_method", pretrained_method);
  }
  // The method these weights learned in pretraining (attention.method unless swapped in).
  const std::string& weights_pretrained_with() const {
    return pretrained_method.empty() ? attention.method : pretrained_method;
  }
};

struct DataOptions {
  std::vector<std::string> train_files;  // text files (.gz too); documents per document_format
  std::vector<std::string> valid_files;  // held-out text; empty = split valid_fraction off
  double valid_fraction = 0.01;          // documents held out when valid_files is empty
  std::string document_format = "blank_line";  // blank_line (blank line between documents) | line (one per line)
  std::string tokenizer = "sentencepiece";  // sentencepiece | wordpiece
  std::string tokenizer_model;           // .model (sentencepiece) or vocab.txt (wordpiece); empty = train one
  int64_t tokenizer_vocab_size = 8000;   // vocabulary size when training a sentencepiece model
  bool lowercase = true;                 // lower-case text before tokenizing
  int64_t max_seq_len = 128;             // tokens per sequence including [CLS] and [SEP]
  std::string packing = "full_sentences";  // full_sentences (cross documents) | doc_sentences | contiguous
  double mask_prob = 0.15;               // fraction of tokens selected for prediction
  bool whole_word = true;                // select whole words (false = single tokens)
  double mask_token_prob = 0.8;          // of the selected: replaced by [MASK]
  double random_token_prob = 0.1;        // of the selected: replaced by a random token
  std::string shards;                    // folder of prepare-data shards to train from; empty = read text
  int64_t shard_tokens = 33554432;       // prepare-data: tokens per shard file (2^25: 64 MB of uint16 ids)
  int64_t prefetch = 2;                  // batches the loader's background thread prepares ahead; 0 = none

  template <class V> void visit(V& v) {
    v("train_files", train_files);  // required where read: require_train_files
    v("valid_files", valid_files);
    v("valid_fraction", valid_fraction);
    v("document_format", document_format);
    v("tokenizer", tokenizer);
    v("tokenizer_model", tokenizer_model);
    v("tokenizer_vocab_size", tokenizer_vocab_size);
    v("lowercase", lowercase);
    v("max_seq_len", max_seq_len);
    v("packing", packing);
    v("mask_prob", mask_prob);
    v("whole_word", whole_word);
    v("mask_token_prob", mask_token_prob);
    v("random_token_prob", random_token_prob);
    v("shards", shards);
    v("shard_tokens", shard_tokens);
    v("prefetch", prefetch);
  }
};

struct TrainOptions {
  int64_t batch_size = 160;       // sequences per optimizer step (all ranks together)
  int64_t grad_accum = 1;         // micro-batches per optimizer step
  int64_t max_steps = 1000;       // optimizer steps
  double lr = 1e-4;               // peak learning rate
  int64_t warmup_steps = 100;     // linear warmup, then `schedule` decay
  double weight_decay = 0.01;     // AdamW/LAMB decay (not on biases and LayerNorm)
  // Also decay the position methods' matrices and tables (the paper's HF recipe); false: they
  // are exempt, as every run before the key was (docs/training.md, train/optim.h).
  bool decay_position_params = false;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-6;
  double clip_norm = 1.0;         // global gradient-norm clipping; 0 = off
  int64_t seed = 1234;            // model init, data order and masking
  int64_t log_every = 10;         // steps between progress lines / metrics.jsonl rows
  int64_t eval_every = 0;         // steps between held-out evaluations; 0 = only at the end
  int64_t eval_batches = 20;      // held-out evaluation: this many x batch_size / grad_accum sequences
  int64_t save_every = 0;         // steps between checkpoints; 0 = only at the end
  int64_t keep_checkpoints = 3;   // newest checkpoints kept in <run>/checkpoints
  std::string optimizer = "adamw";  // adamw | lamb (You et al. 2019, large-batch BERT)
  std::string schedule = "linear";  // linear | cosine decay after the linear warmup
  double min_lr_ratio = 0.0;      // the decay ends at lr * min_lr_ratio
  std::string precision = "fp32";   // fp32 | bf16 | fp16 (autocast; master weights stay fp32)
  double fp16_init_scale = 65536.0;  // fp16: first loss scale (2^16, as torch.amp.GradScaler)
  int64_t fp16_scale_window = 2000;  // fp16: overflow-free steps before the loss scale doubles
  double min_loss_scale = 1e-4;      // fp16: stop when gradient overflows push the scale below this
  int64_t max_nonfinite_in_a_row = 5;  // stop (checkpoint kept) after this many skipped steps in a row
  double dist_timeout_s = 300.0;  // multi-process: a collective waiting longer than this fails
  // Pretraining: once the process has run this long, stop as on SIGTERM (after a step, with a
  // checkpoint; exit code 75, `--resume` continues); 0 = no limit. A job's time limit less the
  // time of a step and a checkpoint.
  double time_limit_min = 0.0;
  double bucket_mb = 25.0;        // multi-process: gradient all-reduce bucket size in MiB
  std::string device = "auto";    // auto | cpu | cuda | cuda:N (cuda:LOCAL_RANK under torchrun)
  int64_t threads = 0;            // CPU intra-op threads; 0 = LibTorch's default
  bool cuda_graphs = false;       // pretraining on one GPU: each micro-batch's forward + backward replayed as a CUDA graph
  std::string activation_checkpointing = "none";  // none | attention | layers | bias: recomputed in backward (less memory, more compute)

  template <class V> void visit(V& v) {
    v("batch_size", batch_size);
    v("grad_accum", grad_accum);
    v("max_steps", max_steps);
    v("lr", lr);
    v("warmup_steps", warmup_steps);
    v("weight_decay", weight_decay);
    v("decay_position_params", decay_position_params);
    v("adam_beta1", adam_beta1);
    v("adam_beta2", adam_beta2);
    v("adam_eps", adam_eps);
    v("clip_norm", clip_norm);
    v("seed", seed);
    v("log_every", log_every);
    v("eval_every", eval_every);
    v("eval_batches", eval_batches);
    v("save_every", save_every);
    v("keep_checkpoints", keep_checkpoints);
    v("optimizer", optimizer);
    v("schedule", schedule);
    v("min_lr_ratio", min_lr_ratio);
    v("precision", precision);
    v("fp16_init_scale", fp16_init_scale);
    v("fp16_scale_window", fp16_scale_window);
    v("min_loss_scale", min_loss_scale);
    v("max_nonfinite_in_a_row", max_nonfinite_in_a_row);
    v("dist_timeout_s", dist_timeout_s);
    v("time_limit_min", time_limit_min);
    v("bucket_mb", bucket_mb);
    v("device", device);
    v("threads", threads);
    v("cuda_graphs", cuda_graphs);
    v("activation_checkpointing", activation_checkpointing);
  }
};

// Fine-tuning (rpe-train finetune): task, files and the SQuAD/GLUE feature settings.
// The model and tokenizer come from the pretrained run (--init); train.* gives the
// optimizer settings (batch 32, lr 3e-5 in the paper), these keys the rest.
struct FinetuneOptions {
  std::string task = "squad";         // squad | cola | sst2 | mrpc | stsb | qqp | mnli | qnli | rte | wnli
  bool squad_v2 = false;              // SQuAD 2.0: unanswerable questions, null-score threshold
  std::string train_file;             // SQuAD train JSON (GLUE: empty = <data_dir>/train.tsv)
  std::string dev_file;               // SQuAD dev JSON (GLUE: empty = <data_dir>/dev.tsv, MNLI both dev sets)
  std::string data_dir;               // GLUE task folder; empty = <glue_dir>/<task's folder, e.g. SST-2>
  std::string glue_dir;               // GLUE root in the standard layout (CoLA/, SST-2/, ...)
  int64_t max_seq_len = 384;          // tokens per window incl. [CLS]/[SEP] (may exceed model.max_position for relative methods)
  int64_t doc_stride = 128;           // SQuAD: tokens between the starts of consecutive context windows
  int64_t max_query_len = 64;         // SQuAD: question tokens kept
  int64_t n_best = 20;                // SQuAD: start/end candidates per window
  int64_t max_answer_len = 30;        // SQuAD: longest answer in tokens
  double null_threshold = 0.0;        // SQuAD 2.0: predict "" when null score - best span score > this
  double epochs = 2.0;                // passes over the training features
  double warmup_fraction = 0.1;       // linear warmup over this fraction of the steps
  bool token_types = true;            // BERT's segment ids on pairs (0: question/sentence A, 1: context/B)
  int64_t eval_batch_size = 64;       // windows per forward pass at evaluation
  int64_t pad_to_multiple = 8;        // batches pad to the longest sequence, rounded up to this (1: no rounding)
  int64_t max_train_examples = 0;     // use only the first N training examples; 0 = all
  int64_t max_eval_examples = 0;      // evaluate on the first N dev examples; 0 = all
  std::string results_file = "results/results.jsonl";  // every evaluation appends one JSON line here
  // Which model a seed keeps in seed<N>/model/ and reports: "final" (the paper's protocol: fixed
  // epochs, the last weights) or "best" (the best dev score among the evaluations below).
  std::string select = "final";
  bool eval_each_epoch = true;   // evaluate on dev at each epoch's end (false: only the final evaluation and eval_every)
  int64_t eval_every = 0;        // also evaluate on dev every N steps (0: only at each epoch's end)
  int64_t early_stopping = 0;    // select: best: stop after N evaluations without improvement (0: never)
  // Checkpoints of a seed in training (seed<N>/checkpoints/, for `finetune --resume`) every N
  // steps; 0: only when a signal or train.time_limit_min stops the run. Removed when the seed ends.
  int64_t save_every = 0;

  template <class V> void visit(V& v) {
    v("task", task);
    v("squad_v2", squad_v2);
    v("train_file", train_file);
    v("dev_file", dev_file);
    v("data_dir", data_dir);
    v("glue_dir", glue_dir);
    v("max_seq_len", max_seq_len);
    v("doc_stride", doc_stride);
    v("max_query_len", max_query_len);
    v("n_best", n_best);
    v("max_answer_len", max_answer_len);
    v("null_threshold", null_threshold);
    v("epochs", epochs);
    v("warmup_fraction", warmup_fraction);
    v("token_types", token_types);
    v("eval_batch_size", eval_batch_size);
    v("pad_to_multiple", pad_to_multiple);
    v("max_train_examples", max_train_examples);
    v("max_eval_examples", max_eval_examples);
    v("results_file", results_file);
    v("select", select);
    v("eval_each_epoch", eval_each_epoch);
    v("eval_every", eval_every);
    v("early_stopping", early_stopping);
    v("save_every", save_every);
  }
};

struct RunOptions {
  std::string name = "run";  // run name; the folder is <root>/<name>
  std::string root = "runs";  // where run folders go

  template <class V> void visit(V& v) {
    v("name", name);
    v("root", root);
  }
};

// Starting weights (fine-tuning, method swap of the paper's section 4.4; interop/method_swap.h).
// Whether a loaded absolute table is kept follows the model: it stays when the method is
// absolute or model.attention.add_absolute is true, and is dropped otherwise.
struct InitOptions {
  std::string checkpoint;                         // start from this checkpoint's weights; "" = random init
  std::string new_position_params = "identity";  // identity: new position tables start neutral | random

  template <class V> void visit(V& v) {
    v("checkpoint", checkpoint);
    v("new_position_params", new_position_params);
  }
};

struct Config {
  ModelOptions model;
  DataOptions data;
  TrainOptions train;
  RunOptions run;
  InitOptions init;
  FinetuneOptions finetune;

  // Where each key came from ("configs/x.yaml:12", "--set a.b=c"), for error messages; a key
  // with no entry kept its default (or sits in a section a --set replaced whole).
  std::map<std::string, std::string> origins;

  template <class V> void visit(V& v) {
    v("model", model);
    v("data", data);
    v("train", train);
    v("run", run);
    v("init", init);
    v("finetune", finetune);
  }

  // "file:line" of a key path such as "model.hidden" (or its nearest known parent).
  std::string where(const std::string& key_path) const;
  // UserError "<where>: <key_path>: <message>".
  [[noreturn]] void fail(const std::string& key_path, const std::string& message) const;
};

// Loads `file` (following `extends:`), applies `overrides` ("a.b.c=value"), reads it
// strictly into a Config and validates it. Every problem is a one-line UserError.
Config load_config(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});

// Loads `file` on top of `base_yaml` (a pretrained run's config): the base keeps only its
// `keep_sections` (model, data) and its `keep_keys` ("train.precision": fine-tuning trains in the
// pretraining's precision unless told otherwise), the file and `overrides` then win as usual.
Config load_config_over(const std::string& base_yaml, const std::string& base_name,
                        const std::vector<std::string>& keep_sections, const std::filesystem::path& file,
                        const std::vector<std::string>& overrides = {}, const std::vector<std::string>& keep_keys = {});

// Whether the --set `assignment` ("a.b=value") gives `key_path` ("a.b.c") a value: by naming it
// or a key below it, or by a mapping over one of its sections that holds it ("a={b: {c: 1}}").
// Malformed ones: false (load_config reports them).
bool assignment_sets(const std::string& assignment, const std::string& key_path);

// Same from YAML text (e.g. the config embedded in a checkpoint); `name` is used in errors.
Config config_from_yaml(const std::string& yaml_text, const std::string& name);

// The resolved config as YAML (written into run folders and checkpoints); numbers as the
// shortest text that reads back as the same double (lr: 0.0005).
std::string to_yaml(const Config& cfg);

// The same, a key path a line ("model.attention.method: m4", lists in flow style): what
// scripts compare and grep. Numbers keep 17 significant digits (the reproduction scripts'
// stamps of existing runs hold them so).
std::string to_flat_text(const Config& cfg);

// The keys of to_flat_text whose values differ, each as "key: before -> after" ("(none)" for a
// key one side lacks), in key order; numbers written as to_yaml writes them.
std::vector<std::string> config_differences(const Config& before, const Config& after);

// data.train_files must name files where `what` ("pretraining", "train-tokenizer") reads them:
// a UserError naming the key otherwise. (validate() leaves it out: fine-tuning reads none.)
void require_train_files(const Config& cfg, const std::string& what);

// Semantic checks (heads divide hidden, method exists, ranges). Called by load_config.
void validate(const Config& cfg);

// The values finetune.task accepts: squad, then the GLUE tasks.
const std::vector<std::string>& finetune_task_names();

}  // namespace rpe

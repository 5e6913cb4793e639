// Typed config reading, dumping and validation, driven by each section's visit().
#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <type_traits>

#include "config/config_names.h"
#include "config/method_catalogue.h"
#include "config/model_size.h"
#include "config/yaml_tree.h"
#include "util/errors.h"

namespace rpe {

namespace {
using config_detail::YamlTree;

template <class T> const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else return "a list";
}

// Reads a YAML map into a section, strictly.
class Reader {
 public:
  Reader(const YAML::Node& node, std::string prefix, const Config& cfg)
      : node_(node), prefix_(std::move(prefix)), cfg_(cfg) {}

  template <class T> void operator()(const char* key, T& field, bool required = false) {
    seen_.insert(key);
    const std::string path = prefix_.empty() ? key : prefix_ + "." + key;
    const YAML::Node found = node_[key];
    constexpr bool is_section = requires { field.template visit<Reader>(std::declval<Reader&>()); };
    const bool missing = !found || found.IsNull();
    if (missing) {
      if (required) cfg_.fail(path, "missing required key");
      if constexpr (!is_section) return;
    }
    // An absent section is read as an empty one, so its own required keys are still checked.
    // (yaml-cpp's Node::operator= writes through the handle, hence a second node.)
    const YAML::Node empty(YAML::NodeType::Map);
    const YAML::Node& value = missing ? empty : found;
    if constexpr (is_section) {
      if (!value.IsMap()) cfg_.fail(path, "expected a mapping of keys");
      Reader sub(value, path, cfg_);
      field.visit(sub);
      sub.reject_unknown();
    } else {
      read_scalar(path, value, field);
    }
  }

  // Every key in the YAML map must have been visited.
  void reject_unknown() const {
    std::vector<std::string> valid(seen_.begin(), seen_.end());
    for (const auto& kv : node_) {
      const std::string key = kv.first.Scalar();
      if (!seen_.count(key)) {
        const std::string path = prefix_.empty() ? key : prefix_ + "." + key;
        cfg_.fail(path, "unknown key (valid keys here: " + join(valid) + ")");
      }
    }
  }

 private:
  template <class T> void read_scalar(const std::string& path, const YAML::Node& value, T& field) {
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      field.clear();
      if (value.IsScalar()) {  // a single file name is accepted for a list
        field.push_back(value.Scalar());
        return;
      }
      if (!value.IsSequence()) cfg_.fail(path, "expected a list of strings");
      for (const auto& item : value) {
        if (!item.IsScalar()) cfg_.fail(path, "expected a list of strings");
        field.push_back(item.Scalar());
      }
    } else {
      if (!value.IsScalar()) cfg_.fail(path, std::string("expected ") + type_name<T>());
      const std::string text = value.Scalar();
      T parsed{};
      bool ok = YAML::convert<T>::decode(value, parsed);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        // yaml-cpp happily truncates "1.5" to 1; integers must look like integers.
        ok = ok && text.find_first_of(".eE") == std::string::npos;
      }
      if (!ok) cfg_.fail(path, std::string("expected ") + type_name<T>() + ", got '" + text + "'");
      field = parsed;
    }
  }

  const YAML::Node& node_;
  std::string prefix_;
  const Config& cfg_;
  std::set<std::string> seen_;
};

// Emits a section as YAML, in declaration order.
class Writer {
 public:
  explicit Writer(YAML::Emitter& out) : out_(out) {}
  template <class T> void operator()(const char* key, T& field, bool = false) {
    out_ << YAML::Key << key << YAML::Value;
    if constexpr (requires { field.template visit<Writer>(std::declval<Writer&>()); }) {
      out_ << YAML::BeginMap;
      field.visit(*this);
      out_ << YAML::EndMap;
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      out_ << YAML::Flow << field;
    } else if constexpr (std::is_floating_point_v<T>) {
      out_ << YAML::Precision(17) << field;
    } else {
      out_ << field;
    }
  }

 private:
  YAML::Emitter& out_;
};

// A key written with no value reads as "missing" and takes its default; for names that
// would silently become another name (run.name: -> "run") that is an error.
void reject_empty_names(const YamlTree& tree, const Config& cfg) {
  const YAML::Node run = tree.root["run"];
  if (!run || !run.IsMap()) return;
  for (const char* key : {"name", "root"}) {
    const YAML::Node v = run[key];
    if (v && v.IsNull()) cfg.fail(std::string("run.") + key, "is empty (give a folder name or remove the key)");
  }
}

Config read_tree(const YamlTree& tree) {
  Config cfg;
  cfg.origins = tree.origins;
  reject_empty_names(tree, cfg);
  Reader reader(tree.root, "", cfg);
  cfg.visit(reader);
  reader.reject_unknown();
  // The paper's names (method4) are read as the registry's (m4): runs, tables and
  // checkpoints carry one spelling.
  if (const MethodFacts* m = find_method_facts(cfg.model.attention.method)) cfg.model.attention.method = m->name;
  validate(cfg);
  return cfg;
}

}  // namespace

std::string Config::where(const std::string& key_path) const {
  std::string path = key_path;
  while (!path.empty()) {
    auto it = origins.find(path);
    if (it != origins.end()) return it->second;
    const auto dot = path.rfind('.');
    if (dot == std::string::npos) break;
    path = path.substr(0, dot);
  }
  return origins.count("") ? origins.at("") : "config";
}

void Config::fail(const std::string& key_path, const std::string& message) const {
  throw UserError(where(key_path) + ": " + key_path + ": " + message);
}

Config load_config(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  YamlTree tree = config_detail::load_named_tree(file);
  tree.origins[""] = file.string();
  for (const auto& o : overrides) config_detail::apply_override(tree, o);
  return read_tree(tree);
}

Config load_config_over(const std::string& base_yaml, const std::string& base_name,
                        const std::vector<std::string>& keep_sections, const std::filesystem::path& file,
                        const std::vector<std::string>& overrides) {
  YamlTree tree = config_detail::tree_from_text(base_yaml, base_name);
  std::vector<std::string> drop;
  for (const auto& kv : tree.root)
    if (std::find(keep_sections.begin(), keep_sections.end(), kv.first.Scalar()) == keep_sections.end())
      drop.push_back(kv.first.Scalar());
  for (const auto& key : drop) tree.root.remove(key);
  config_detail::merge_tree(tree, config_detail::load_named_tree(file));
  tree.origins[""] = file.string();
  for (const auto& o : overrides) config_detail::apply_override(tree, o);
  return read_tree(tree);
}

Config config_from_yaml(const std::string& yaml_text, const std::string& name) {
  YamlTree tree = config_detail::tree_from_text(yaml_text, name);
  tree.origins[""] = name;
  return read_tree(tree);
}

std::string to_yaml(const Config& cfg) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  Writer writer(out);
  const_cast<Config&>(cfg).visit(writer);  // Writer only reads the fields
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {

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
  finite_positive("train.bucket_mb", t.bucket_mb);
  if (t.eval_batches < 1) cfg.fail("train.eval_batches", "must be >= 1, got " + std::to_string(t.eval_batches));
  finite_positive("model.init_std", cfg.model.init_std);
  finite_positive("model.layer_norm_eps", cfg.model.layer_norm_eps);
  finite("model.attention.rope_base", cfg.model.attention.rope_base);
  finite_positive("finetune.epochs", cfg.finetune.epochs);
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
  at_most("data.tokenizer_vocab_size", cfg.data.tokenizer_vocab_size, int64_t{1} << 24);
  at_most("data.max_seq_len", cfg.data.max_seq_len, int64_t{1} << 20);
  at_most("data.shard_tokens", cfg.data.shard_tokens, int64_t{1} << 34);
  at_most("train.batch_size", cfg.train.batch_size, int64_t{1} << 24);
  at_most("finetune.max_seq_len", cfg.finetune.max_seq_len, int64_t{1} << 20);
  at_most("finetune.eval_batch_size", cfg.finetune.eval_batch_size, int64_t{1} << 24);
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
  if (!facts) {
    std::vector<std::string> names;
    for (const MethodFacts* m : catalogue) names.push_back(m->name);
    cfg.fail("model.attention.method", "unknown method '" + name + "' (valid: " + join(names) + ")");
  }
  if (facts->config_problem) {
    const std::string problem = facts->config_problem(cfg.model);
    if (!problem.empty()) cfg.fail("model.attention.method", problem);
  }
}

}  // namespace

void validate(const Config& cfg) {
  const auto& m = cfg.model;
  auto positive = [&](const char* path, int64_t v) {
    if (v <= 0) cfg.fail(path, "must be positive, got " + std::to_string(v));
  };
  auto probability = [&](const char* path, double v) {
    if (!(v >= 0.0 && v <= 1.0)) cfg.fail(path, "must be in [0, 1], got " + std::to_string(v));
  };
  positive("model.hidden", m.hidden);
  positive("model.layers", m.layers);
  positive("model.heads", m.heads);
  positive("model.ffn", m.ffn);
  positive("model.max_position", m.max_position);
  positive("model.type_vocab_size", m.type_vocab_size);
  if (m.vocab_size < 0) cfg.fail("model.vocab_size", "must be 0 (from the tokenizer) or positive");
  if (m.hidden % m.heads != 0)
    cfg.fail("model.heads", "hidden (" + std::to_string(m.hidden) + ") is not divisible by heads (" +
                                std::to_string(m.heads) + ")");
  probability("model.dropout", m.dropout);
  probability("model.attention_dropout", m.attention_dropout);

  const auto& a = m.attention;
  validate_method(cfg);
  if (a.max_relative < 0) cfg.fail("model.attention.max_relative", "must be >= 0 (0 = max_position - 1)");
  if (a.backend != "auto" && a.backend != "plain" && a.backend != "sdpa")
    cfg.fail("model.attention.backend", "must be auto, plain or sdpa, got '" + a.backend + "'");
  if (a.t5_buckets < 2) cfg.fail("model.attention.t5_buckets", "must be at least 2");
  if (a.t5_max_distance < 1) cfg.fail("model.attention.t5_max_distance", "must be positive");
  if (!(a.rope_base > 1.0)) cfg.fail("model.attention.rope_base", "must be > 1");

  const auto& d = cfg.data;
  if (d.train_files.empty()) cfg.fail("data.train_files", "missing required key (no training files)");
  if (d.tokenizer != "sentencepiece" && d.tokenizer != "wordpiece")
    cfg.fail("data.tokenizer", "must be sentencepiece or wordpiece, got '" + d.tokenizer + "'");
  if (d.max_seq_len < 8) cfg.fail("data.max_seq_len", "must be at least 8");
  if (d.document_format != "blank_line" && d.document_format != "line")
    cfg.fail("data.document_format", "must be blank_line or line, got '" + d.document_format + "'");
  if (d.packing != "full_sentences" && d.packing != "doc_sentences")
    cfg.fail("data.packing", "must be full_sentences or doc_sentences, got '" + d.packing + "'");
  if (!(d.mask_prob > 0.0 && d.mask_prob < 1.0)) cfg.fail("data.mask_prob", "must be in (0, 1)");
  probability("data.mask_token_prob", d.mask_token_prob);
  probability("data.random_token_prob", d.random_token_prob);
  if (d.mask_token_prob + d.random_token_prob > 1.0 + 1e-9)
    cfg.fail("data.random_token_prob", "mask_token_prob + random_token_prob must not exceed 1");
  if (!(d.valid_fraction >= 0.0 && d.valid_fraction < 0.5)) cfg.fail("data.valid_fraction", "must be in [0, 0.5)");
  if (d.tokenizer_vocab_size < 16) cfg.fail("data.tokenizer_vocab_size", "must be at least 16");
  // A wordpiece tokenizer's vocab.txt is checked where the tokenizer is built
  // (make_tokenizer): a checkpoint's embedded config may legitimately carry none.
  if (d.shard_tokens < 1024) cfg.fail("data.shard_tokens", "must be at least 1024");
  if (d.prefetch < 0 || d.prefetch > 64) cfg.fail("data.prefetch", "must be in [0, 64]");

  const auto& t = cfg.train;
  positive("train.batch_size", t.batch_size);
  positive("train.grad_accum", t.grad_accum);
  positive("train.max_steps", t.max_steps);
  positive("train.log_every", t.log_every);
  if (t.batch_size % t.grad_accum != 0)
    cfg.fail("train.grad_accum", "batch_size (" + std::to_string(t.batch_size) + ") is not divisible by grad_accum");
  if (!(t.lr > 0.0)) cfg.fail("train.lr", "must be positive");
  if (t.warmup_steps < 0) cfg.fail("train.warmup_steps", "must be >= 0");
  if (t.weight_decay < 0.0) cfg.fail("train.weight_decay", "must be >= 0");
  if (t.clip_norm < 0.0) cfg.fail("train.clip_norm", "must be >= 0 (0 = off)");
  if (t.eval_every < 0 || t.save_every < 0) cfg.fail("train.eval_every", "eval_every/save_every must be >= 0");
  if (t.threads < 0) cfg.fail("train.threads", "must be >= 0");
  if (cfg.init.new_position_params != "identity" && cfg.init.new_position_params != "random")
    cfg.fail("init.new_position_params", "must be identity or random, got '" + cfg.init.new_position_params + "'");
  const auto& f = cfg.finetune;
  static const std::vector<std::string> tasks = {"squad", "cola", "sst2", "mrpc", "stsb",
                                                 "qqp",   "mnli", "qnli", "rte",  "wnli"};
  if (std::find(tasks.begin(), tasks.end(), f.task) == tasks.end())
    cfg.fail("finetune.task", "unknown task '" + f.task + "' (valid: " + join(tasks) + ")");
  if (f.max_seq_len < 16) cfg.fail("finetune.max_seq_len", "must be at least 16");
  positive("finetune.doc_stride", f.doc_stride);
  positive("finetune.max_query_len", f.max_query_len);
  positive("finetune.n_best", f.n_best);
  positive("finetune.max_answer_len", f.max_answer_len);
  positive("finetune.eval_batch_size", f.eval_batch_size);
  if (f.task == "squad" && f.max_query_len + 8 > f.max_seq_len)
    cfg.fail("finetune.max_query_len", "leaves no room for context within finetune.max_seq_len");
  if (!(f.epochs > 0.0)) cfg.fail("finetune.epochs", "must be positive");
  if (f.select != "final" && f.select != "best")
    cfg.fail("finetune.select", "must be final (the paper's protocol) or best (the best dev evaluation), got '" +
                                    f.select + "'");
  if (f.eval_every < 0) cfg.fail("finetune.eval_every", "must be >= 0 (0: evaluate at each epoch's end only)");
  if (f.early_stopping < 0) cfg.fail("finetune.early_stopping", "must be >= 0 (0: never stop early)");
  if (f.early_stopping > 0 && f.select != "best")
    cfg.fail("finetune.early_stopping", "needs finetune.select: best (the paper's protocol trains fixed epochs)");
  if (!(f.warmup_fraction >= 0.0 && f.warmup_fraction < 1.0)) cfg.fail("finetune.warmup_fraction", "must be in [0, 1)");
  if (f.max_train_examples < 0 || f.max_eval_examples < 0)
    cfg.fail("finetune.max_train_examples", "max_train_examples/max_eval_examples must be >= 0 (0 = all)");
  positive("train.keep_checkpoints", t.keep_checkpoints);
  positive("train.max_nonfinite_in_a_row", t.max_nonfinite_in_a_row);
  if (t.optimizer != "adamw" && t.optimizer != "lamb")
    cfg.fail("train.optimizer", "must be adamw or lamb, got '" + t.optimizer + "'");
  if (t.schedule != "linear" && t.schedule != "cosine")
    cfg.fail("train.schedule", "must be linear or cosine, got '" + t.schedule + "'");
  probability("train.min_lr_ratio", t.min_lr_ratio);
  if (t.precision != "fp32" && t.precision != "bf16")
    cfg.fail("train.precision", "must be fp32 or bf16, got '" + t.precision + "'");
  if (!(t.dist_timeout_s > 0.0)) cfg.fail("train.dist_timeout_s", "must be positive");
  if (!(t.bucket_mb > 0.0)) cfg.fail("train.bucket_mb", "must be positive");
  validate_run_name(cfg);
  validate_numbers(cfg);
  validate_sizes(cfg);
}

}  // namespace rpe

// Fine-tuning driver (see finetune.h).
#include "finetune/finetune.h"
#include "interop/method_swap.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "eval/glue_metrics.h"
#include "eval/squad_metrics.h"
#include "finetune/glue_data.h"
#include "finetune/heads.h"
#include "finetune/squad_data.h"
#include "finetune/squad_postprocess.h"
#include "rpe/version.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/optim.h"
#include "train/run_dir.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/log.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

ResolvedConfig resolve_finetune_config(const FinetuneRequest& req) {
  ResolvedConfig r;
  if (req.init.empty()) {
    r.cfg = load_config(req.config_file, req.sets);
    r.pretrain_max_len = r.cfg.data.max_seq_len;
    if (r.cfg.data.tokenizer_model.empty())
      throw UserError(req.config_file.string() + ": without --init, data.tokenizer_model must name a tokenizer");
    return r;
  }
  const CheckpointSource source = resolve_checkpoint(req.init, "--init");
  r.checkpoint = source.checkpoint;
  const fs::path& pretrain_dir = source.run_dir;
  r.pretrain_run = req.init;
  const std::string base_yaml = read_checkpoint_config(r.checkpoint);
  const Config base = config_from_yaml(base_yaml, r.checkpoint.string() + " (embedded config)");
  r.cfg = load_config_over(base_yaml, r.checkpoint.string(), {"model", "data"}, req.config_file, req.sets);
  r.pretrain_max_len = base.data.max_seq_len;
  auto& att = r.cfg.model.attention;
  if (r.cfg.model.max_position != base.model.max_position && att.max_relative == 0 &&
      base.model.attention.max_relative == 0) {
    att.max_relative = base.model.max_position - 1;  // keep the pretrained k (and table shapes)
    log::info("finetune", "model.max_position {} -> {}: keeping the pretrained clipping distance k = {}",
              base.model.max_position, r.cfg.model.max_position, att.max_relative);
  }
  if (r.cfg.data.tokenizer_model.empty()) {
    const fs::path tok = pretrain_dir / "tokenizer.model";
    if (r.cfg.data.tokenizer == "sentencepiece" && !fs::exists(tok))
      throw UserError("--init " + req.init + ": the pretraining tokenizer " + tok.string() +
                      " is missing (set data.tokenizer_model)");
    r.cfg.data.tokenizer_model = tok.string();
  }
  return r;
}

namespace {

// Everything read and checked before the run folder is created.
struct Prepared {
  ResolvedConfig rc;
  std::unique_ptr<Tokenizer> tok;
  bool squad = false;
  // SQuAD
  std::vector<SquadExample> train_ex, dev_ex;
  std::vector<SquadFeature> train_f, dev_f;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> train_off, dev_off;
  // GLUE
  const GlueTask* glue = nullptr;
  std::vector<std::vector<int64_t>> train_ids;
  std::vector<double> train_labels;
  struct Split {
    std::string name;
    std::vector<std::vector<int64_t>> ids;
    std::vector<double> labels;
  };
  std::vector<Split> dev;
};

// A padded batch with the tokenizer's [PAD] and, unless finetune.token_types is off, token
// types 1 after the first [SEP].
Batch batch_of(const Prepared& p, const std::vector<const std::vector<int64_t>*>& seqs, const torch::Device& device) {
  const auto& special = p.tok->special();
  return make_batch(seqs, special.pad, device, p.rc.cfg.finetune.token_types ? special.sep : -1);
}

template <class T> void take_first(std::vector<T>& v, int64_t n) {
  if (n > 0 && static_cast<int64_t>(v.size()) > n) v.resize(n);
}

Prepared prepare(const FinetuneRequest& req) {
  Prepared p;
  p.rc = resolve_finetune_config(req);
  auto& cfg = p.rc.cfg;
  const auto& f = cfg.finetune;
  p.tok = make_tokenizer(cfg.data, fs::path(cfg.run.root) / cfg.run.name / "tokenizer.model");
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = p.tok->vocab_size();
  p.squad = f.task == "squad";
  require(!f.token_types || cfg.model.type_vocab_size >= 2,
          "finetune.token_types: pairs need model.type_vocab_size >= 2 (got " +
              std::to_string(cfg.model.type_vocab_size) + "); set finetune.token_types: false");
  if (req.kind == "glue" && p.squad)
    throw UserError(req.config_file.string() + ": finetune.task is squad; pass --task NAME for a GLUE task");
  const auto t0 = Clock::now();
  if (p.squad) {
    require(!f.train_file.empty(), "finetune.train_file: missing (the SQuAD train JSON)");
    require(!f.dev_file.empty(), "finetune.dev_file: missing (the SQuAD dev JSON)");
    p.train_ex = read_squad(f.train_file);
    p.dev_ex = read_squad(f.dev_file);
    take_first(p.train_ex, f.max_train_examples);
    take_first(p.dev_ex, f.max_eval_examples);
    const SquadFeatureOptions fo{f.max_seq_len, f.doc_stride, f.max_query_len};
    p.train_f = make_squad_features(p.train_ex, *p.tok, fo, p.train_off);
    p.dev_f = make_squad_features(p.dev_ex, *p.tok, fo, p.dev_off);
    log::info("data", "SQuAD {}: {} train questions -> {} windows, {} dev questions -> {} windows | {:.1f}s",
              f.squad_v2 ? "2.0" : "1.1", p.train_ex.size(), p.train_f.size(), p.dev_ex.size(), p.dev_f.size(),
              std::chrono::duration<double>(Clock::now() - t0).count());
  } else {
    p.glue = &glue_task(f.task);
    require(!f.data_dir.empty() || !f.glue_dir.empty(),
            "finetune.data_dir: missing (or set finetune.glue_dir to the GLUE root)");
    const fs::path dir = f.data_dir.empty() ? fs::path(f.glue_dir) / p.glue->folder : fs::path(f.data_dir);
    const fs::path train_file = f.train_file.empty() ? dir / "train.tsv" : fs::path(f.train_file);
    auto train = read_glue_tsv(train_file, *p.glue);
    take_first(train, f.max_train_examples);
    for (const auto& ex : train) {
      p.train_ids.push_back(encode_pair(*p.tok, ex.a, ex.b, f.max_seq_len));
      p.train_labels.push_back(ex.label);
    }
    for (const auto& split : p.glue->dev_splits) {
      const fs::path file = (!f.dev_file.empty() && p.glue->dev_splits.size() == 1) ? fs::path(f.dev_file)
                                                                                     : dir / (split + ".tsv");
      auto dev = read_glue_tsv(file, *p.glue);
      take_first(dev, f.max_eval_examples);
      Prepared::Split s{split, {}, {}};
      for (const auto& ex : dev) {
        s.ids.push_back(encode_pair(*p.tok, ex.a, ex.b, f.max_seq_len));
        s.labels.push_back(ex.label);
      }
      p.dev.push_back(std::move(s));
    }
    log::info("data", "GLUE {}: {} train, {} | {:.1f}s", f.task, p.train_ids.size(),
              p.dev.size() == 2 ? std::to_string(p.dev[0].ids.size()) + "/" + std::to_string(p.dev[1].ids.size()) + " dev"
                                : std::to_string(p.dev[0].ids.size()) + " dev",
              std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return p;
}

// Builds the encoder, loads the pretrained weights and checks that the longest input fits
// the position method (a learned absolute table refuses lengths beyond max_position).
void load_encoder(BertModel& bert, const Prepared& p, int64_t longest) {
  // Through the method-swap loader: identical to a plain load when the methods agree, and
  // the paper's section 4.4 recipe (new position parameters start neutral) when the
  // fine-tuning config names another method than the pretrained run.
  if (!p.rc.checkpoint.empty()) {
    const SwapReport r = load_pretrained_encoder(*bert, p.rc.checkpoint, swap_options_from(p.rc.cfg.init));
    if (!r.added.empty() || !r.dropped.empty())
      log::info("finetune", "method swap: {} tensors loaded, {} added, {} dropped (probe max logit change {:.2e})",
                r.loaded.size(), r.added.size(), r.dropped.size(), r.probe_max_diff);
  }
  bert->position->input_embeddings(longest);
}

// The optimisation loop shared by all tasks: `loss_of(indices)` returns the mean loss of a
// micro-batch. Returns the mean loss of the last logged window.
double train_loop(torch::nn::Module& model, int64_t n_items, const std::function<torch::Tensor(const std::vector<int64_t>&)>& loss_of,
                  const Config& cfg, int64_t seed, const MetricsWriter& metrics) {
  TrainOptions t = cfg.train;
  const int64_t per_epoch = (n_items + t.batch_size - 1) / t.batch_size;
  t.max_steps = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cfg.finetune.epochs * static_cast<double>(per_epoch))));
  t.warmup_steps = static_cast<int64_t>(std::llround(cfg.finetune.warmup_fraction * static_cast<double>(t.max_steps)));
  auto optimizer = make_adamw(model, t);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<int64_t> order;
  size_t cursor = 0;
  auto next_items = [&](int64_t n) {
    std::vector<int64_t> out;
    while (static_cast<int64_t>(out.size()) < n) {
      if (cursor >= order.size()) {  // new epoch: reshuffle
        order.resize(n_items);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        cursor = 0;
      }
      out.push_back(order[cursor++]);
    }
    return out;
  };
  const int64_t micro = t.batch_size / t.grad_accum;
  log::info("finetune", "seed {}: {} steps ({} epochs x {} steps), batch {}, lr {}, warmup {}", seed, t.max_steps,
            cfg.finetune.epochs, per_epoch, t.batch_size, t.lr, t.warmup_steps);
  model.train();
  double window = 0, last = std::nan("");
  int64_t in_window = 0;
  const auto start = Clock::now();
  for (int64_t step = 0; step < t.max_steps; ++step) {
    const double lr = learning_rate(t, step);
    set_learning_rate(*optimizer, lr);
    optimizer->zero_grad();
    double step_loss = 0;
    for (int64_t m = 0; m < t.grad_accum; ++m) {
      auto loss = loss_of(next_items(micro)) / static_cast<double>(t.grad_accum);
      loss.backward();
      step_loss += loss.item<double>();
    }
    if (t.clip_norm > 0) torch::nn::utils::clip_grad_norm_(model.parameters(), t.clip_norm);
    optimizer->step();
    window += step_loss;
    ++in_window;
    if ((step + 1) % t.log_every == 0 || step + 1 == t.max_steps) {
      last = window / static_cast<double>(in_window);
      const double secs = std::chrono::duration<double>(Clock::now() - start).count();
      log::info("finetune", "step {}/{} | loss {:.4f} | lr {:.2e} | {:.1f}s", step + 1, t.max_steps, last, lr, secs);
      if (metrics.enabled()) metrics.write({{"step", step + 1}, {"loss", last}, {"lr", lr}, {"seconds", secs}});
      window = 0;
      in_window = 0;
    }
  }
  model.eval();
  return last;
}

eval::ResultRow base_row(const Prepared& p, const BertModel& bert, const std::string& run_id, int64_t seed) {
  eval::ResultRow r;
  r.run_id = run_id;
  r.method = p.rc.cfg.model.attention.method;
  const auto keys = bert->position->option_keys();  // k only where the method has a clipping distance
  r.k = std::find(keys.begin(), keys.end(), "max_relative") != keys.end() ? bert->position->clip_distance() : 0;
  r.pretrain_run = p.rc.pretrain_run;
  r.pretrain_max_len = p.rc.pretrain_max_len;
  r.seed = seed;
  r.finetune_max_len = p.rc.cfg.finetune.max_seq_len;
  r.git_revision = kGitRevision;
  r.time = eval::utc_now();
  return r;
}

std::vector<eval::ResultRow> run_squad_seed(const Prepared& p, const fs::path& dir, const std::string& run_id,
                                            int64_t seed, const torch::Device& device) {
  const auto& cfg = p.rc.cfg;
  const auto& f = cfg.finetune;
  torch::manual_seed(static_cast<uint64_t>(seed));
  QaModel model(cfg.model);
  int64_t longest = 0;
  for (const auto& x : p.train_f) longest = std::max<int64_t>(longest, x.ids.size());
  for (const auto& x : p.dev_f) longest = std::max<int64_t>(longest, x.ids.size());
  load_encoder(model->bert, p, longest);
  model->to(device);
  model->bert->set_fused_attention(device.is_cuda() && cfg.model.attention.backend != "plain");

  auto loss_of = [&](const std::vector<int64_t>& idx) {
    std::vector<const std::vector<int64_t>*> seqs;
    std::vector<int64_t> s, e;
    for (auto i : idx) {
      seqs.push_back(&p.train_f[i].ids);
      s.push_back(p.train_f[i].start);
      e.push_back(p.train_f[i].end);
    }
    auto logits = model->forward(batch_of(p, seqs, device));  // [B, L, 2]
    return qa_loss(logits, torch::tensor(s).to(device), torch::tensor(e).to(device));
  };
  train_loop(*model, static_cast<int64_t>(p.train_f.size()), loss_of, cfg, seed, MetricsWriter(dir / "metrics.jsonl"));

  // Evaluation: logits of every dev window, cut back to the window's length.
  torch::NoGradGuard no_grad;
  std::vector<std::vector<float>> start_logits(p.dev_f.size()), end_logits(p.dev_f.size());
  for (size_t b = 0; b < p.dev_f.size(); b += f.eval_batch_size) {
    const size_t e = std::min(p.dev_f.size(), b + static_cast<size_t>(f.eval_batch_size));
    std::vector<const std::vector<int64_t>*> seqs;
    for (size_t i = b; i < e; ++i) seqs.push_back(&p.dev_f[i].ids);
    auto logits = model->forward(batch_of(p, seqs, device)).to(torch::kCPU).contiguous();  // [B, L, 2]
    auto acc = logits.accessor<float, 3>();
    for (size_t i = b; i < e; ++i) {
      const int64_t L = static_cast<int64_t>(p.dev_f[i].ids.size());
      for (int64_t t = 0; t < L; ++t) {
        start_logits[i].push_back(acc[i - b][t][0]);
        end_logits[i].push_back(acc[i - b][t][1]);
      }
    }
  }
  const SquadPostOptions po{f.n_best, f.max_answer_len, f.squad_v2, f.null_threshold};
  const auto preds = squad_predictions(p.dev_ex, p.dev_f, p.dev_off, start_logits, end_logits, po);
  std::map<std::string, std::string> texts;
  std::map<std::string, double> na;
  json preds_json = json::object(), odds_json = json::object();
  for (const auto& [id, pr] : preds) {
    texts[id] = pr.text;
    preds_json[id] = pr.text;
    na[id] = pr.score_diff;
    odds_json[id] = pr.score_diff;
  }
  const auto gold = squad_gold(p.dev_ex);
  eval::SquadScores s = f.squad_v2 ? eval::evaluate_squad_v2(gold, texts, na) : eval::evaluate_squad_v1(gold, texts);
  std::vector<std::pair<std::string, double>> metrics = {{"exact", s.exact}, {"f1", s.f1}};
  if (f.squad_v2) {
    metrics.insert(metrics.end(), {{"HasAns_exact", s.has_ans_exact}, {"HasAns_f1", s.has_ans_f1},
                                   {"NoAns_exact", s.no_ans_exact}, {"NoAns_f1", s.no_ans_f1},
                                   {"best_exact", s.best_exact}, {"best_exact_thresh", s.best_exact_thresh},
                                   {"best_f1", s.best_f1}, {"best_f1_thresh", s.best_f1_thresh}});
  }
  json results = {{"task", f.squad_v2 ? "squad_v2" : "squad_v1"}, {"split", "dev"}, {"seed", seed},
                  {"total", s.total}, {"dev_file", f.dev_file}, {"git_revision", kGitRevision}};
  for (const auto& [k, v] : metrics) results[k] = v;
  if (f.squad_v2) {
    results["HasAns_total"] = s.has_ans_total;
    results["NoAns_total"] = s.no_ans_total;
  }
  write_file_atomic(dir / "predictions.json", preds_json.dump() + "\n");
  if (f.squad_v2) write_file_atomic(dir / "null_odds.json", odds_json.dump() + "\n");
  write_file_atomic(dir / "results.json", results.dump(2) + "\n");
  log::info("eval", "SQuAD {} dev ({} questions): EM {:.2f} F1 {:.2f}{}", f.squad_v2 ? "2.0" : "1.1", s.total,
            s.exact, s.f1,
            f.squad_v2 ? fmt::format(" | best F1 {:.2f} at threshold {:.3f}", s.best_f1, s.best_f1_thresh) : "");

  std::vector<eval::ResultRow> rows;
  for (const auto& [k, v] : metrics) {
    auto r = base_row(p, model->bert, run_id, seed);
    r.task = f.squad_v2 ? "squad_v2" : "squad_v1";
    r.split = "dev";
    r.metric = k;
    r.value = v;
    r.examples = s.total;
    rows.push_back(r);
  }
  return rows;
}

std::vector<eval::ResultRow> run_glue_seed(const Prepared& p, const fs::path& dir, const std::string& run_id,
                                           int64_t seed, const torch::Device& device) {
  const auto& cfg = p.rc.cfg;
  const auto& f = cfg.finetune;
  const bool regression = p.glue->labels.empty();
  torch::manual_seed(static_cast<uint64_t>(seed));
  ClassifierModel model(cfg.model, regression ? 1 : static_cast<int64_t>(p.glue->labels.size()));
  int64_t longest = 0;
  for (const auto& x : p.train_ids) longest = std::max<int64_t>(longest, x.size());
  for (const auto& s : p.dev)
    for (const auto& x : s.ids) longest = std::max<int64_t>(longest, x.size());
  load_encoder(model->bert, p, longest);
  model->to(device);
  model->bert->set_fused_attention(device.is_cuda() && cfg.model.attention.backend != "plain");

  auto loss_of = [&](const std::vector<int64_t>& idx) {
    std::vector<const std::vector<int64_t>*> seqs;
    std::vector<double> y;
    for (auto i : idx) {
      seqs.push_back(&p.train_ids[i]);
      y.push_back(p.train_labels[i]);
    }
    auto out = model->forward(batch_of(p, seqs, device));  // [B, C]
    auto target = torch::tensor(y, torch::kDouble).to(device);
    if (regression) return torch::mse_loss(out.squeeze(-1), target.to(torch::kFloat));
    return torch::nn::functional::cross_entropy(out, target.to(torch::kLong));
  };
  train_loop(*model, static_cast<int64_t>(p.train_ids.size()), loss_of, cfg, seed, MetricsWriter(dir / "metrics.jsonl"));

  torch::NoGradGuard no_grad;
  std::vector<eval::ResultRow> rows;
  json results = {{"task", f.task}, {"seed", seed}, {"git_revision", kGitRevision}};
  for (const auto& split : p.dev) {
    std::vector<double> pred;
    for (size_t b = 0; b < split.ids.size(); b += f.eval_batch_size) {
      const size_t e = std::min(split.ids.size(), b + static_cast<size_t>(f.eval_batch_size));
      std::vector<const std::vector<int64_t>*> seqs;
      for (size_t i = b; i < e; ++i) seqs.push_back(&split.ids[i]);
      auto out = model->forward(batch_of(p, seqs, device)).to(torch::kCPU);  // [B, C]
      auto v = regression ? out.squeeze(-1).to(torch::kDouble) : out.argmax(-1).to(torch::kDouble);
      auto a = v.contiguous();
      pred.insert(pred.end(), a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
    }
    const auto m = eval::glue_task_metrics(f.task, pred, split.labels);
    std::string tsv = "index\tprediction\n";
    for (size_t i = 0; i < pred.size(); ++i)
      tsv += std::to_string(i) + "\t" +
             (regression ? fmt::format("{:.4f}", pred[i]) : p.glue->labels[static_cast<size_t>(pred[i])]) + "\n";
    write_file_atomic(dir / ("predictions_" + split.name + ".tsv"), tsv);
    for (const auto& [k, v] : m) {
      results[split.name][k] = v;
      auto r = base_row(p, model->bert, run_id, seed);
      r.task = f.task;
      r.split = split.name;
      r.metric = k;
      r.value = v;
      r.examples = static_cast<int64_t>(pred.size());
      rows.push_back(r);
      log::info("eval", "{} {} ({} examples): {} {:.2f}", f.task, split.name, pred.size(), k, v);
    }
  }
  write_file_atomic(dir / "results.json", results.dump(2) + "\n");
  return rows;
}

}  // namespace

void remove_tree(const fs::path& path) { rpe::remove_tree(path); }

FinetuneOutcome run_finetune(const FinetuneRequest& req) {
  Prepared p = prepare(req);
  const auto& cfg = p.rc.cfg;
  if (cfg.train.threads > 0) torch::set_num_threads(static_cast<int>(cfg.train.threads));
  const torch::Device device = resolve_device(cfg.train.device);
  {  // Check the checkpoint's shapes and the lengths once before anything is written.
    BertModel probe(cfg.model);
    int64_t longest = 0;
    for (const auto& x : p.train_f) longest = std::max<int64_t>(longest, x.ids.size());
    for (const auto& x : p.dev_f) longest = std::max<int64_t>(longest, x.ids.size());
    for (const auto& x : p.train_ids) longest = std::max<int64_t>(longest, x.size());
    for (const auto& s : p.dev)
      for (const auto& x : s.ids) longest = std::max<int64_t>(longest, x.size());
    load_encoder(probe, p, longest);
    log::info("model", "{} layers, hidden {} | position: {} | init {}", cfg.model.layers, cfg.model.hidden,
              probe->position->describe(), p.rc.checkpoint.empty() ? "random" : p.rc.checkpoint.string());
  }
  const fs::path dir = req.run_dir.empty() ? fs::path(cfg.run.root) / cfg.run.name : fs::path(req.run_dir);
  prepare_run_dir(dir, RunDirRequest{/*resume=*/false, req.overwrite, /*can_resume=*/false});
  log::add_file_sink(dir / "finetune.log");
  write_file_atomic(dir / "config.yaml", to_yaml(cfg));

  std::vector<int64_t> seeds = req.seeds.empty() ? std::vector<int64_t>{cfg.train.seed} : req.seeds;
  FinetuneOutcome out{dir, {}};
  for (int64_t seed : seeds) {
    const fs::path seed_dir = dir / ("seed" + std::to_string(seed));
    fs::create_directories(seed_dir);
    const std::string run_id = dir.filename().string() + "/seed" + std::to_string(seed);
    auto rows = p.squad ? run_squad_seed(p, seed_dir, run_id, seed, device)
                        : run_glue_seed(p, seed_dir, run_id, seed, device);
    eval::append_results(cfg.finetune.results_file, rows);
    out.rows.insert(out.rows.end(), rows.begin(), rows.end());
  }
  return out;
}

}  // namespace rpe::finetune

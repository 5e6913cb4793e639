// SQuAD fine-tuning task, evaluation and outputs (see squad_task.h).
#include "finetune/squad_task.h"

#include <nlohmann/json.hpp>

#include "eval/squad_metrics.h"
#include "finetune/squad_postprocess.h"
#include "rpe/version.h"
#include "train/precision.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/log.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using nlohmann::json;

SquadTask::SquadTask(const Prepared& p, QaModel model, const TrainOptions& t, const SeedContext& ctx)
    : ItemTask(static_cast<int64_t>(p.train_f.size()), t, ctx.seed, ctx.dp->rank(), ctx.dp->world()),
      p_(p),
      model_(std::move(model)) {}

MicroBatch SquadTask::make_batch(const std::vector<int64_t>& items) {
  std::vector<const std::vector<int64_t>*> seqs;
  std::vector<int64_t> s, e;
  for (auto i : items) {
    seqs.push_back(&p_.train_f[i].ids);
    s.push_back(p_.train_f[i].start);
    e.push_back(p_.train_f[i].end);
  }
  const Batch b = batch_of(p_, seqs, torch::kCPU);
  MicroBatch out;
  out.tensors = {b.ids, b.padding, b.types, torch::tensor(s), torch::tensor(e)};
  return out;
}

BatchSums SquadTask::forward(const MicroBatch& batch) {
  const auto& t = batch.tensors;
  auto logits = model_->forward(Batch{t[0], t[1], t[2]});  // [B, L, 2] float32
  BatchSums s;
  s.loss = qa_loss(logits, t[3], t[4]) * static_cast<double>(t[0].size(0));  // mean -> sum over windows
  s.tokens = t[1].logical_not().sum();
  return s;
}

namespace {

// Start and end logits of every dev window, cut back to the window's length.
void dev_logits(const Prepared& p, QaModel& model, const torch::Device& device,
                std::vector<std::vector<float>>& start_logits, std::vector<std::vector<float>>& end_logits) {
  const auto& f = p.rc.cfg.finetune;
  torch::NoGradGuard no_grad;
  AutocastGuard autocast(device, p.rc.cfg.train.precision == "bf16");
  start_logits.assign(p.dev_f.size(), {});
  end_logits.assign(p.dev_f.size(), {});
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
}

// predictions.json, null_odds.json (v2.0), results.json; returns the (metric, value) pairs.
std::vector<std::pair<std::string, double>> write_squad_outputs(const Prepared& p, const fs::path& dir, int64_t seed,
                                                                const std::map<std::string, SquadPrediction>& preds,
                                                                eval::SquadScores& s) {
  const auto& f = p.rc.cfg.finetune;
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
  s = f.squad_v2 ? eval::evaluate_squad_v2(gold, texts, na) : eval::evaluate_squad_v1(gold, texts);
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
  return metrics;
}

}  // namespace

std::vector<eval::ResultRow> run_squad_seed(const Prepared& p, const SeedContext& ctx) {
  const auto& cfg = p.rc.cfg;
  const auto& f = cfg.finetune;
  torch::manual_seed(static_cast<uint64_t>(ctx.seed));
  QaModel model(cfg.model);
  load_encoder(model->bert, p, longest_input(p));
  model->to(ctx.device);
  model->bert->set_fused_attention(use_fused_attention(ctx.device, cfg.model.attention.backend));
  const TrainOptions t = finetune_schedule(cfg, static_cast<int64_t>(p.train_f.size()));
  SquadTask task(p, model, t, ctx);
  train_seed(*model, task, t, ctx);
  if (!ctx.chief()) return {};

  std::vector<std::vector<float>> start_logits, end_logits;
  dev_logits(p, model, ctx.device, start_logits, end_logits);
  const SquadPostOptions po{f.n_best, f.max_answer_len, f.squad_v2, f.null_threshold};
  const auto preds = squad_predictions(p.dev_ex, p.dev_f, p.dev_off, start_logits, end_logits, po);
  eval::SquadScores s;
  const auto metrics = write_squad_outputs(p, ctx.dir, ctx.seed, preds, s);
  log::info("eval", "SQuAD {} dev ({} questions): EM {:.2f} F1 {:.2f}{}", f.squad_v2 ? "2.0" : "1.1", s.total,
            s.exact, s.f1,
            f.squad_v2 ? fmt::format(" | best F1 {:.2f} at threshold {:.3f}", s.best_f1, s.best_f1_thresh) : "");
  std::vector<eval::ResultRow> rows;
  for (const auto& [k, v] : metrics) {
    auto r = base_row(p, model->bert, ctx.run_id, ctx.seed);
    r.task = f.squad_v2 ? "squad_v2" : "squad_v1";
    r.split = "dev";
    r.metric = k;
    r.value = v;
    r.examples = s.total;
    rows.push_back(r);
  }
  return rows;
}

}  // namespace rpe::finetune

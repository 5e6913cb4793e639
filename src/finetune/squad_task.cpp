// SQuAD fine-tuning task, evaluation and outputs (see squad_task.h).
#include "finetune/squad_task.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "eval/squad_metrics.h"
#include "finetune/squad_postprocess.h"
#include "rpe/version.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/json_text.h"
#include "util/log.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using nlohmann::json;

SquadTask::SquadTask(const Prepared& p, QaModel model, const TrainOptions& t, const SeedContext& ctx,
                     ModelKeeper* keeper)
    : ItemTask(static_cast<int64_t>(p.train_f.size()), t, ctx.seed, ctx.dp->rank(), ctx.dp->world(),
               p.rc.cfg.finetune.eval_each_epoch),
      p_(p),
      model_(std::move(model)) {
  keeper_ = keeper;
}

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
  s.loss = qa_loss(logits, t[3], t[4], t[1]) * static_cast<double>(t[0].size(0));  // mean -> sum over windows
  s.tokens = real_tokens(t[0], t[1]);
  return s;
}

namespace {
// The fields of a dev evaluation's row (periodic and final): EM and F1.
nlohmann::json dev_fields(const eval::SquadScores& s) { return {{"exact", s.exact}, {"f1", s.f1}}; }
}  // namespace

EvalOutputs SquadTask::eval_outputs(dist::DataParallel& dp) {
  return {squad_window_logits(p_, model_, model_->parameters().front().device(), dp)};
}

nlohmann::json SquadTask::score(const EvalOutputs& outputs) {
  eval::SquadScores scores;
  score_squad(p_, squad_predictions_from(p_, outputs.at(0)), scores);
  return dev_fields(scores);
}

bool SquadTask::after_evaluation(int64_t step, const nlohmann::json& fields) {
  return keeper_ && keeper_->offer(step, fields.at("f1").get<double>(), /*final=*/false, *model_);
}

torch::Tensor squad_window_logits(const Prepared& p, QaModel& model, const torch::Device& device, dist::DataParallel& dp) {
  int64_t longest = 0;
  for (const auto& w : p.dev_f) longest = std::max<int64_t>(longest, static_cast<int64_t>(w.ids.size()));
  return dev_pass(p, *model, static_cast<int64_t>(p.dev_f.size()), [&](int64_t i) -> const auto& { return p.dev_f[i].ids; },
                  "SQuAD windows", {longest, 2}, torch::kFloat, device, dp, [&](const Batch& batch) {
                    // [B, L_batch, 2]: a batch pads its windows to a multiple of 8 (up to max_seq_len),
                    // so L_batch may pass the longest window; the columns past it are padding for all.
                    const auto out = model->forward(batch).to(torch::kFloat);
                    const int64_t width = std::min(out.size(1), longest);
                    auto rows = torch::zeros({out.size(0), longest, 2}, out.options());
                    rows.narrow(1, 0, width).copy_(out.narrow(1, 0, width));
                    return rows;
                  });
}

std::map<std::string, SquadPrediction> squad_predictions_from(const Prepared& p, const torch::Tensor& logits) {
  const auto& f = p.rc.cfg.finetune;
  std::vector<std::vector<float>> start_logits(p.dev_f.size()), end_logits(p.dev_f.size());
  const auto acc = logits.accessor<float, 3>();
  for (size_t i = 0; i < p.dev_f.size(); ++i) {
    const auto L = static_cast<int64_t>(p.dev_f[i].ids.size());  // cut back to the window's length
    for (int64_t t = 0; t < L; ++t) {
      start_logits[i].push_back(acc[static_cast<int64_t>(i)][t][0]);
      end_logits[i].push_back(acc[static_cast<int64_t>(i)][t][1]);
    }
  }
  const SquadPostOptions po{f.n_best, f.max_answer_len, f.squad_v2, f.null_threshold};
  return squad_predictions(p.dev_ex, p.dev_f, p.dev_off, start_logits, end_logits, po);
}

std::map<std::string, SquadPrediction> predict_squad(const Prepared& p, QaModel& model, const torch::Device& device) {
  dist::DataParallel one_process;
  return squad_predictions_from(p, squad_window_logits(p, model, device, one_process));
}

std::vector<std::pair<std::string, double>> score_squad(const Prepared& p,
                                                        const std::map<std::string, SquadPrediction>& preds,
                                                        eval::SquadScores& s) {
  const auto& f = p.rc.cfg.finetune;
  std::map<std::string, std::string> texts;
  eval::NaScores na;  // in id order, as null_odds.json lists them: the official script on it agrees
  for (const auto& [id, pr] : preds) {
    texts[id] = pr.text;
    na.emplace_back(id, pr.score_diff);
  }
  const auto gold = squad_gold(p.dev_ex);
  s = f.squad_v2 ? eval::evaluate_squad_v2(gold, texts, na, f.null_threshold) : eval::evaluate_squad_v1(gold, texts);
  std::vector<std::pair<std::string, double>> metrics = {{"exact", s.exact}, {"f1", s.f1}};
  if (f.squad_v2) {
    metrics.insert(metrics.end(), {{"HasAns_exact", s.has_ans_exact}, {"HasAns_f1", s.has_ans_f1},
                                   {"NoAns_exact", s.no_ans_exact}, {"NoAns_f1", s.no_ans_f1},
                                   {"best_exact", s.best_exact}, {"best_exact_thresh", s.best_exact_thresh},
                                   {"best_f1", s.best_f1}, {"best_f1_thresh", s.best_f1_thresh}});
  }
  return metrics;
}

void write_squad_predictions(const fs::path& predictions_file, const std::map<std::string, SquadPrediction>& preds,
                             bool v2) {
  json preds_json = json::object(), odds_json = json::object(), nbest_json = json::object();
  for (const auto& [id, pr] : preds) {
    preds_json[id] = pr.text;
    odds_json[id] = pr.score_diff;
    json list = json::array();
    for (const auto& n : pr.nbest)
      list.push_back({{"text", n.text}, {"probability", n.probability}, {"start_logit", n.start_logit},
                      {"end_logit", n.end_logit}});
    nbest_json[id] = std::move(list);
  }
  // One set or none: a failure (a full disk) leaves no new predictions beside old n-best lists or
  // no-answer odds that evaluate-squad would read with them.
  const fs::path dir = predictions_file.parent_path();
  std::vector<std::pair<fs::path, std::string>> files = {{predictions_file, preds_json.dump() + "\n"},
                                                         {dir / "nbest_predictions.json", nbest_json.dump() + "\n"}};
  if (v2) files.emplace_back(dir / "null_odds.json", odds_json.dump() + "\n");
  write_files_atomic(files);
}

namespace {

// Rank 0's files and result rows of the kept model's predictions (of step `kept_step`).
std::vector<eval::ResultRow> record_squad(const Prepared& p, QaModel& model, const SeedContext& ctx,
                                          const TrainOutcome& trained, int64_t kept_step,
                                          const std::map<std::string, SquadPrediction>& preds) {
  const auto& f = p.rc.cfg.finetune;
  eval::SquadScores s;
  const auto metrics = score_squad(p, preds, s);
  const std::string task_name = f.squad_v2 ? "squad_v2" : "squad_v1";
  write_squad_predictions(ctx.dir / "predictions.json", preds, f.squad_v2);
  json results = {{"task", task_name}, {"split", "dev"}, {"seed", ctx.seed}, {"total", s.total},
                  {"dev_file", f.dev_file}, {"git_revision", kGitRevision}, {"select", f.select},
                  {"model_step", kept_step}, {"steps", trained.steps}, {"stopped_early", trained.stopped_early}};
  for (const auto& [k, v] : metrics) results[k] = v;
  if (f.squad_v2) {
    results["HasAns_total"] = s.has_ans_total;
    results["NoAns_total"] = s.no_ans_total;
  }
  std::vector<eval::ResultRow> rows;
  for (const auto& [k, v] : metrics) {
    auto r = base_row(p, model->bert, ctx.run_id, ctx.seed, ctx.dir);
    r.task = task_name;
    r.split = "dev";
    r.metric = k;
    r.value = v;
    r.examples = s.total;
    rows.push_back(r);
  }
  results["rows"] = result_rows_json(rows);  // what --resume puts back if a kill keeps them from the results file
  write_file_atomic(ctx.dir / "results.json", dump_json(results, 2) + "\n");  // rows hold paths: dump_json
  log::info("eval", "SQuAD {} dev ({} questions), model of step {}: EM {:.2f} F1 {:.2f}{}", f.squad_v2 ? "2.0" : "1.1",
            s.total, kept_step, s.exact, s.f1,
            f.squad_v2 ? fmt::format(" | best F1 {:.2f} at threshold {:.3f}", s.best_f1, s.best_f1_thresh) : "");
  return rows;
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
  model->bert->set_activation_checkpointing(parse_recompute(cfg.train.activation_checkpointing));
  const TrainOptions t = finetune_schedule(cfg, static_cast<int64_t>(p.train_f.size()));
  const std::string task_name = f.squad_v2 ? "squad_v2" : "squad_v1";
  std::optional<ModelKeeper> keeper;
  if (ctx.chief()) keeper.emplace(ctx.dir / "model", SavedModelInfo{task_name, {}, 2, f.select, 0, "f1", 0.0}, cfg, cfg.data.tokenizer_model);
  SquadTask task(p, model, t, ctx, keeper ? &*keeper : nullptr);
  const TrainOutcome trained = train_seed(*model, task, t, ctx);
  FinalEvaluation final_eval;  // seed_run.h
  final_eval.outputs = [&] { return task.eval_outputs(*ctx.dp); };
  final_eval.score = [&](const EvalOutputs& out) { return task.score(out); };
  final_eval.metric = "f1";
  final_eval.record = [&](const EvalOutputs& out, int64_t kept_step) {
    return record_squad(p, model, ctx, trained, kept_step, squad_predictions_from(p, out.at(0)));
  };
  return finish_seed(p, ctx, trained, keeper ? &*keeper : nullptr, *model, final_eval);
}

}  // namespace rpe::finetune

// GLUE fine-tuning task, evaluation and outputs (see glue_task.h).
#include "finetune/glue_task.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>

#include "eval/glue_metrics.h"
#include "rpe/version.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/json_text.h"
#include "util/log.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using nlohmann::json;

GlueTrainTask::GlueTrainTask(const Prepared& p, ClassifierModel model, const TrainOptions& t, const SeedContext& ctx,
                             ModelKeeper* keeper)
    : ItemTask(static_cast<int64_t>(p.train_ids.size()), t, ctx.seed, ctx.dp->rank(), ctx.dp->world(),
               p.rc.cfg.finetune.eval_each_epoch),
      p_(p),
      model_(std::move(model)),
      regression_(p.glue->labels.empty()) {
  keeper_ = keeper;
}

EvalOutputs GlueTrainTask::eval_outputs(dist::DataParallel& dp) {
  return glue_dev_predictions(p_, model_, model_->parameters().front().device(), dp);
}

nlohmann::json GlueTrainTask::score(const EvalOutputs& outputs) { return glue_dev_metrics(p_, outputs); }

bool GlueTrainTask::after_evaluation(int64_t step, const nlohmann::json& fields) {
  const std::string metric = selection_metric(p_.rc.cfg.finetune.task);
  return keeper_ && keeper_->offer(step, fields.at(metric).get<double>(), /*final=*/false, *model_);
}

MicroBatch GlueTrainTask::make_batch(const std::vector<int64_t>& items) {
  std::vector<const std::vector<int64_t>*> seqs;
  std::vector<double> y;
  for (auto i : items) {
    seqs.push_back(&p_.train_ids[i]);
    y.push_back(p_.train_labels[i]);
  }
  const Batch b = batch_of(p_, seqs, torch::kCPU);
  MicroBatch out;
  out.tensors = {b.ids, b.padding, b.types, torch::tensor(y, torch::kDouble)};
  return out;
}

BatchSums GlueTrainTask::forward(const MicroBatch& batch) {
  const auto& t = batch.tensors;
  auto out = model_->forward(Batch{t[0], t[1], t[2]});  // [B, C] float32
  namespace F = torch::nn::functional;
  BatchSums s;
  if (regression_) {
    s.loss = F::mse_loss(out.squeeze(-1), t[3].to(torch::kFloat), F::MSELossFuncOptions().reduction(torch::kSum));
  } else {
    const auto target = t[3].to(torch::kLong);
    s.loss = F::cross_entropy(out, target, F::CrossEntropyFuncOptions().reduction(torch::kSum));
    s.correct = out.detach().argmax(-1).eq(target).sum();
  }
  s.tokens = real_tokens(t[0], t[1]);
  return s;
}

torch::Tensor glue_predictions(const Prepared& p, ClassifierModel& model, const std::vector<std::vector<int64_t>>& ids,
                               const torch::Device& device, dist::DataParallel& dp) {
  const bool regression = model->classifier->options.out_features() == 1;
  return dev_pass(p, *model, static_cast<int64_t>(ids.size()), [&](int64_t i) -> const auto& { return ids[i]; },
                  "GLUE examples", {}, torch::kDouble, device, dp, [&](const Batch& batch) {
                    const auto out = model->forward(batch);  // [B, C]
                    return (regression ? out.squeeze(-1) : out.argmax(-1)).to(torch::kDouble);
                  });
}

namespace {
std::vector<double> as_vector(const torch::Tensor& pred) {
  const auto c = pred.to(torch::kDouble).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}
}  // namespace

std::vector<double> predict_glue(const Prepared& p, ClassifierModel& model, const std::vector<std::vector<int64_t>>& ids,
                                 const torch::Device& device) {
  dist::DataParallel one_process;
  return as_vector(glue_predictions(p, model, ids, device, one_process));
}

EvalOutputs glue_dev_predictions(const Prepared& p, ClassifierModel& model, const torch::Device& device,
                                 dist::DataParallel& dp) {
  EvalOutputs out;
  for (const auto& split : p.dev) out.push_back(glue_predictions(p, model, split.ids, device, dp));
  return out;
}

nlohmann::json glue_dev_metrics(const Prepared& p, const EvalOutputs& predictions) {
  json fields = json::object();
  for (size_t i = 0; i < p.dev.size(); ++i)
    for (const auto& [k, v] : eval::glue_task_metrics(p.rc.cfg.finetune.task, as_vector(predictions.at(i)), p.dev[i].labels))
      fields[p.dev.size() == 1 ? k : p.dev[i].name + "/" + k] = v;
  return fields;
}

void write_glue_predictions(const fs::path& file, const std::vector<std::string>& labels, const std::vector<double>& pred,
                            const std::vector<std::string>& index) {
  std::string tsv = "index\tprediction\n";
  for (size_t i = 0; i < pred.size(); ++i)
    tsv += (index.empty() ? std::to_string(i) : index[i]) + "\t" +
           (labels.empty() ? fmt::format("{}", pred[i]) : labels.at(static_cast<size_t>(pred[i]))) + "\n";
  write_file_atomic(file, tsv);
}

namespace {

// Rank 0's files and result rows of the scored dev predictions, for the model kept at step `kept_step`.
std::vector<eval::ResultRow> record_glue(const Prepared& p, ClassifierModel& model, const SeedContext& ctx,
                                         const TrainOutcome& trained, int64_t kept_step, const EvalOutputs& preds) {
  const auto& f = p.rc.cfg.finetune;
  std::vector<eval::ResultRow> rows;
  json results = {{"task", f.task}, {"seed", ctx.seed}, {"git_revision", kGitRevision}, {"select", f.select},
                  {"model_step", kept_step}, {"steps", trained.steps}, {"stopped_early", trained.stopped_early}};
  for (size_t i = 0; i < p.dev.size(); ++i) {
    const auto& split = p.dev[i];
    const std::vector<double> pred = as_vector(preds.at(i));
    write_glue_predictions(ctx.dir / ("predictions_" + split.name + ".tsv"), p.glue->labels, pred);
    for (const auto& [k, v] : eval::glue_task_metrics(f.task, pred, split.labels)) {
      results[split.name][k] = v;
      auto r = base_row(p, model->bert, ctx.run_id, ctx.seed, ctx.dir);
      r.task = f.task;
      r.split = split.name;
      r.metric = k;
      r.value = v;
      r.examples = static_cast<int64_t>(pred.size());
      rows.push_back(r);
      log::info("eval", "{} {} ({} examples), model of step {}: {} {:.2f}", f.task, split.name, pred.size(), kept_step,
                k, v);
    }
  }
  results["rows"] = result_rows_json(rows);  // what --resume puts back if a kill keeps them from the results file
  write_file_atomic(ctx.dir / "results.json", dump_json(results, 2) + "\n");  // rows hold paths: dump_json
  return rows;
}

}  // namespace

std::vector<eval::ResultRow> run_glue_seed(const Prepared& p, const SeedContext& ctx) {
  const auto& cfg = p.rc.cfg;
  const auto& f = cfg.finetune;
  const bool regression = p.glue->labels.empty();
  const int64_t outputs = regression ? 1 : static_cast<int64_t>(p.glue->labels.size());
  torch::manual_seed(static_cast<uint64_t>(ctx.seed));
  ClassifierModel model(cfg.model, outputs);
  load_encoder(model->bert, p, longest_input(p));
  model->to(ctx.device);
  model->bert->set_fused_attention(use_fused_attention(ctx.device, cfg.model.attention.backend));
  model->bert->set_activation_checkpointing(parse_recompute(cfg.train.activation_checkpointing));
  const TrainOptions t = finetune_schedule(cfg, static_cast<int64_t>(p.train_ids.size()));
  const std::string metric = selection_metric(f.task);
  std::optional<ModelKeeper> keeper;
  if (ctx.chief())
    keeper.emplace(ctx.dir / "model", SavedModelInfo{f.task, p.glue->labels, outputs, f.select, 0, metric, 0.0}, cfg,
                   cfg.data.tokenizer_model);
  GlueTrainTask task(p, model, t, ctx, keeper ? &*keeper : nullptr);
  const TrainOutcome trained = train_seed(*model, task, t, ctx);
  FinalEvaluation final_eval;  // seed_run.h
  final_eval.outputs = [&] { return task.eval_outputs(*ctx.dp); };
  final_eval.score = [&](const EvalOutputs& out) { return task.score(out); };
  final_eval.metric = metric;
  final_eval.record = [&](const EvalOutputs& out, int64_t kept_step) {
    return record_glue(p, model, ctx, trained, kept_step, out);
  };
  return finish_seed(p, ctx, trained, keeper ? &*keeper : nullptr, *model, final_eval);
}

}  // namespace rpe::finetune

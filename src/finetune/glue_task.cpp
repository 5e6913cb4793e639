// GLUE fine-tuning task, evaluation and outputs (see glue_task.h).
#include "finetune/glue_task.h"

#include <nlohmann/json.hpp>

#include "eval/glue_metrics.h"
#include "rpe/version.h"
#include "train/precision.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/log.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using nlohmann::json;

GlueTrainTask::GlueTrainTask(const Prepared& p, ClassifierModel model, const TrainOptions& t, const SeedContext& ctx)
    : ItemTask(static_cast<int64_t>(p.train_ids.size()), t, ctx.seed, ctx.dp->rank(), ctx.dp->world()),
      p_(p),
      model_(std::move(model)),
      regression_(p.glue->labels.empty()) {}

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
  s.tokens = t[1].logical_not().sum();
  return s;
}

namespace {

// Predictions on one dev split: class indices, or scores for regression.
std::vector<double> predict(const Prepared& p, ClassifierModel& model, const Prepared::Split& split,
                            const torch::Device& device) {
  const auto& f = p.rc.cfg.finetune;
  const bool regression = p.glue->labels.empty();
  torch::NoGradGuard no_grad;
  AutocastGuard autocast(device, p.rc.cfg.train.precision == "bf16");
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
  return pred;
}

// The GLUE submission format: index, prediction (label name, or the score for STS-B).
void write_predictions_tsv(const Prepared& p, const fs::path& file, const std::vector<double>& pred) {
  const bool regression = p.glue->labels.empty();
  std::string tsv = "index\tprediction\n";
  for (size_t i = 0; i < pred.size(); ++i)
    tsv += std::to_string(i) + "\t" +
           (regression ? fmt::format("{:.4f}", pred[i]) : p.glue->labels[static_cast<size_t>(pred[i])]) + "\n";
  write_file_atomic(file, tsv);
}

}  // namespace

std::vector<eval::ResultRow> run_glue_seed(const Prepared& p, const SeedContext& ctx) {
  const auto& cfg = p.rc.cfg;
  const auto& f = cfg.finetune;
  const bool regression = p.glue->labels.empty();
  torch::manual_seed(static_cast<uint64_t>(ctx.seed));
  ClassifierModel model(cfg.model, regression ? 1 : static_cast<int64_t>(p.glue->labels.size()));
  load_encoder(model->bert, p, longest_input(p));
  model->to(ctx.device);
  model->bert->set_fused_attention(use_fused_attention(ctx.device, cfg.model.attention.backend));
  const TrainOptions t = finetune_schedule(cfg, static_cast<int64_t>(p.train_ids.size()));
  GlueTrainTask task(p, model, t, ctx);
  train_seed(*model, task, t, ctx);
  if (!ctx.chief()) return {};

  std::vector<eval::ResultRow> rows;
  json results = {{"task", f.task}, {"seed", ctx.seed}, {"git_revision", kGitRevision}};
  for (const auto& split : p.dev) {
    const auto pred = predict(p, model, split, ctx.device);
    const auto m = eval::glue_task_metrics(f.task, pred, split.labels);
    write_predictions_tsv(p, ctx.dir / ("predictions_" + split.name + ".tsv"), pred);
    for (const auto& [k, v] : m) {
      results[split.name][k] = v;
      auto r = base_row(p, model->bert, ctx.run_id, ctx.seed);
      r.task = f.task;
      r.split = split.name;
      r.metric = k;
      r.value = v;
      r.examples = static_cast<int64_t>(pred.size());
      rows.push_back(r);
      log::info("eval", "{} {} ({} examples): {} {:.2f}", f.task, split.name, pred.size(), k, v);
    }
  }
  write_file_atomic(ctx.dir / "results.json", results.dump(2) + "\n");
  return rows;
}

}  // namespace rpe::finetune

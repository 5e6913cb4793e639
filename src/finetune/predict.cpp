// Predictions of a saved fine-tuned model (see predict.h).
#include "finetune/predict.h"

#include <algorithm>
#include <chrono>
#include <system_error>
#include <vector>

#include "eval/glue_metrics.h"
#include "finetune/glue_task.h"
#include "finetune/saved_model.h"
#include "finetune/squad_task.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/input_file.h"
#include "util/log.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The files predict writes: --out and, for SQuAD, nbest_predictions.json beside it (and, for a
// 2.0 model, null_odds.json).
std::vector<fs::path> files_written(const PredictRequest& req, const Prepared& p) {
  std::vector<fs::path> files{req.out};
  if (p.squad) files.push_back(req.out.parent_path() / "nbest_predictions.json");
  if (p.squad && p.rc.cfg.finetune.squad_v2) files.push_back(req.out.parent_path() / "null_odds.json");
  return files;
}

// True when `a` and `b` name one file: the same inode when both exist (links, "./x", "../d/x"),
// else the same path once made absolute and normalised.
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  const fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) return false;
  const fs::path cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

// Whether `file` would land inside `folder` (both as they resolve: links followed, "./" gone).
bool inside(const fs::path& file, const fs::path& folder) {
  const fs::path f = same_file_key(file), d = same_file_key(folder_path(folder));  // "model/" -> model
  const auto [end, at] = std::mismatch(d.begin(), d.end(), f.begin(), f.end());
  return end == d.end() && at != f.end();
}

// Outputs that would destroy something, refused before the input is read (the run would still
// exit 0): the input they are made from (only the files this model's predictions write count:
// an input named null_odds.json beside a 1.1 model's --out is safe), a file of the saved model,
// one output over another (--out named as the n-best file beside it), or, without --overwrite,
// any file that is there already (another input's predictions, another run's n-best file).
void refuse_unsafe_outputs(const PredictRequest& req, const std::vector<fs::path>& files, const fs::path& model) {
  const std::string out = "--out " + req.out.string() + ": predict would write ";
  for (size_t i = 0; i < files.size(); ++i) {
    const fs::path& f = files[i];
    if (same_file(f, req.input))
      throw UserError(out + f.string() + ", which is the --input file " + req.input.string() + "; choose another --out");
    if (inside(f, model))
      throw UserError(out + f.string() + " inside the --model folder " + model.string() + "; choose another --out");
    for (size_t j = 0; j < i; ++j)
      if (same_file(f, files[j]))
        throw UserError(out + f.string() + " beside it, the name --out has; choose another --out");
    std::error_code ec;
    if (!req.overwrite && fs::exists(f, ec))
      throw UserError(out + f.string() + ", which exists; pass --overwrite to replace it");
  }
}

// The saved model's config and the tokenizer it carries.
Prepared prepared_for(const SavedModel& saved, const std::string& device) {
  Prepared p;
  p.rc.cfg = saved.cfg;
  if (!device.empty()) p.rc.cfg.train.device = device;
  p.tok = make_tokenizer(p.rc.cfg.data, saved.cfg.data.tokenizer_model);
  // A tokenizer.model swapped in the folder would fail in the first batch's embedding lookup.
  require_tokenizer_fits(*p.tok, saved.cfg.data.tokenizer_model, p.rc.cfg.model.vocab_size);
  p.squad = saved.info.squad();
  return p;
}

PredictOutcome predict_squad_file(Prepared& p, const SavedModel& saved, const PredictRequest& req,
                                  const torch::Device& device) {
  const auto& f = p.rc.cfg.finetune;
  p.dev_ex = read_squad(req.input, /*answers_optional=*/true);
  if (!f.squad_v2)  // a 1.1 model never answers ""
    refuse_unanswerable(req.input.string(), p.dev_ex,
                        "this model was fine-tuned on SQuAD 1.1 and never predicts no answer; use a model fine-tuned "
                        "with finetune.squad_v2: true");
  p.dev_f = make_squad_features(p.dev_ex, *p.tok, SquadFeatureOptions{f.max_seq_len, f.doc_stride, f.max_query_len},
                                &p.dev_off);
  QaModel model(p.rc.cfg.model);
  load_saved_weights(saved, *model);
  model->bert->position->input_embeddings(longest_input(p));  // refuses inputs longer than a learned table
  model->to(device);
  model->bert->set_fused_attention(use_fused_attention(device, p.rc.cfg.model.attention.backend));
  log::info("predict", "{}: {} questions -> {} windows", req.input.string(), p.dev_ex.size(), p.dev_f.size());
  const auto preds = predict_squad(p, model, device);
  write_squad_predictions(req.out, preds, f.squad_v2);
  PredictOutcome out{saved.info.task, static_cast<int64_t>(p.dev_ex.size()), {}, {}};
  // Scored on the questions that carry answers (or is_impossible): in a partly labelled file
  // the others would count as wrong (1.1) or as unanswerable gold (2.0).
  const size_t all = p.dev_ex.size();
  std::erase_if(p.dev_ex, [](const SquadExample& e) { return e.answers.empty() && !e.impossible; });
  if (!p.dev_ex.empty()) {
    if (p.dev_ex.size() < all)
      log::warn("predict", "{}: {} of {} questions carry no answers: the scores are of the {} that do",
                req.input.string(), all - p.dev_ex.size(), all, p.dev_ex.size());
    eval::SquadScores scores;
    out.metrics = score_squad(p, preds, scores);
  }
  return out;
}

PredictOutcome predict_glue_file(Prepared& p, const SavedModel& saved, const PredictRequest& req,
                                 const torch::Device& device) {
  const auto& f = p.rc.cfg.finetune;
  p.glue = &glue_task(saved.info.task);
  const GlueInputs in = read_glue_inputs(req.input, *p.glue);
  std::vector<std::vector<int64_t>> ids;
  std::vector<double> gold;
  for (const auto& ex : in.examples) {
    ids.push_back(encode_pair(*p.tok, ex.a, ex.b, p.glue->text_b >= 0, f.max_seq_len));
    gold.push_back(ex.label);
  }
  p.train_ids = ids;  // longest_input() looks here
  ClassifierModel model(p.rc.cfg.model, saved.info.outputs);
  load_saved_weights(saved, *model);
  model->bert->position->input_embeddings(longest_input(p));
  model->to(device);
  model->bert->set_fused_attention(use_fused_attention(device, p.rc.cfg.model.attention.backend));
  log::info("predict", "{}: {} {} examples ({})", req.input.string(), in.examples.size(), p.glue->name,
            in.labelled ? "labelled" : "unlabelled");
  const auto pred = predict_glue(p, model, ids, device);
  write_glue_predictions(req.out, saved.info.labels, pred, in.index);
  PredictOutcome out{saved.info.task, static_cast<int64_t>(pred.size()), {}, {}};
  if (in.labelled)
    for (const auto& [k, v] : eval::glue_task_metrics(p.glue->name, pred, gold)) out.metrics.emplace_back(k, v);
  return out;
}

}  // namespace

PredictOutcome predict(const PredictRequest& req) {
  const auto t0 = Clock::now();
  const SavedModel saved = read_saved_model(req.model_dir);
  if (saved.info.squad() != (req.kind == "squad"))
    throw UserError("--model " + req.model_dir.string() + ": a " + saved.info.task + " model; use `rpe-train predict " +
                    (saved.info.squad() ? "squad" : "glue") + "`");
  Prepared p = prepared_for(saved, req.device);
  const auto files = files_written(req, p);
  refuse_unsafe_outputs(req, files, saved.dir);
  // A bad --device is named as such, not as the saved config's train.device.
  const torch::Device device =
      training_device(p.rc.cfg.train.device, 0, /*group_ranks=*/0, req.device.empty() ? "train.device" : "--device");
  log::info("predict", "model {} ({}, step {}, {} {:.2f}) | device {} | precision {}", saved.dir.string(), saved.info.task,
            saved.info.step, saved.info.metric, saved.info.value, device.str(), p.rc.cfg.train.precision);
  PredictOutcome out = p.squad ? predict_squad_file(p, saved, req, device) : predict_glue_file(p, saved, req, device);
  out.files = files;
  log::info("predict", "{} examples in {:.1f}s", out.examples, std::chrono::duration<double>(Clock::now() - t0).count());
  return out;
}

}  // namespace rpe::finetune

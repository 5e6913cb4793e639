// rpe-train evaluate-squad: scores a predictions.json ({id: text}) against a SQuAD dev file
// exactly as the official evaluate-v1.1.py / evaluate-v2.0.py do, and prints their JSON
// (v2.0 with --na-probs: also best_exact/best_f1 and their thresholds).
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>

#include "cli/commands.h"
#include "eval/squad_metrics.h"
#include "finetune/squad_data.h"
#include "util/errors.h"
#include "util/json_text.h"

namespace rpe::cli {
namespace {
using nlohmann::json;

struct EvalArgs {
  std::string dataset, predictions, na_probs, version = "auto";
  double na_prob_thresh = eval::kNaProbThreshold;
};

json read_json_object(const std::string& file) {
  const json j = read_json_file(file);
  if (!j.is_object()) throw UserError(file + ": expected a JSON object {id: value}");
  return j;
}

int run_eval(const EvalArgs& a) {
  const auto examples = finetune::read_squad(a.dataset);
  bool v2 = a.version == "2.0";
  if (a.version == "auto") {
    const auto top = read_json_object(a.dataset);
    const std::string version = top.contains("version") && top["version"].is_string() ? top["version"].get<std::string>() : "";
    v2 = version == "v2.0" || version == "2.0";
  } else if (a.version != "1.1" && a.version != "2.0") {
    throw UserError("--version must be 1.1, 2.0 or auto");
  }
  std::map<std::string, std::string> preds;
  const json pred_json = read_json_object(a.predictions);  // kept alive: items() refers into it
  for (const auto& [id, v] : pred_json.items()) {
    if (!v.is_string()) throw UserError(a.predictions + ": prediction for id " + id + " is not a string");
    preds[id] = v.get<std::string>();
  }
  // In the file's order: the official script's threshold sweep breaks ties by it.
  eval::NaScores na_list;
  std::map<std::string, double> na;
  const auto na_json = a.na_probs.empty() ? nlohmann::ordered_json::object() : read_ordered_json_file(a.na_probs);
  if (!na_json.is_object()) throw UserError(a.na_probs + ": expected a JSON object {id: value}");
  for (const auto& [id, v] : na_json.items()) {
    if (!v.is_number()) throw UserError(a.na_probs + ": value for id " + id + " is not a number");
    na_list.emplace_back(id, v.get<double>());
    na[id] = v.get<double>();
  }
  const auto gold = finetune::squad_gold(examples);
  // The official script reads a score for every predicted question (a KeyError otherwise): a
  // file that lacks some would rank those questions as if scored 0, without a word.
  if (!a.na_probs.empty()) {
    if (!v2) throw UserError("--na-probs " + a.na_probs + ": no-answer scores are for SQuAD 2.0; the dataset is 1.1");
    int64_t missing = 0;
    std::string first;
    for (const auto& q : gold)
      if (preds.count(q.id) && !na.count(q.id) && missing++ == 0) first = q.id;
    if (missing)
      throw UserError(a.na_probs + ": no score for question " + first + " (" + std::to_string(missing) +
                      " predicted questions have none); give one for every question --predictions answers");
  }
  // A question without a prediction scores 0 (as in the official scripts, which print a line for
  // each): counted here on stderr, stdout keeping only the scores. None at all is another file's.
  size_t unanswered = 0;
  std::string first_unanswered;
  for (const auto& q : gold)
    if (!preds.count(q.id) && unanswered++ == 0) first_unanswered = q.id;
  if (!gold.empty() && unanswered == gold.size())
    throw UserError(a.predictions + ": no prediction for any of the " + std::to_string(gold.size()) + " questions of " +
                    a.dataset + " (predictions for another file?)");
  if (unanswered > 0)
    std::cerr << "warning: " << a.predictions << ": " << unanswered << " of " << gold.size()
              << " questions have no prediction (the first: " << first_unanswered << "); each scores 0\n";
  json out;
  if (!v2) {
    const auto s = eval::evaluate_squad_v1(gold, preds);
    out = {{"exact_match", s.exact}, {"f1", s.f1}};
  } else {
    if (!std::isfinite(a.na_prob_thresh)) throw UserError("--na-prob-thresh must be a finite number");
    const auto s = eval::evaluate_squad_v2(gold, preds, na_list, a.na_prob_thresh);
    out = {{"exact", s.exact}, {"f1", s.f1}, {"total", s.total}};
    if (s.has_ans_total) out.update(json{{"HasAns_exact", s.has_ans_exact}, {"HasAns_f1", s.has_ans_f1}, {"HasAns_total", s.has_ans_total}});
    if (s.no_ans_total) out.update(json{{"NoAns_exact", s.no_ans_exact}, {"NoAns_f1", s.no_ans_f1}, {"NoAns_total", s.no_ans_total}});
    if (s.has_thresh)
      out.update(json{{"best_exact", s.best_exact}, {"best_exact_thresh", s.best_exact_thresh},
                  {"best_f1", s.best_f1}, {"best_f1_thresh", s.best_f1_thresh}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
}  // namespace

void add_evaluate(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("evaluate-squad", "Score a SQuAD predictions.json like the official scripts");
  auto a = std::make_shared<EvalArgs>();
  cmd->add_option("--dataset", a->dataset, "SQuAD JSON with the gold answers")->required();
  cmd->add_option("--predictions", a->predictions, "predictions.json ({id: text})")->required();
  cmd->add_option("--na-probs", a->na_probs, "v2.0: no-answer scores ({id: score}, e.g. null_odds.json)");
  cmd->add_option("--na-prob-thresh", a->na_prob_thresh,
                  "v2.0 with --na-probs: a score above this counts as predicting \"\" (official default 1.0)");
  cmd->add_option("--version", a->version, "1.1, 2.0 or auto (from the dataset's version field)");
  cmd->callback([&run, a] { run = [a] { return run_eval(*a); }; });
}

}  // namespace rpe::cli

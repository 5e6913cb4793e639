// SQuAD metrics exactly as the official evaluation scripts define them (Rajpurkar et al.
// 2016, v1.1; 2018, v2.0):
//   normalize(s) = collapse_whitespace(drop_articles(drop_ascii_punctuation(lower(s))))
//   EM(p, g) = [normalize(p) == normalize(g)]
//   F1(p, g) = 2 P R / (P + R), P = |T(p) ∩ T(g)| / |T(p)|, R = |T(p) ∩ T(g)| / |T(g)|,
//              T = whitespace tokens of normalize(.), ∩ a multiset intersection,
//   each question scores the max over its gold answers; the dataset score is 100 * mean.
// v1.1: F1 is 0 when nothing overlaps (even if both are empty). v2.0: unanswerable gold
// becomes [""], an empty side scores [both empty]; HasAns/NoAns subsets; and the null
// threshold sweep (best_exact/best_f1 with their thresholds) of the v2.0 script.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace rpe::eval {

// The official normaliser, with Python's Unicode semantics for lower(), \b and split().
std::string normalize_answer(const std::string& s);
// Whitespace tokens of normalize_answer(s).
std::vector<std::string> answer_tokens(const std::string& s);

double exact_match(const std::string& prediction, const std::string& gold);
double f1_v1(const std::string& prediction, const std::string& gold);  // 0 when no overlap
double f1_v2(const std::string& prediction, const std::string& gold);  // empty sides: [both empty]

struct SquadGold {
  std::string id;
  std::vector<std::string> answers;  // gold texts; empty for an unanswerable (v2.0) question
};

struct SquadScores {
  double exact = 0, f1 = 0;
  int64_t total = 0;
  // v2.0 only (has_ans_total + no_ans_total == total).
  double has_ans_exact = 0, has_ans_f1 = 0, no_ans_exact = 0, no_ans_f1 = 0;
  int64_t has_ans_total = 0, no_ans_total = 0;
  double best_exact = 0, best_exact_thresh = 0, best_f1 = 0, best_f1_thresh = 0;
  bool has_thresh = false;
};

// v1.1 evaluation: a missing prediction counts 0.
SquadScores evaluate_squad_v1(const std::vector<SquadGold>& gold, const std::map<std::string, std::string>& preds);

// v2.0 evaluation. `na_probs` (may be empty) are the no-answer scores of the --na-prob-file
// option, in that file's order: with them, as in the official script, a question scored above
// `na_prob_thresh` (its --na-prob-thresh, default 1.0) counts as predicted unanswerable in
// exact/f1, and the best thresholds are searched, sweeping the scores in increasing order and
// equal ones in the file's order (the script's stable sort of its keys; the best threshold can
// depend on it). Fine-tuning passes finetune.null_threshold, the threshold its predictions were
// made at, so the scores are those of the predictions written.
inline constexpr double kNaProbThreshold = 1.0;
using NaScores = std::vector<std::pair<std::string, double>>;
SquadScores evaluate_squad_v2(const std::vector<SquadGold>& gold, const std::map<std::string, std::string>& preds,
                              const NaScores& na_probs = {}, double na_prob_thresh = kNaProbThreshold);

}  // namespace rpe::eval

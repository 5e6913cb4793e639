// SQuAD post-processing as the reference BERT implementation does it (run_squad.py,
// write_predictions): per window, the n_best highest start and end logits form candidate
// spans (s <= e, e - s + 1 <= max_answer_len, both in the context, s in its best window);
// score(s, e) = start_logit[s] + end_logit[e]; the best span over all windows of a question
// wins and its text is cut from the original context by byte offsets. SQuAD 2.0: the null
// score is min over windows of start_logit[0] + end_logit[0]; the answer is "" when
// null_score - best_span_score > null_threshold. The n-best list (nbest_predictions.json) keeps
// the n_best highest-scoring distinct texts (v2.0: plus the null answer ""), each with the
// softmax of the scores over the list as its probability.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "finetune/squad_data.h"

namespace rpe::finetune {

struct SquadPostOptions {
  int64_t n_best = 20, max_answer_len = 30;
  bool v2 = false;
  double null_threshold = 0.0;
};

struct NBestEntry {
  std::string text;
  double probability = 0.0;
  double start_logit = 0.0, end_logit = 0.0;
};

struct SquadPrediction {
  std::string text;          // the answer written to predictions.json
  std::string best_span;     // best non-null span text
  double score_diff = 0.0;   // v2: null score - best span score (the no-answer score, "na_prob")
  std::vector<NBestEntry> nbest;  // best first
};

// start/end logits: one [L_f] vector per feature (same order as `features`).
std::map<std::string, SquadPrediction> squad_predictions(
    const std::vector<SquadExample>& examples, const std::vector<SquadFeature>& features,
    const std::vector<std::vector<std::pair<int32_t, int32_t>>>& offsets,
    const std::vector<std::vector<float>>& start_logits, const std::vector<std::vector<float>>& end_logits,
    const SquadPostOptions& o);

}  // namespace rpe::finetune

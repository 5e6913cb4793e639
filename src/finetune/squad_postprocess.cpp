// SQuAD n-best span search and answer text recovery (see squad_postprocess.h).
#include "finetune/squad_postprocess.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>

#include "util/unicode_space.h"

namespace rpe::finetune {
namespace {

std::vector<int64_t> top_indices(const std::vector<float>& v, int64_t n) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  const auto k = std::min<int64_t>(n, static_cast<int64_t>(idx.size()));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
  });
  idx.resize(k);
  return idx;
}


struct Candidate {
  double score;
  int64_t feature, start, end;  // start/end: context token indices
};

}  // namespace

std::map<std::string, SquadPrediction> squad_predictions(
    const std::vector<SquadExample>& examples, const std::vector<SquadFeature>& features,
    const std::vector<std::vector<std::pair<int32_t, int32_t>>>& offsets,
    const std::vector<std::vector<float>>& start_logits, const std::vector<std::vector<float>>& end_logits,
    const SquadPostOptions& o) {
  std::vector<std::vector<int64_t>> by_example(examples.size());
  for (size_t f = 0; f < features.size(); ++f) by_example[features[f].example].push_back(static_cast<int64_t>(f));

  std::map<std::string, SquadPrediction> out;
  for (size_t e = 0; e < examples.size(); ++e) {
    std::vector<Candidate> cands;
    double null_score = std::numeric_limits<double>::infinity();
    double null_start = 0.0, null_end = 0.0;  // the logits at [CLS] of the window with the least null score
    for (int64_t fi : by_example[e]) {
      const auto& f = features[fi];
      const auto& sl = start_logits[fi];
      const auto& el = end_logits[fi];
      if (static_cast<double>(sl[0]) + el[0] < null_score) {
        null_score = static_cast<double>(sl[0]) + el[0];
        null_start = sl[0];
        null_end = el[0];
      }
      const int64_t lo = f.context_offset, hi = f.context_offset + f.doc_len;  // context positions [lo, hi)
      for (int64_t s : top_indices(sl, o.n_best)) {
        for (int64_t t : top_indices(el, o.n_best)) {
          if (s < lo || s >= hi || t < lo || t >= hi) continue;
          if (t < s || t - s + 1 > o.max_answer_len) continue;
          if (!f.max_context[s - lo]) continue;
          cands.push_back({static_cast<double>(sl[s]) + el[t], fi, f.doc_start + s - lo, f.doc_start + t - lo});
        }
      }
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    // Distinct non-empty texts in score order: the first is the answer, the first n_best the list.
    SquadPrediction p;
    double best_score = -std::numeric_limits<double>::infinity();
    const auto& ctx = examples[e].context;
    std::vector<double> scores;
    for (const auto& c : cands) {
      if (static_cast<int64_t>(p.nbest.size()) >= o.n_best) break;
      const int64_t b = offsets[e][c.start].first, end = offsets[e][c.end].second;
      // Python's strip(): a sentencepiece span starts at its space, maybe a no-break one.
      std::string text(strip_space(std::string_view(ctx).substr(b, end - b)));
      if (text.empty()) continue;
      if (std::any_of(p.nbest.begin(), p.nbest.end(), [&](const NBestEntry& n) { return n.text == text; })) continue;
      const auto& f = features[c.feature];
      const int64_t s_pos = c.start - f.doc_start + f.context_offset, e_pos = c.end - f.doc_start + f.context_offset;
      p.nbest.push_back({text, 0.0, start_logits[c.feature][s_pos], end_logits[c.feature][e_pos]});
      scores.push_back(c.score);
    }
    if (!p.nbest.empty()) {
      p.best_span = p.nbest.front().text;
      best_score = scores.front();
    } else {
      p.best_span = "empty";  // what the reference writes when nothing qualifies
    }
    if (o.v2) {
      // No valid span at all: a large finite no-answer score (JSON has no infinity).
      p.score_diff = std::isfinite(best_score) ? null_score - best_score : 1e9;
      p.text = (p.score_diff > o.null_threshold) ? "" : p.best_span;
      p.nbest.push_back({"", 0.0, null_start, null_end});
      scores.push_back(null_score);
    } else {
      p.text = p.best_span;
      if (p.nbest.empty()) {
        p.nbest.push_back({"empty", 0.0, 0.0, 0.0});
        scores.push_back(0.0);
      }
    }
    // Probabilities: softmax of the entries' scores, shifted by the largest for stability.
    const double top = *std::max_element(scores.begin(), scores.end());
    double total = 0.0;
    for (size_t i = 0; i < scores.size(); ++i) total += (p.nbest[i].probability = std::exp(scores[i] - top));
    for (auto& n : p.nbest) n.probability /= total;
    std::stable_sort(p.nbest.begin(), p.nbest.end(),
                     [](const NBestEntry& a, const NBestEntry& b) { return a.probability > b.probability; });
    out[examples[e].id] = std::move(p);
  }
  return out;
}

}  // namespace rpe::finetune

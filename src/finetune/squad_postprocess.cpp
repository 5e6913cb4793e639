// SQuAD n-best span search and answer text recovery (see squad_postprocess.h).
#include "finetune/squad_postprocess.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

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

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
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
    for (int64_t fi : by_example[e]) {
      const auto& f = features[fi];
      const auto& sl = start_logits[fi];
      const auto& el = end_logits[fi];
      null_score = std::min(null_score, static_cast<double>(sl[0]) + el[0]);
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
    // The best non-empty text (the reference de-duplicates texts; the top one is all we need).
    SquadPrediction p;
    double best_score = -std::numeric_limits<double>::infinity();
    const auto& ctx = examples[e].context;
    for (const auto& c : cands) {
      const int64_t b = offsets[e][c.start].first, end = offsets[e][c.end].second;
      std::string text = trim(ctx.substr(b, end - b));
      if (text.empty()) continue;
      p.best_span = std::move(text);
      best_score = c.score;
      break;
    }
    if (p.best_span.empty()) p.best_span = "empty";  // what the reference writes when nothing qualifies
    if (o.v2) {
      // No valid span at all: a large finite no-answer score (JSON has no infinity).
      p.score_diff = std::isfinite(best_score) ? null_score - best_score : 1e9;
      p.text = (p.score_diff > o.null_threshold) ? "" : p.best_span;
    } else {
      p.text = p.best_span;
    }
    out[examples[e].id] = std::move(p);
  }
  return out;
}

}  // namespace rpe::finetune

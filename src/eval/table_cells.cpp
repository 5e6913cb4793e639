// Result rows grouped into the cells of Tables 2-4 (see table_cells.h).
#include "eval/table_cells.h"

#include <algorithm>
#include <cmath>

#include "eval/pretrain_labels.h"

namespace rpe::eval {

Stat mean_std(const std::vector<double>& v) {
  Stat s;
  s.n = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(ss / static_cast<double>(v.size() - 1));
  }
  return s;
}

namespace tables_detail {

Values collect(const std::vector<ResultRow>& rows) {
  Values v;
  const auto pretrained = pretrained_model_labels(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    GroupKey g{r.method,         r.k,      r.pretrain_max_len,
               r.finetune_max_len, pretrained[i], r.select,
               r.position_buckets, swapped_method(r) ? r.pretrain_method : "", finetune_run_name(r)};
    v[{g, r.task, r.split, r.metric}][r.run_id + "#" + std::to_string(r.seed)] = {r.value, r.examples};
  }
  return v;
}

// Mean ± std of a cell over the evaluations of the whole dev set: those that scored fewer
// examples (finetune.max_eval_examples, a debugging run) are another quantity, not pooled;
// each one left out is named in `left_out`.
Pooled pool_most_examples(const std::map<std::string, Scored>& evals) {
  Pooled p;
  for (const auto& [_, x] : evals) p.most = std::max(p.most, x.examples);
  for (const auto& [run, x] : evals) {
    if (x.examples == p.most) p.values.push_back(x.value);
    else p.left_out.emplace_back(run, x.examples);
  }
  return p;
}

std::optional<Stat> lookup(const Values& v, const GroupKey& g, const Column& c, std::vector<std::string>& left_out) {
  auto it = v.find({g, c.task, c.split, c.metric});
  if (it == v.end()) return std::nullopt;
  const Pooled p = pool_most_examples(it->second);
  for (const auto& [run, examples] : p.left_out) {
    const std::string note = run + " (" + c.task + " " + c.split + ": " + std::to_string(examples) + " of " +
                             std::to_string(p.most) + " examples)";
    if (std::find(left_out.begin(), left_out.end(), note) == left_out.end()) left_out.push_back(note);
  }
  Stat s = mean_std(p.values);
  s.examples = p.most;
  return s;
}

}  // namespace tables_detail
}  // namespace rpe::eval

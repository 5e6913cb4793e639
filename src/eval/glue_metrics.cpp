// GLUE metrics (see glue_metrics.h).
#include "eval/glue_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/errors.h"

namespace rpe::eval {
namespace {
struct Confusion {
  double tp = 0, tn = 0, fp = 0, fn = 0;
};
Confusion confusion(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  require(pred.size() == gold.size(), "metrics: prediction and label counts differ");
  Confusion c;
  for (size_t i = 0; i < pred.size(); ++i) {
    const bool p = pred[i] == 1, g = gold[i] == 1;
    if (p && g) ++c.tp;
    else if (!p && !g) ++c.tn;
    else if (p) ++c.fp;
    else ++c.fn;
  }
  return c;
}
}  // namespace

double accuracy(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  require(pred.size() == gold.size(), "metrics: prediction and label counts differ");
  if (pred.empty()) return 0.0;
  int64_t right = 0;
  for (size_t i = 0; i < pred.size(); ++i) right += pred[i] == gold[i];
  return static_cast<double>(right) / static_cast<double>(pred.size());
}

double binary_f1(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  const auto c = confusion(pred, gold);
  const double denom = 2 * c.tp + c.fp + c.fn;
  return denom > 0 ? 2 * c.tp / denom : 0.0;
}

double matthews_corr(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  const auto c = confusion(pred, gold);
  const double denom = (c.tp + c.fp) * (c.tp + c.fn) * (c.tn + c.fp) * (c.tn + c.fn);
  return denom > 0 ? (c.tp * c.tn - c.fp * c.fn) / std::sqrt(denom) : 0.0;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  require(x.size() == y.size(), "metrics: prediction and label counts differ");
  const double n = static_cast<double>(x.size());
  if (x.size() < 2) return 0.0;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  // Clamped: points exactly on a line can round to |r| = 1 + 2^-52, a percentage past 100.
  return (sxx > 0 && syy > 0) ? std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0) : 0.0;
}

std::vector<double> average_ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;  // ranks i+1..j+1
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = mean_rank;
    i = j + 1;
  }
  return ranks;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  return pearson(average_ranks(x), average_ranks(y));
}

std::map<std::string, double> glue_task_metrics(const std::string& task, const std::vector<double>& pred,
                                                const std::vector<double>& gold) {
  if (task == "stsb") return {{"pearson", 100.0 * pearson(pred, gold)}, {"spearman", 100.0 * spearman(pred, gold)}};
  std::vector<int64_t> p(pred.begin(), pred.end()), g(gold.begin(), gold.end());
  if (task == "cola") return {{"mcc", 100.0 * matthews_corr(p, g)}};
  if (task == "mrpc" || task == "qqp") return {{"f1", 100.0 * binary_f1(p, g)}, {"accuracy", 100.0 * accuracy(p, g)}};
  return {{"accuracy", 100.0 * accuracy(p, g)}};
}

}  // namespace rpe::eval

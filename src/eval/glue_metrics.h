// GLUE metrics as the benchmark defines them (Wang et al. 2019), same formulas as
// scikit-learn / scipy:
//   accuracy = mean[y_hat == y]
//   F1 (positive class 1) = 2 TP / (2 TP + FP + FN)
//   MCC = (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)), 0 when a factor is 0
//   Pearson r = cov(x, y) / (sd(x) sd(y));  Spearman rho = Pearson r of average ranks.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace rpe::eval {

double accuracy(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold);
double binary_f1(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold);  // positive class = 1
double matthews_corr(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold);
double pearson(const std::vector<double>& x, const std::vector<double>& y);
double spearman(const std::vector<double>& x, const std::vector<double>& y);
// Ranks 1..n, ties get the mean of the ranks they span (scipy's "average").
std::vector<double> average_ranks(const std::vector<double>& x);

// The official metrics of a GLUE task (name as finetune.task): metric name -> value in %
// (MCC, Pearson, Spearman x100 as the GLUE leaderboard prints them).
std::map<std::string, double> glue_task_metrics(const std::string& task, const std::vector<double>& pred,
                                                const std::vector<double>& gold);

}  // namespace rpe::eval

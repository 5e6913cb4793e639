// GLUE metrics against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "eval/glue_metrics.h"

using namespace rpe::eval;

TEST(GlueMetrics, ConfusionBasedHandComputed) {
  // TP 3, TN 2, FP 1, FN 1.
  const std::vector<int64_t> gold = {1, 1, 1, 1, 0, 0, 0};
  const std::vector<int64_t> pred = {1, 1, 1, 0, 0, 0, 1};
  EXPECT_NEAR(accuracy(pred, gold), 5.0 / 7.0, 1e-12);
  EXPECT_NEAR(binary_f1(pred, gold), 6.0 / 8.0, 1e-12);
  EXPECT_NEAR(matthews_corr(pred, gold), (3.0 * 2 - 1.0 * 1) / std::sqrt(4.0 * 4 * 3 * 3), 1e-12);
  // A constant predictor: MCC is defined as 0.
  EXPECT_EQ(matthews_corr({1, 1, 1}, {1, 0, 1}), 0.0);
}

TEST(GlueMetrics, CorrelationsHandComputed) {
  const std::vector<double> x = {1, 2, 3, 4}, y = {2, 4, 5, 4};
  // dx = (-1.5, -.5, .5, 1.5), dy = (-1.75, .25, 1.25, .25): sxy 3.5, sxx 5, syy 4.75.
  EXPECT_NEAR(pearson(x, y), 3.5 / std::sqrt(5 * 4.75), 1e-12);
  // ranks of y with a tie: (1, 2.5, 4, 2.5).
  const auto r = average_ranks(y);
  EXPECT_EQ(r, (std::vector<double>{1, 2.5, 4, 2.5}));
  EXPECT_NEAR(spearman(x, y), 3.0 / std::sqrt(5 * 4.5), 1e-12);
  // A constant prediction (a collapsed STS-B regressor) has no correlation defined: 0, as MCC's.
  EXPECT_EQ(pearson({3, 3, 3, 3}, y), 0.0);
  EXPECT_EQ(spearman({3, 3, 3, 3}, y), 0.0);
}

// Predictions exactly on a line correlate by exactly +-1, but sxy / sqrt(sxx * syy) rounds past
// 1 for about a fifth of such sets: a result line of 100.00000000000011 would then be refused
// by the results reader's range check. The correlation is clamped to [-1, 1].
TEST(GlueMetrics, PearsonOfPointsOnALineStaysWithinOne) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(-5.0, 5.0);
  for (int trial = 0; trial < 200; ++trial) {
    const double a = trial % 2 ? u(gen) : -u(gen), b = u(gen);
    std::vector<double> x(2 + trial % 30), y;
    for (auto& v : x) {
      v = u(gen);
      y.push_back(a * v + b);
    }
    const double r = pearson(x, y);
    ASSERT_LE(std::fabs(r), 1.0) << "trial " << trial << ": " << r - (r > 0 ? 1 : -1);
    ASSERT_NEAR(std::fabs(r), 1.0, 1e-12) << "trial " << trial;
  }
}

TEST(GlueMetrics, TaskMetricNames) {
  const std::vector<double> gold = {1, 0, 1, 0}, pred = {1, 0, 0, 0};
  EXPECT_EQ(glue_task_metrics("cola", pred, gold).count("mcc"), 1u);
  const auto mrpc = glue_task_metrics("mrpc", pred, gold);
  EXPECT_NEAR(mrpc.at("f1"), 100.0 * 2.0 / 3.0, 1e-9);
  EXPECT_NEAR(mrpc.at("accuracy"), 75.0, 1e-9);
  EXPECT_EQ(glue_task_metrics("stsb", {1, 2, 3}, {1, 2, 3}).at("spearman"), 100.0);
  EXPECT_NEAR(glue_task_metrics("rte", pred, gold).at("accuracy"), 75.0, 1e-9);
}

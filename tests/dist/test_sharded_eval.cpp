// Held-out passes split over the ranks (dist/sharded_eval.h): each rank computes the batches
// dealt to it, batch k to rank k mod W, with the same boundaries as one process, and every rank
// ends with every row, exactly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include "dist/sharded_eval.h"
#include "launch_ranks.h"
#include "util/errors.h"

namespace rpe {
namespace {

using Calls = std::vector<std::pair<int64_t, int64_t>>;

// Item i's row: [i + 0.25, -3i - 0.5] (fractions and signs: a sum that was not exact shows).
torch::Tensor item_rows(int64_t begin, int64_t end) {
  const auto i = torch::arange(begin, end, torch::kDouble).unsqueeze(1);
  return torch::cat({i + 0.25, -3 * i - 0.5}, 1);
}

torch::Tensor gather(dist::DataParallel& dp, int64_t n, int64_t batch, Calls& calls) {
  return dist::gather_batch_rows(dp, n, batch, {2}, torch::kDouble, [&](int64_t b, int64_t e) {
    calls.emplace_back(b, e);
    return item_rows(b, e).to(torch::kFloat);  // any dtype in, the asked one out
  });
}

TEST(ShardedEval, OneProcessComputesEveryBatchInOrder) {
  dist::DataParallel one_process;
  Calls calls;
  const auto all = gather(one_process, 10, 3, calls);
  EXPECT_EQ(calls, (Calls{{0, 3}, {3, 6}, {6, 9}, {9, 10}}));
  EXPECT_TRUE(torch::equal(all, item_rows(0, 10)));
  EXPECT_EQ(dist::items_of_rank(one_process, 10, 3), 10);
  Calls none;
  EXPECT_EQ(gather(one_process, 0, 3, none).sizes(), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(none.empty());
}

TEST(ShardedEval, RowsOfTheWrongShapeAreRefused) {
  dist::DataParallel one_process;
  EXPECT_THROW(dist::gather_batch_rows(one_process, 4, 2, {2}, torch::kDouble,
                                       [](int64_t b, int64_t e) { return torch::zeros({e - b, 3}); }),
               std::exception);
}

// One rank of ShardedEval.EachRankComputesItsBatchesOnTwoGlooRanks.
TEST(ShardedEvalWorker, DISABLED_EachRankComputesItsBatches) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of ShardedEval.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, 25.0);
  // 11 items in batches of 3: batches 0 and 2 are rank 0's, 1 and 3 (the short one) rank 1's.
  Calls calls;
  const auto all = gather(dp, 11, 3, calls);
  EXPECT_EQ(calls, env.rank == 0 ? (Calls{{0, 3}, {6, 9}}) : (Calls{{3, 6}, {9, 11}}));
  EXPECT_EQ(dist::items_of_rank(dp, 11, 3), env.rank == 0 ? 6 : 5);
  EXPECT_TRUE(torch::equal(all, item_rows(0, 11)));
  // Fewer batches than ranks: rank 1 computes nothing and still ends with every row.
  Calls few;
  EXPECT_TRUE(torch::equal(gather(dp, 2, 3, few), item_rows(0, 2)));
  EXPECT_EQ(few, env.rank == 0 ? (Calls{{0, 2}}) : Calls{});
  // A rank whose share fails stops every rank at once (it used to leave the others in the
  // all-reduce until the timeout): rank 1's own error, rank 0 told why.
  std::string error;
  try {
    dist::gather_batch_rows(dp, 11, 3, {2}, torch::kDouble, [&](int64_t b, int64_t e) {
      if (env.rank == 1) throw UserError("window 4 is bad");
      return item_rows(b, e);
    });
  } catch (const UserError& e) {
    error = e.what();
  }
  EXPECT_EQ(error, env.rank == 1 ? "window 4 is bad"
                                 : "rank 1 stopped while computing its share of a held-out pass: window 4 is bad");
}

TEST(ShardedEval, EachRankComputesItsBatchesOnTwoGlooRanks) {
  test::run_two_ranks("ShardedEvalWorker.DISABLED_EachRankComputesItsBatches", "sharded_eval");
}

}  // namespace
}  // namespace rpe

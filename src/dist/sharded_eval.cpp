// Held-out passes split over the ranks (see sharded_eval.h).
#include "dist/sharded_eval.h"

#include <algorithm>
#include <vector>

#include "dist/all_or_none.h"
#include "util/errors.h"

namespace rpe::dist {

int64_t items_of_rank(const DataParallel& dp, int64_t n, int64_t batch) {
  int64_t items = 0;
  for (int64_t k = 0; k * batch < n; ++k)
    if (owns_batch(dp, k)) items += std::min(n, (k + 1) * batch) - k * batch;
  return items;
}

torch::Tensor gather_batch_rows(DataParallel& dp, int64_t n, int64_t batch, torch::IntArrayRef row_shape,
                                torch::ScalarType dtype, const std::function<torch::Tensor(int64_t, int64_t)>& rows) {
  require(n >= 0 && batch >= 1, "gather_batch_rows: n >= 0 and batch >= 1");
  std::vector<int64_t> shape{n};
  shape.insert(shape.end(), row_shape.begin(), row_shape.end());
  // The collective's buffer lives where the backend wants it (CUDA for NCCL); one process keeps
  // it on the CPU, where the caller reads it.
  const torch::Device where = dp.distributed() ? dp.device() : torch::Device(torch::kCPU);
  auto all = torch::zeros(shape, torch::TensorOptions(dtype).device(where));
  // A rank whose share fails (out of memory, bad input) stops every rank at once, rather than
  // leaving the others in the all-reduce until train.dist_timeout_s.
  all_or_none(dp, "computing its share of a held-out pass", [&] {
    for (int64_t k = 0; k * batch < n; ++k) {
      if (!owns_batch(dp, k)) continue;
      const int64_t begin = k * batch, end = std::min(n, begin + batch);
      auto part = all.narrow(0, begin, end - begin);
      const torch::Tensor got = rows(begin, end);
      require(got.sizes() == part.sizes(), "gather_batch_rows: rows(begin, end) must be [end - begin, row_shape...]");
      part.copy_(got);
    }
  });
  dp.all_reduce_sum(all);  // each row is one rank's, the others add zeros
  return all.cpu();
}

}  // namespace rpe::dist

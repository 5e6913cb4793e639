// Held-out passes split over the ranks. A dev set (fine-tuning) or the held-out MLM sequences
// scored by rank 0 alone left the other ranks idle, waiting in a collective that gives up after
// train.dist_timeout_s. Instead the pass's batches are dealt round-robin: batch k, the items
// [k·B, min(n, (k+1)·B)), goes to rank k mod W. These are the batches one process runs, so each
// item's output is the one process's, bit for bit (sums over items, such as the MLM loss, add
// the ranks' parts in another order); one all-reduce then gives every rank every
// row: each rank writes its own rows into a zero tensor and the sum puts them in place (x + 0 is
// exact).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "dist/data_parallel.h"

namespace rpe::dist {

// Whether batch k of a split pass is this rank's.
inline bool owns_batch(const DataParallel& dp, int64_t k) { return k % dp.world() == dp.rank(); }

// Items of n, in batches of `batch`, that this rank computes.
int64_t items_of_rank(const DataParallel& dp, int64_t n, int64_t batch);

// The outputs of n items computed in batches of `batch`: `rows(begin, end)` gives items [begin,
// end) as a [end - begin, row_shape...] tensor (any device and dtype) and is called for this
// rank's batches only, in order. Returns [n, row_shape...] of `dtype` on the CPU, on every rank.
// A collective: every rank calls it with the same n, batch and row_shape (one all-reduce of
// n x row_shape elements on the group's device; none in a single process). When `rows` throws
// on a rank, every rank throws (dist/all_or_none.h) before that all-reduce.
torch::Tensor gather_batch_rows(DataParallel& dp, int64_t n, int64_t batch, torch::IntArrayRef row_shape,
                                torch::ScalarType dtype, const std::function<torch::Tensor(int64_t, int64_t)>& rows);

}  // namespace rpe::dist

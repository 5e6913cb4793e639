// Data-parallel replicas hold bitwise identical weights: every rank applies the same
// all-reduced gradient to the same parameters with the same kernels. A rank-dependent decision
// (a step one rank skipped alone), a non-deterministic kernel or a faulty GPU breaks that
// silently: the run goes on with each rank training its own model, and only rank 0's is saved.
// replica_difference compares a fingerprint of every parameter and floating-point buffer across
// the ranks, for the engine to call at each checkpoint (never inside a step).
#pragma once
#include <torch/torch.h>

#include <string>

#include "dist/data_parallel.h"

namespace rpe::dist {

// "" when every rank holds the same values, else which tensor first differs from rank 0's and
// on which rank ("'layers.3.attention.query.weight' differs between rank 0 and rank 2 (L1 norm
// ... vs ...)"). The fingerprint is each tensor's L1 and L2 norm (two multi-tensor kernels),
// gathered as one all-reduce of a [W, K, 2] float64 tensor in which each rank fills its own row
// (x + 0 is exact, so every rank receives the others' values unchanged) and read on the host:
// every rank gets the same answer, so all act on it together. "" in a single process.
std::string replica_difference(DataParallel& dp, const torch::nn::Module& model);

}  // namespace rpe::dist

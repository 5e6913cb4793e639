// Checks that the data-parallel replicas agree, which nothing else would notice:
// * at the start, on their inputs. Every rank reads the config, tokenizer, data and the
//   checkpoint to resume from by itself; across nodes that holds only where all of them see the
//   same files (a shared file system). A node with its own copies, or none, would train on other
//   data, or resume from another step and hang at the end: require_same_on_every_rank stops
//   such a run at once with one line (exit 2).
// * at each checkpoint, on their weights. Every rank applies the same all-reduced gradient to
//   the same parameters with the same kernels, so the replicas are bitwise equal; a
//   rank-dependent decision (a step one rank skipped alone), a non-deterministic kernel or a
//   faulty GPU breaks that silently, each rank training its own model and only rank 0's saved.
//   replica_difference compares a fingerprint of every parameter and floating-point buffer, for
//   the engine to call at each checkpoint (never inside a step).
#pragma once
#include <torch/torch.h>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dist/data_parallel.h"

namespace rpe::dist {

// "" when every rank holds the same values, else which tensor first differs from rank 0's and
// on which rank ("'layers.3.attention.query.weight' differs between rank 0 and rank 2 (L1 norm
// ... vs ...)"). The fingerprint is each tensor's L1 and L2 norm (two multi-tensor kernels),
// gathered as one all-reduce of a [W, K, 2] float64 tensor in which each rank fills its own row
// (x + 0 is exact, so every rank receives the others' values unchanged) and read on the host:
// every rank gets the same answer, so all act on it together. "" in a single process.
std::string replica_difference(DataParallel& dp, const torch::nn::Module& model);

// A value every rank must share, exact in a double (counts, steps, CRC-32s).
struct SharedFact {
  template <class Number, class = std::enable_if_t<std::is_arithmetic_v<Number>>>
  SharedFact(std::string what_, Number value_) : what(std::move(what_)), value(static_cast<double>(value_)) {}
  std::string what;  // "the training sequences", "the step it resumes from", ...
  double value;
};

// Throws UserError "ranks disagree on <what>: rank 0 has X, rank R has Y; ..." for the first
// fact where a rank differs from rank 0 (one DataParallel::gather of K doubles). Every rank
// gets the same answer, so all stop together. Nothing in a single process.
void require_same_on_every_rank(DataParallel& dp, const std::vector<SharedFact>& facts);

}  // namespace rpe::dist

// Cross-rank agreement: on the inputs at the start, on the weights at checkpoints (see replica_check.h).
#include "dist/replica_check.h"

#include <fmt/format.h>

#include <limits>
#include <vector>

#include "util/errors.h"

namespace rpe::dist {

std::string replica_difference(DataParallel& dp, const torch::nn::Module& model) {
  if (!dp.distributed()) return "";
  torch::NoGradGuard no_grad;
  std::vector<std::string> names;
  std::vector<torch::Tensor> tensors;
  for (const auto& p : model.named_parameters()) {
    names.push_back(p.key());
    tensors.push_back(p.value().detach());
  }
  for (const auto& b : model.named_buffers()) {
    if (!b.value().is_floating_point()) continue;
    names.push_back(b.key());
    tensors.push_back(b.value());
  }
  if (tensors.empty()) return "";
  const auto k = static_cast<int64_t>(tensors.size());
  // L1 and L2 norms accumulated in float64, one tensor at a time (no fp64 copy of the model):
  // fp32 sums would round away a divergence of one weight in a large table.
  std::vector<torch::Tensor> norms;
  for (const auto& t : tensors)
    for (const double ord : {1.0, 2.0})
      norms.push_back(torch::linalg_vector_norm(t, ord, c10::nullopt, false, torch::kDouble));
  auto mine = torch::stack(norms).view({-1, 2});  // [K, 2]
  // NaN != NaN: a tensor that is NaN on every rank agrees (the non-finite guard speaks of it).
  mine = torch::where(mine.isnan(), torch::full({}, std::numeric_limits<double>::max(), mine.options()), mine);
  auto all = torch::zeros({dp.world(), k, 2}, mine.options());  // [W, K, 2]
  all.select(0, dp.rank()).copy_(mine);
  dp.all_reduce_sum(all);
  const auto host = all.cpu().contiguous();
  const auto same = host.eq(host.select(0, 0).unsqueeze(0)).all(-1);  // [W, K]
  if (same.all().item<bool>()) return "";
  const auto first = same.logical_not().nonzero().select(0, 0);  // (rank, tensor)
  const int64_t r = first[0].item<int64_t>(), i = first[1].item<int64_t>();
  const auto a = host.select(0, 0).select(0, i), b = host.select(0, r).select(0, i);
  const bool l1_differs = a[0].item<double>() != b[0].item<double>();
  return fmt::format("'{}' differs between rank 0 and rank {} ({} norm {:.17g} vs {:.17g})", names[i], r,
                     l1_differs ? "L1" : "L2", a[l1_differs ? 0 : 1].item<double>(),
                     b[l1_differs ? 0 : 1].item<double>());
}

void require_same_on_every_rank(DataParallel& dp, const std::vector<SharedFact>& facts) {
  if (!dp.distributed() || facts.empty()) return;
  const auto k = facts.size();
  std::vector<double> mine;
  for (const auto& f : facts) mine.push_back(f.value);
  const auto rows = dp.gather(mine);  // [W, K], row r: rank r's values
  for (size_t r = 1; r < static_cast<size_t>(dp.world()); ++r)
    for (size_t i = 0; i < k; ++i) {
      const double mine = rows[r * k + i], chief = rows[i];
      if (mine == chief) continue;
      throw UserError(fmt::format(
          "ranks disagree on {}: rank 0 has {:.17g}, rank {} has {:.17g}; every rank must read the same config, "
          "tokenizer, data and run folder (across nodes: one file system they all share, the same command)",
          facts[i].what, chief, r, mine));
    }
}

}  // namespace rpe::dist

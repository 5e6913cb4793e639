// Figure 4's rows: one head's learned position table read at signed distances j - i.
// Each method lays its table out differently (its registry entry says how: DistanceTable in
// model/attention/registry.h), so the reading is by method, not guessed from the shape:
//   unsigned_scalars  [H|1, k+1]      slot min(|j-i|, k)            -> [2D+1, 1]
//   signed_scalars    [H|1, 2k+1]     slot clip(j-i, k) + k         -> [2D+1, 1]
//   signed_rows       [H|1, 2k+1, d]  slot clip(j-i, k) + k         -> [2D+1, d]
//   mirrored_rows     [H, 2k+1, d]    slot clip(i-j, k) + k (R_{i-j} W^R): mirrored
//   mirrored_shared   [2k+1, D]       slot clip(i-j, k) + k, one table for all heads
// Distances beyond k read the edge slot, as the model does.
#pragma once
#include <torch/torch.h>

#include <string>

#include "model/attention/registry.h"
#include "util/errors.h"

namespace rpe::cli {

// [2D+1, width] rows for distances -D..D (D = max_distance) of head `head` (ignored for a
// table shared across heads). UserError for methods without a per-distance table.
inline torch::Tensor weights_by_distance(const torch::Tensor& table, const std::string& method, int64_t head,
                                         int64_t max_distance) {
  if (!table.defined())
    throw UserError("--position-weights: method " + method + " has no learned per-distance table (nothing to plot)");
  const DistanceTable layout = method_info(method).distance_table;
  const bool scalar = layout == DistanceTable::unsigned_scalars || layout == DistanceTable::signed_scalars;
  const bool rows3 = layout == DistanceTable::signed_rows || layout == DistanceTable::mirrored_rows;
  auto shape_error = [&] {
    return UserError("--position-weights: method " + method + "'s table has shape " + c10::str(table.sizes()) +
                     ", not one row per distance (e.g. bucketed T5 bias)");
  };
  torch::Tensor rows;  // [slots, width] of the chosen head
  if (scalar || rows3) {
    if (table.dim() != (scalar ? 2 : 3)) throw shape_error();
    const int64_t h = table.size(0) == 1 ? 0 : head;  // one row-block when shared across heads
    if (h < 0 || h >= table.size(0))
      throw UserError("--head " + std::to_string(head) + ": the table has " + std::to_string(table.size(0)) + " heads");
    rows = scalar ? table[h].unsqueeze(-1) : table[h];  // [slots, 1] or [2k+1, d]
  } else if (layout == DistanceTable::mirrored_shared && table.dim() == 2) {
    rows = table;  // [2k+1, D]
  } else {
    throw shape_error();
  }
  const int64_t slots = rows.size(0);
  const bool unsigned_slots = layout == DistanceTable::unsigned_scalars;
  if (!unsigned_slots && slots % 2 != 1) throw shape_error();
  const int64_t k = unsigned_slots ? slots - 1 : (slots - 1) / 2;
  auto d = torch::arange(-max_distance, max_distance + 1, torch::kLong).clamp(-k, k);  // [2D+1], j - i clipped
  torch::Tensor slot;
  if (unsigned_slots) slot = d.abs();
  else if (layout == DistanceTable::mirrored_rows || layout == DistanceTable::mirrored_shared)
    slot = k - d;  // row s holds i - j = s - k
  else slot = d + k;
  return rows.detach().index_select(0, slot);  // [2D+1, width]
}

}  // namespace rpe::cli

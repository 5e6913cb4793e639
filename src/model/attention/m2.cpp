// m2: Huang et al. 2020, method 2 (eq. 13 with eq. 12): the signed version of m1,
//   e_ij = (q_i . k_j) * w_{clip(j-i,k)} / sqrt(d),   w = (w_{-k}, ..., w_k)
// per layer and head (share_across_heads: per layer), k = n - 1 by default (2n - 1
// scalars as in the paper). Scalars start at 1 (plain attention). Implemented by
// ScalarGateMethod (position_method.h), signed slots.
#include "model/attention/position_method.h"

namespace rpe {

std::shared_ptr<PositionMethodImpl> make_position_method_m2(const ModelOptions& o) {
  return std::make_shared<ScalarGateMethod>(o, "m2", /*signed_distance=*/true);
}

}  // namespace rpe

// m1: Huang et al. 2020, method 1 (eqs. 11–12): a learned scalar per absolute distance
// gates the content score multiplicatively,
//   e_ij = (q_i . k_j) * w_{|j-i|} / sqrt(d),   w = (w_0, ..., w_{n-1})
// per layer and head (share_across_heads: per layer). The paper does not clip; distances
// beyond the table (L > n, or max_relative = k set) use its last entry w_k. Scalars start
// at 1 so the method starts as plain attention. Implemented by ScalarGateMethod
// (position_method.h), unsigned slots.
#include "model/attention/position_method.h"

namespace rpe {

std::shared_ptr<PositionMethodImpl> make_position_method_m1(const ModelOptions& o) {
  return std::make_shared<ScalarGateMethod>(o, "m1", /*signed_distance=*/false);
}

}  // namespace rpe

// The position tensors that cached_position_tensor (position_method.h) keeps per shape and
// device -- relative indices, skew slots, RoPE's tables -- are freed all at once when a run
// sweeping lengths has filled the cache. A captured CUDA graph reads them by address, so the
// graph capture (train/cuda_graph.cpp) asks the cache to keep everything from then on: freed,
// their memory could be reused while the graph still reads it. Graphs replay fixed shapes, so
// the cache then stays small.
#pragma once

namespace rpe {

// From now on, in this process, no cached position tensor is freed.
void keep_cached_position_tensors();

}  // namespace rpe

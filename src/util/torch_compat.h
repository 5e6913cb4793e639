// The LibTorch API differences across 2.x that rpe-train meets, in one place, so the rest of the
// code reads as written against the current API. Checked by compiling against 2.2, 2.3 and 2.4
// headers besides the pinned 2.11 (docs/layout.md, "LibTorch versions").
//   * Autocast: 2.4 made it device-generic (is_autocast_enabled(type), get/set_autocast_dtype);
//     before, CUDA and CPU had functions of their own.
//   * c10::Event::synchronize() arrived in 2.4; before, a finished event is waited for by query().
#pragma once
#include <ATen/autocast_mode.h>
#include <c10/core/Event.h>
#include <torch/version.h>

#include <thread>

#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 4
#define RPE_TORCH_BEFORE_2_4 1
#endif

namespace rpe::compat {

inline bool autocast_enabled(at::DeviceType type) {
#ifdef RPE_TORCH_BEFORE_2_4
  return type == at::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#else
  return at::autocast::is_autocast_enabled(type);
#endif
}

inline at::ScalarType get_autocast_dtype(at::DeviceType type) {
#ifdef RPE_TORCH_BEFORE_2_4
  return type == at::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#else
  return at::autocast::get_autocast_dtype(type);
#endif
}

inline void set_autocast(at::DeviceType type, bool enabled, at::ScalarType dtype) {
#ifdef RPE_TORCH_BEFORE_2_4
  if (type == at::kCUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  }
#else
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, enabled);
#endif
}

// Blocks until the work recorded by `event` is done.
inline void wait(const c10::Event& event) {
#ifdef RPE_TORCH_BEFORE_2_4
  while (!event.query()) std::this_thread::yield();
#else
  event.synchronize();
#endif
}

}  // namespace rpe::compat

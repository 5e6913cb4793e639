// CUDA graph capture and replay (see cuda_graph.h); a CPU LibTorch build gets the refusal, and
// so does a LibTorch before 2.1, whose capture_begin has no capture mode: its global mode would
// make the data loader thread's CUDA calls (pinned buffers) illegal during a capture.
#include "train/cuda_graph.h"

#include "model/attention/position_cache.h"
#include "util/torch_compat.h"

#if __has_include(<ATen/cuda/CUDAGraph.h>) && !RPE_TORCH_BEFORE(1)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#define RPE_CUDA_GRAPHS 1
#endif

#include <map>
#include <mutex>

namespace rpe {

#ifdef RPE_CUDA_GRAPHS
struct CudaGraph::Impl {
  at::cuda::CUDAGraph graph;
};

namespace {
// One capture stream per device, as torch.cuda.graph keeps: the allocator reuses a pool's free
// blocks only on the stream that freed them, so graphs sharing a pool must be captured on one.
c10::cuda::CUDAStream capture_stream(c10::DeviceIndex index) {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = streams.find(index);
  if (it == streams.end()) it = streams.emplace(index, c10::cuda::getStreamFromPool(false, index)).first;
  return it->second;
}
}  // namespace

bool CudaGraph::built() { return true; }

CudaGraph::CudaGraph(const torch::Device& device, const std::function<void()>& warm, int warmup,
                     const std::function<void()>& prepare, const std::function<void()>& body,
                     const std::function<void()>& before_capture, const CudaGraph* share_pool_with)
    : impl_(std::make_unique<Impl>()) {
  TORCH_CHECK(device.is_cuda(), "CUDA graphs need a CUDA device, not ", device);
  TORCH_CHECK(warmup >= 1, "CudaGraph: at least one warm-up run");
  const auto index = device.has_index() ? device.index() : c10::cuda::current_device();
  const c10::cuda::CUDAGuard guard(index);
  torch::cuda::synchronize(index);  // the side stream must not overtake work queued before
  {
    // Capture needs a stream other than the legacy default one; warming up there too keeps
    // lazily created per-stream state (cuBLAS workspaces) out of the capture.
    c10::cuda::CUDAStreamGuard side(capture_stream(index));
    for (int i = 0; i < warmup; ++i) warm();
    prepare();
    torch::cuda::synchronize(index);
    c10::cuda::CUDACachingAllocator::emptyCache();
    before_capture();
    keep_cached_position_tensors();  // the graph reads the cached indices and tables by address
    // Thread-local: CUDA calls of other threads (the data loader's pinned buffers) stay legal
    // meanwhile; the autograd engine's backward thread still records onto the captured stream.
    using Pool = decltype(impl_->graph.pool());  // c10::MempoolId_t now, c10::cuda::MempoolId_t in 2.0
    impl_->graph.capture_begin(share_pool_with ? share_pool_with->impl_->graph.pool() : Pool{0, 0},
                               cudaStreamCaptureModeThreadLocal);
    try {
      body();
    } catch (...) {  // end the stream's capture, or every later CUDA call on it fails too
      try {
        impl_->graph.capture_end();
      } catch (...) {
      }
      throw;
    }
    impl_->graph.capture_end();
    torch::cuda::synchronize(index);
  }
}

void CudaGraph::replay() { impl_->graph.replay(); }

#else
struct CudaGraph::Impl {};

bool CudaGraph::built() { return false; }

CudaGraph::CudaGraph(const torch::Device&, const std::function<void()>&, int, const std::function<void()>&,
                     const std::function<void()>&, const std::function<void()>&, const CudaGraph*) {
  TORCH_CHECK(false, "this build has no CUDA graphs (a CPU LibTorch, or one before 2.1)");
}

void CudaGraph::replay() {}
#endif

CudaGraph::~CudaGraph() = default;

}  // namespace rpe

// Where the ranks of a job first meet: c10d's TCPStore at MASTER_ADDR:MASTER_PORT (torchrun's
// agent store under torchrun), before any process group exists, and the one decision they
// must share before one can: the device each rank trains on (its backend is NCCL for CUDA,
// Gloo for the CPU). Used by DataParallel's constructor (dist/data_parallel.h).
#pragma once
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <string>

#include "dist/data_parallel.h"
#include "util/errors.h"

namespace rpe::dist {

// A collective or the rendezvous failed (a timeout, a broken connection): a user error (exit 2)
// of its own type, so that a caller that knows what the other ranks were doing can say so.
class CollectiveError : public UserError {
 public:
  using UserError::UserError;
};

// c10d's TCPStore logs every failed attempt to reach the store (ERROR, with a C++ stack trace)
// before it throws; its failure reaches the user as one line (guarded), so c10's own log is held
// to FATAL while an object of this class lives: while the ranks meet and agree on their devices,
// and while they wait for rank 0 (dist/rank0_only.h). Process-wide; restored after.
class QuietStoreLog {
 public:
  QuietStoreLog();
  ~QuietStoreLog();
  QuietStoreLog(const QuietStoreLog&) = delete;
  QuietStoreLog& operator=(const QuietStoreLog&) = delete;

 private:
  int before_;
};

// Runs `f`, turning LibTorch's c10d errors (timeouts, broken connections) into one clear line:
//   distributed <what> failed on rank R (<likely>; timeout train.dist_timeout_s=Ts): <first line>
// `likely` says what usually causes it (by default, a peer that died, hangs or is unreachable).
template <class F>
auto guarded(const std::string& what, int64_t rank, double timeout_s, F&& f,
             const std::string& likely = "another rank died, hangs, or is unreachable") {
  try {
    return f();
  } catch (const std::exception& e) {  // c10::Error, or gloo's IoException from a dead peer
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    std::string msg = c10_error ? c10_error->what_without_backtrace() : e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
    throw CollectiveError("distributed " + what + " failed on rank " + std::to_string(rank) + " (" + likely +
                          "; timeout train.dist_timeout_s=" + std::to_string(static_cast<int64_t>(timeout_s)) +
                          "s): " + msg);
  }
}

// The job's store, every rank connected (waits at most timeout_s); its keys live under
// "rpe-train/" (and, under torchrun, the agent's per-attempt prefix).
c10::intrusive_ptr<c10d::Store> meet(const LaunchEnv& env, double timeout_s);

// Every rank runs `choose` (its device: training_device) and publishes the outcome in `store`;
// then each reads all W of them. When every rank chose a device of the same kind, returns its
// own. Otherwise every rank stops at once, before any backend is created:
//   * a rank whose choice failed (its node shows no GPU to train.device: cuda, or fewer than
//     LOCAL_RANK + 1) rethrows its own error, the others throw
//     "rank R stopped while choosing its device: <R's message>" (user or internal as R's was);
//   * kinds that differ (train.device: auto on a node without a GPU among nodes with GPUs:
//     Gloo on one rank and NCCL on the others would never meet) throw, on every rank, one
//     UserError naming rank 0's device and the first rank that chose another kind.
torch::Device agree_on_device(c10d::Store& store, const LaunchEnv& env, double timeout_s,
                              const std::function<torch::Device()>& choose);

}  // namespace rpe::dist

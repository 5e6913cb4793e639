// c10d process group setup (NCCL, Gloo behind dist/collectives.h) and bucketed gradient
// averaging, after backward here or overlapped with it (dist/grad_sync.h).
#include "dist/data_parallel.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <sstream>

#include "dist/collectives.h"
#include "dist/grad_sync.h"
#include "dist/rendezvous.h"
#include "util/errors.h"
#include "util/log.h"
#include "util/torch_compat.h"

// RPE_WITH_GLOO / RPE_WITH_NCCL come from CMakeLists.txt, which found the headers at
// configure time (a CUDA LibTorch build without NCCL stops there, saying how to point at it).
#if defined(USE_C10D_GLOO) && defined(RPE_WITH_GLOO)
#define RPE_HAVE_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(USE_C10D_NCCL) && defined(RPE_WITH_NCCL)
#define RPE_HAVE_NCCL 1
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace rpe::dist {
using std::chrono::milliseconds;

namespace {

// A c10d backend (NCCL, Gloo) used through its collective calls.
class C10dCollectives : public Collectives {
 public:
  // gpu: NCCL's device index (its barrier is a collective on that GPU), -1 for Gloo.
  C10dCollectives(c10::intrusive_ptr<c10d::Backend> pg, std::string name, int64_t rank, double timeout_s,
                  int64_t gpu = -1)
      : pg_(std::move(pg)), name_(std::move(name)), rank_(rank), timeout_s_(timeout_s), gpu_(gpu) {}
  // After a failed collective the group talks to a dead peer: its destructor could block on
  // or throw from the broken connections while the process exits with the error, so it is
  // deliberately leaked (the OS reclaims it at exit). So is a group that goes while an exception
  // unwinds: this rank stopped on an error the others may not share (an out-of-memory, a bad
  // record in its batch) while they wait in a collective it will never join. NCCL's shutdown
  // (a blocking ncclCommFinalize) would wait for them, keeping this rank from exiting and its
  // error from being printed until their watchdogs abort them; `abort_comms` (NCCL's
  // communicators aborted) lets it exit at once with its error, and the launcher stops the others.
  // Otherwise `close` (NCCL: shutdown, as torch.distributed's destroy_process_group does)
  // ends it cleanly instead of leaving that to its destructor, which warns.
  // (Gloo has neither: its rank exits at once, and its destructor does not wait for peers.)
  ~C10dCollectives() override {
    const bool unwinding = std::uncaught_exceptions() > 0;
    if (!failed_ && unwinding && abort_comms) {
      try {
        abort_comms();
      } catch (const std::exception& e) {
        log::warn("dist", "aborting the {} process group: {}", name_, e.what());
      }
      failed_ = true;
    }
    if (failed_) {
      (void)pg_.release();
    } else if (close) {
      try {
        close();
      } catch (const std::exception& e) {
        log::warn("dist", "closing the {} process group: {}", name_, e.what());
      }
    }
  }
  std::function<void()> close, abort_comms;
  std::string name() const override { return name_; }
  void mark_failed() override { failed_ = true; }
  void all_reduce_sum(torch::Tensor& flat) override { wait("all-reduce", all_reduce_async(flat)); }
  c10::intrusive_ptr<c10d::Work> all_reduce_async(torch::Tensor& flat) override {
    std::vector<torch::Tensor> t{flat};
    // Launching can fail too (NCCL reports an earlier asynchronous error here): one line, as a wait's.
    return guarded("all-reduce", rank_, timeout_s_, [&] { return pg_->allreduce(t, c10d::AllreduceOptions{}); });
  }
  void broadcast_from_0(torch::Tensor& flat) override {
    std::vector<torch::Tensor> t{flat};
    c10d::BroadcastOptions o;
    o.rootRank = 0;
    wait("broadcast", pg_->broadcast(t, o));
  }
  void barrier() override {
    // NCCL: name the GPU, or the first barrier (before any collective) guesses rank % GPUs,
    // wrong where that is not this process's device, and warns.
    c10d::BarrierOptions o;
    if (gpu_ >= 0) o.device_ids = {gpu_};
    wait("barrier", pg_->barrier(o));
  }
  void wait(const std::string& what, const c10::intrusive_ptr<c10d::Work>& work) override {
    try {
      guarded(what, rank_, timeout_s_, [&] {
        // NCCL: wait() only orders the current stream after the collective (no host sync); an
        // explicit timeout would block the host. Its timeout is the process group's (watchdog).
        if (name_ == "nccl") work->wait();
        else work->wait(milliseconds(static_cast<int64_t>(timeout_s_ * 1000)));
        return 0;
      });
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

 private:
  bool failed_ = false;
  c10::intrusive_ptr<c10d::Backend> pg_;
  std::string name_;
  int64_t rank_;
  double timeout_s_;
  int64_t gpu_;
};

#ifdef RPE_HAVE_GLOO
// Gloo's transport: one device per interface GLOO_SOCKET_IFNAME lists (comma-separated), as
// torch.distributed does, else the one for this host's name (loopback when it does not
// resolve); two threads per device. Built on Options::create, which every LibTorch 2.x has
// (create_default came later).
c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options(milliseconds timeout) {
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names != nullptr) {
    std::stringstream list(names);
    for (std::string name; std::getline(list, name, ',');)
      if (!name.empty()) opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
  }
  if (opts->devices.empty()) opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  opts->threads = 2 * static_cast<int>(opts->devices.size());
  return opts;
}
#endif

}  // namespace

DataParallel::DataParallel(const LaunchEnv& env, const torch::Device& device, double timeout_s, double bucket_mb)
    : DataParallel(env, [&] { return device; }, timeout_s, bucket_mb) {}

DataParallel::DataParallel(const LaunchEnv& env, const std::function<torch::Device()>& choose_device,
                           double timeout_s, double bucket_mb)
    : rank_(env.rank),
      world_(env.world),
      bucket_bytes_(static_cast<int64_t>(bucket_mb * (1 << 20))),
      timeout_s_(timeout_s) {
  if (!env.distributed()) {
    device_ = choose_device();
    return;
  }
  const auto timeout = milliseconds(static_cast<int64_t>(timeout_s * 1000));
  store_ = meet(env, timeout_s);
  device_ = agree_on_device(*store_, env, timeout_s, choose_device);
#ifdef RPE_HAVE_NCCL
  // NCCL works on one GPU, named (its barriers too): a device given without an index is the current one.
  if (device_.is_cuda() && !device_.has_index()) device_ = torch::Device(torch::kCUDA, c10::cuda::current_device());
#endif
  const torch::Device device = device_;
  const int r = static_cast<int>(env.rank), w = static_cast<int>(env.world);
  if (device.is_cuda()) {
#ifdef RPE_HAVE_NCCL
    c10::cuda::set_device(device.index());
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, r, w, opts);
    auto nccl = std::make_unique<C10dCollectives>(pg, "nccl", rank_, timeout_s, device.index());
#if !RPE_TORCH_BEFORE(2)
    nccl->close = [pg] { pg->shutdown(); };  // (before 2.2, the destructor's abort is all there is)
    nccl->abort_comms = [pg] { pg->abort(); };
#endif
#if !RPE_TORCH_BEFORE(4)
    // The communicator now, on this rank's GPU, rather than inside the first collective: a
    // failure to set it up (a GPU two ranks share, NCCL unable to reach a peer) is one line here.
    guarded(
        "NCCL set-up", rank_, timeout_s,
        [&] {
          pg->eagerConnectSingleDevice(device);
          return 0;
        },
        "ranks sharing one GPU (CUDA_VISIBLE_DEVICES, LOCAL_RANK), a network NCCL cannot use, or a rank that died");
#endif
    impl_ = std::move(nccl);
#else
    throw UserError("train.device is CUDA but rpe-train was built without NCCL (CPU LibTorch build, or one "
                    "without USE_C10D_NCCL): rebuild against a CUDA LibTorch; CMake finds NCCL or says how");
#endif
  } else {
#ifdef RPE_HAVE_GLOO
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, r, w, gloo_options(timeout));
    impl_ = std::make_unique<C10dCollectives>(pg, "gloo", rank_, timeout_s);
#else
    throw UserError("multi-process CPU training needs c10d's Gloo backend, and this build has no gloo headers: "
                    "install libgloo-dev (or scripts/pack_deps.sh) and rebuild");
#endif
  }
  log::info("dist", "rank {}/{} (local {}) via {} at {}:{} | backend {}", env.rank, env.world, env.local_rank,
            env.launcher, env.master_addr, env.master_port, impl_->name());
}

DataParallel::DataParallel() = default;
DataParallel::~DataParallel() = default;  // sync_ first (members in reverse): hooks go before the group

void DataParallel::attach_gradient_hooks(const std::vector<torch::Tensor>& params) {
  sync_.reset();
  if (impl_) sync_ = std::make_unique<GradSync>(params, bucket_bytes_, *impl_, world_);
}
void DataParallel::arm_gradient_sync() {
  if (sync_) sync_->arm();
}
bool DataParallel::finish_gradient_sync() { return sync_ && sync_->finish(); }
std::exception_ptr DataParallel::gradient_sync_refusal() const { return sync_ ? sync_->refusal() : nullptr; }
int64_t DataParallel::buckets_launched_in_backward() const { return sync_ ? sync_->launched_in_backward() : 0; }
int64_t DataParallel::gradient_elements_reduced() const { return sync_ ? sync_->reduced_elements() : 0; }

std::string nccl_version() {
#ifdef RPE_HAVE_NCCL
  return c10d::getNcclVersion();
#else
  return "none (CPU build)";
#endif
}

void DataParallel::abandon_group() {
  if (impl_) impl_->mark_failed();
}

std::string DataParallel::backend_name() const { return impl_ ? impl_->name() : "none (single process)"; }

void DataParallel::broadcast_parameters(torch::nn::Module& model) {
  if (!impl_) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors;
  for (auto& p : model.parameters()) tensors.push_back(p);
  for (auto& b : model.buffers()) tensors.push_back(b);
  for (auto& t : tensors) {  // few, large tensors: one collective each keeps memory flat
    auto flat = t.detach().contiguous();
    impl_->broadcast_from_0(flat);
    if (!flat.is_same(t)) t.copy_(flat);
  }
}

void DataParallel::average_gradients(const std::vector<torch::Tensor>& params) {
  if (!impl_) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  // Buckets of consecutive same-dtype gradients up to bucket_bytes_: flatten -> all-reduce -> unflatten.
  size_t begin = 0;
  while (begin < grads.size()) {
    size_t end = begin;
    int64_t bytes = 0;
    while (end < grads.size() && grads[end].scalar_type() == grads[begin].scalar_type() &&
           (end == begin || bytes + static_cast<int64_t>(grads[end].nbytes()) <= bucket_bytes_)) {
      bytes += static_cast<int64_t>(grads[end].nbytes());
      ++end;
    }
    std::vector<torch::Tensor> views;
    for (size_t i = begin; i < end; ++i) views.push_back(grads[i].reshape({-1}));
    auto flat = torch::cat(views);  // [sum of numels]
    impl_->all_reduce_sum(flat);
    flat.div_(static_cast<double>(world_));
    int64_t offset = 0;
    for (size_t i = begin; i < end; ++i) {
      const int64_t n = grads[i].numel();
      grads[i].copy_(flat.slice(0, offset, offset + n).view_as(grads[i]));
      offset += n;
    }
    begin = end;
  }
}

std::vector<double> DataParallel::sum(const std::vector<double>& values) {
  if (!impl_) return values;
  auto t = torch::tensor(values, torch::kDouble).to(device_);
  impl_->all_reduce_sum(t);
  t = t.cpu();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

std::vector<double> DataParallel::gather(const std::vector<double>& mine) {
  std::vector<double> rows(static_cast<size_t>(world_) * mine.size(), 0.0);
  std::copy(mine.begin(), mine.end(), rows.begin() + static_cast<std::ptrdiff_t>(rank_ * mine.size()));
  return sum(rows);
}

bool DataParallel::any(bool mine) { return sum({mine ? 1.0 : 0.0})[0] > 0.0; }

void DataParallel::barrier() {
  if (impl_) impl_->barrier();
}

void DataParallel::all_reduce_sum(torch::Tensor& t) {
  if (!impl_) return;
  auto flat = t.contiguous().view({-1});  // 1-D ([1] for a scalar), as every backend takes it
  impl_->all_reduce_sum(flat);
  if (flat.data_ptr() != t.data_ptr()) t.copy_(flat.view_as(t));
}

}  // namespace rpe::dist

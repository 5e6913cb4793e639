// c10d process group setup, bucketed gradient averaging and the store all-reduce fallback.
#include "dist/data_parallel.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <cstring>
#include <optional>

#include "util/errors.h"
#include "util/log.h"

#if defined(USE_C10D_GLOO) && __has_include(<gloo/context.h>)
#define RPE_HAVE_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if defined(USE_C10D_NCCL) && __has_include(<nccl.h>)
#define RPE_HAVE_NCCL 1
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace rpe::dist {
using std::chrono::milliseconds;

namespace {

std::optional<int64_t> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || x < 0) throw UserError(std::string("environment variable ") + name + "='" + v +
                                             "' is not a non-negative integer");
  return x;
}

}  // namespace

LaunchEnv detect_launch_env() {
  LaunchEnv e;
  struct Names {
    const char *rank, *world, *local, *launcher;
  };
  const Names sources[] = {{"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"},
                           {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm"},
                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun"}};
  for (const auto& s : sources) {
    const auto rank = env_int(s.rank), world = env_int(s.world);
    if (!rank || !world) continue;
    e.rank = *rank;
    e.world = *world;
    e.local_rank = env_int(s.local).value_or(0);
    e.launcher = s.launcher;
    break;
  }
  if (e.world < 1 || e.rank >= e.world)
    throw UserError("launcher environment (" + e.launcher + "): rank " + std::to_string(e.rank) +
                    " is not below world size " + std::to_string(e.world));
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  if (auto p = env_int("MASTER_PORT")) e.master_port = *p;
  if (e.master_port <= 0 || e.master_port > 65535)
    throw UserError("environment variable MASTER_PORT=" + std::to_string(e.master_port) + " is not a TCP port");
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  e.agent_store = agent && std::string(agent) == "True";
  e.restart_count = env_int("TORCHELASTIC_RESTART_COUNT").value_or(0);
  return e;
}

// The collectives a data-parallel step needs, on flat contiguous tensors.
class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual std::string name() const = 0;
  virtual void all_reduce_sum(torch::Tensor& flat) = 0;
  virtual void broadcast_from_0(torch::Tensor& flat) = 0;
  virtual void barrier() = 0;
};

namespace {

// Wraps LibTorch's c10d errors (timeouts, broken connections) into one clear line.
template <class F> auto guarded(const std::string& what, int64_t rank, double timeout_s, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {  // c10::Error, or gloo's IoException from a dead peer
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    std::string msg = c10_error ? c10_error->what_without_backtrace() : e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
    throw UserError("distributed " + what + " failed on rank " + std::to_string(rank) +
                    " (another rank died, hangs, or is unreachable; timeout train.dist_timeout_s=" +
                    std::to_string(static_cast<int64_t>(timeout_s)) + "s): " + msg);
  }
}

// A c10d backend (NCCL, Gloo) used through its collective calls.
class C10dCollectives : public Collectives {
 public:
  C10dCollectives(c10::intrusive_ptr<c10d::Backend> pg, std::string name, int64_t rank, double timeout_s)
      : pg_(std::move(pg)), name_(std::move(name)), rank_(rank), timeout_s_(timeout_s) {}
  // After a failed collective the group talks to a dead peer: its destructor could block on
  // or throw from the broken connections while the process exits with the error, so it is
  // deliberately leaked (the OS reclaims it at exit).
  ~C10dCollectives() override {
    if (failed_) (void)pg_.release();
  }
  std::string name() const override { return name_; }
  void all_reduce_sum(torch::Tensor& flat) override {
    std::vector<torch::Tensor> t{flat};
    wait("all-reduce", pg_->allreduce(t, c10d::AllreduceOptions{}));
  }
  void broadcast_from_0(torch::Tensor& flat) override {
    std::vector<torch::Tensor> t{flat};
    c10d::BroadcastOptions o;
    o.rootRank = 0;
    wait("broadcast", pg_->broadcast(t, o));
  }
  void barrier() override { wait("barrier", pg_->barrier(c10d::BarrierOptions{})); }

 private:
  void wait(const std::string& what, const c10::intrusive_ptr<c10d::Work>& work) {
    try {
      guarded(what, rank_, timeout_s_, [&] {
        work->wait(milliseconds(static_cast<int64_t>(timeout_s_ * 1000)));
        return 0;
      });
    } catch (...) {
      failed_ = true;
      throw;
    }
  }
  bool failed_ = false;
  c10::intrusive_ptr<c10d::Backend> pg_;
  std::string name_;
  int64_t rank_;
  double timeout_s_;
};

// All-reduce through the key-value store: rank r sets "<seq>/<r>" to its bytes, every rank
// reads all W entries and sums them in rank order, the last reader deletes them. Store reads
// block up to the store timeout, so a dead rank surfaces as a timeout error, not a hang.
class StoreCollectives : public Collectives {
 public:
  StoreCollectives(c10::intrusive_ptr<c10d::Store> store, int64_t rank, int64_t world, double timeout_s)
      : store_(std::move(store)), rank_(rank), world_(world), timeout_s_(timeout_s) {}
  std::string name() const override { return "store (TCPStore all-reduce; no gloo headers in this LibTorch)"; }

  void all_reduce_sum(torch::Tensor& flat) override {
    guarded("all-reduce", rank_, timeout_s_, [&] {
      const auto cpu = flat.to(torch::kCPU).contiguous();
      const std::string prefix = "rpe/ar/" + std::to_string(seq_++) + "/";
      store_->set(prefix + std::to_string(rank_), bytes_of(cpu));
      torch::Tensor total;
      for (int64_t r = 0; r < world_; ++r) {
        const auto part = r == rank_ ? cpu : from_bytes(store_->get(prefix + std::to_string(r)), cpu);
        total = r == 0 ? part.clone() : total.add_(part);  // rank order: identical sums everywhere
      }
      finish(prefix);
      flat.copy_(total);
      return 0;
    });
  }
  void broadcast_from_0(torch::Tensor& flat) override {
    guarded("broadcast", rank_, timeout_s_, [&] {
      const auto cpu = flat.to(torch::kCPU).contiguous();
      const std::string prefix = "rpe/bc/" + std::to_string(seq_++) + "/";
      if (rank_ == 0) store_->set(prefix + "0", bytes_of(cpu));
      else flat.copy_(from_bytes(store_->get(prefix + "0"), cpu));
      finish(prefix);
      return 0;
    });
  }
  void barrier() override {
    guarded("barrier", rank_, timeout_s_, [&] {
      const std::string key = "rpe/barrier/" + std::to_string(seq_++);
      if (store_->add(key, 1) == world_) store_->set(key + "/open", std::vector<uint8_t>{1});
      store_->wait({key + "/open"});
      return 0;
    });
  }

 private:
  static std::vector<uint8_t> bytes_of(const torch::Tensor& t) {
    const auto* p = static_cast<const uint8_t*>(t.data_ptr());
    return std::vector<uint8_t>(p, p + t.nbytes());
  }
  static torch::Tensor from_bytes(const std::vector<uint8_t>& b, const torch::Tensor& like) {
    auto t = torch::empty_like(like);
    TORCH_CHECK(b.size() == t.nbytes(), "store all-reduce: ranks sent buckets of different sizes");
    std::memcpy(t.data_ptr(), b.data(), b.size());
    return t;
  }
  // The last rank through deletes the round's keys so the store does not grow.
  void finish(const std::string& prefix) {
    if (store_->add(prefix + "done", 1) < world_) return;
    for (int64_t r = 0; r < world_; ++r) store_->deleteKey(prefix + std::to_string(r));
    store_->deleteKey(prefix + "done");
  }
  c10::intrusive_ptr<c10d::Store> store_;
  int64_t rank_, world_;
  double timeout_s_;
  int64_t seq_ = 0;
};

}  // namespace

DataParallel::DataParallel(const LaunchEnv& env, const torch::Device& device, double timeout_s, double bucket_mb)
    : rank_(env.rank), world_(env.world), bucket_bytes_(static_cast<int64_t>(bucket_mb * (1 << 20))), device_(device) {
  if (!env.distributed()) return;
  const auto timeout = milliseconds(static_cast<int64_t>(timeout_s * 1000));
  c10::intrusive_ptr<c10d::Store> store = guarded("rendezvous", rank_, timeout_s, [&] {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.master_port);
    o.timeout = timeout;
    c10::intrusive_ptr<c10d::Store> s;
    if (env.agent_store) {  // torchrun's agent hosts the store; workers are clients under a per-attempt prefix
      o.isServer = false;
      o.waitWorkers = false;
      s = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(env.restart_count),
                                                 c10::make_intrusive<c10d::TCPStore>(env.master_addr, o));
    } else {
      o.isServer = env.rank == 0;
      o.numWorkers = static_cast<size_t>(env.world);
      s = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
    }
    s->setTimeout(timeout);
    return c10::make_intrusive<c10d::PrefixStore>("rpe-train", s);
  });
  const int r = static_cast<int>(env.rank), w = static_cast<int>(env.world);
  if (device.is_cuda()) {
#ifdef RPE_HAVE_NCCL
    c10::cuda::set_device(device.index());
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, r, w, opts);
    impl_ = std::make_unique<C10dCollectives>(pg, "nccl", rank_, timeout_s);
#else
    throw UserError("train.device is CUDA but this LibTorch build has no NCCL support (USE_C10D_NCCL)");
#endif
  } else {
#ifdef RPE_HAVE_GLOO
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, r, w,
                                                          c10d::ProcessGroupGloo::Options::create_default(timeout));
    impl_ = std::make_unique<C10dCollectives>(pg, "gloo", rank_, timeout_s);
#else
    impl_ = std::make_unique<StoreCollectives>(store, rank_, world_, timeout_s);
#endif
  }
  log::info("dist", "rank {}/{} (local {}) via {} at {}:{} | backend {}", env.rank, env.world, env.local_rank,
            env.launcher, env.master_addr, env.master_port, impl_->name());
}

DataParallel::DataParallel() = default;
DataParallel::~DataParallel() = default;

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

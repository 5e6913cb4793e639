// The ranks' first meeting and their device agreement, through c10d's store (see rendezvous.h).
#include "dist/rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <c10/util/Logging.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <vector>

#include "dist/all_or_none.h"
#include "util/log.h"

namespace rpe::dist {
using std::chrono::milliseconds;

namespace {
constexpr int kFatal = 3;  // c10's log levels: INFO 0, WARNING 1, ERROR 2, FATAL 3
}

QuietStoreLog::QuietStoreLog() : before_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = std::max(before_, kFatal); }
QuietStoreLog::~QuietStoreLog() { FLAGS_caffe2_log_level = before_; }

namespace {

c10::intrusive_ptr<c10d::Store> meet_store(const LaunchEnv& env, double timeout_s) {
  const auto timeout = milliseconds(static_cast<int64_t>(timeout_s * 1000));
  return guarded("rendezvous", env.rank, timeout_s, [&] {
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
    return c10::make_intrusive<c10d::PrefixStore>(env.job.empty() ? "rpe-train" : "rpe-train/" + env.job, s);
  });
}

}  // namespace

c10::intrusive_ptr<c10d::Store> meet(const LaunchEnv& env, double timeout_s) {
  log::info("dist", "rank {} of {} ({}) meeting the others at {}:{} (waits up to train.dist_timeout_s = {}s)", env.rank,
            env.world, env.launcher, env.master_addr, env.master_port, static_cast<int64_t>(timeout_s));
  try {
    QuietStoreLog quiet;
    return meet_store(env, timeout_s);
  } catch (const CollectiveError& e) {
    // The usual cause of a failed start on rank 0 is no dead rank but a port taken on this host.
    const std::string text = e.what();
    if (env.rank != 0 || env.agent_store || text.find("EADDRINUSE") == std::string::npos) throw;
    throw CollectiveError("rank 0 cannot host the job's store at port " + std::to_string(env.master_port) +
                          ": another process on this host holds it (another job's rank 0?); set MASTER_PORT to "
                          "a free port");
  }
}

namespace {

// A rank's outcome as stored: 'D' + its device ("cuda:3"), or 'U' / 'I' + the message of its
// user / internal error.
std::vector<uint8_t> encode(char tag, const std::string& text) {
  std::vector<uint8_t> v(1 + text.size());
  v[0] = static_cast<uint8_t>(tag);
  std::copy(text.begin(), text.end(), v.begin() + 1);
  return v;
}

std::string key(int64_t rank) { return "device/" + std::to_string(rank); }

}  // namespace

torch::Device agree_on_device(c10d::Store& store, const LaunchEnv& env, double timeout_s,
                              const std::function<torch::Device()>& choose) {
  std::optional<torch::Device> mine;
  std::exception_ptr error;
  Failure failure;
  try {
    mine = choose();
  } catch (...) {
    error = std::current_exception();
    failure = describe_failure(error);
  }
  // [W] outcomes, rank after rank.
  QuietStoreLog quiet;
  const auto all = guarded("device agreement", env.rank, timeout_s, [&] {
    store.set(key(env.rank), error ? encode(failure.user ? 'U' : 'I', failure.message) : encode('D', mine->str()));
    std::vector<std::string> keys;
    for (int64_t r = 0; r < env.world; ++r) keys.push_back(key(r));
    store.wait(keys);
    std::vector<std::string> out;
    for (const auto& k : keys) {
      const auto v = store.get(k);
      out.emplace_back(v.begin(), v.end());
    }
    // The last reader says so: rank 0, whose process hosts the store outside torchrun, must
    // not leave (and take the store with it) while others still read.
    if (store.add("device/read", 1) == env.world) store.set("device/all_read", encode('D', ""));
    return out;
  });
  int64_t first_failed = -1, other_kind = -1;
  for (int64_t r = 0; r < env.world; ++r) {
    const auto& o = all[static_cast<size_t>(r)];
    if (o[0] != 'D' && first_failed < 0) first_failed = r;
    if (o[0] == 'D' && all[0][0] == 'D' && other_kind < 0 &&
        torch::Device(o.substr(1)).type() != torch::Device(all[0].substr(1)).type())
      other_kind = r;
  }
  if (first_failed < 0 && other_kind < 0) return *mine;
  if (env.rank == 0 && !env.agent_store) {
    try {
      store.wait({"device/all_read"});
    } catch (const std::exception&) {  // a rank that died meanwhile: this rank's error says more
    }
  }
  if (error) std::rethrow_exception(error);
  if (first_failed >= 0) {
    const auto& o = all[static_cast<size_t>(first_failed)];
    throw_stopped_by(first_failed, "choosing its device", Failure{o[0] == 'U', o.substr(1)});
  }
  throw UserError("the ranks chose different kinds of device: rank 0 trains on " + all[0].substr(1) + ", rank " +
                  std::to_string(other_kind) + " on " + all[static_cast<size_t>(other_kind)].substr(1) +
                  " (train.device: auto picks the CPU on a node without a visible GPU): every rank of a job "
                  "trains on a GPU (NCCL) or every rank on the CPU (Gloo); set train.device: cuda or cpu");
}

}  // namespace rpe::dist

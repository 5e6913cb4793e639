// The ranks agree on their devices before any process group exists (dist/rendezvous.h): a rank
// that cannot choose one (its node shows no GPU) or chooses another kind (train.device: auto
// on a node without a GPU) stops every rank at once. Before, that rank stopped alone before the
// ranks met, and the others waited at the rendezvous until train.dist_timeout_s (srun, mpirun),
// or met a Gloo rank with NCCL and hung.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <cstdlib>
#include <string>
#include <utility>

#include "dist/rendezvous.h"
#include "launch_ranks.h"
#include "util/errors.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;
using test::launch_pair;
using test::pretrain_cmd;
using test::slurp;

// The device `choose` leads to on this rank, or the error it ends in as "user: ..." /
// "internal: ...". Each case has keys of its own in the job's store.
std::pair<std::string, std::string> agreed(const c10::intrusive_ptr<c10d::Store>& store, const dist::LaunchEnv& env,
                                           const std::string& name, const std::function<torch::Device()>& choose) {
  c10d::PrefixStore keys(name, store);
  try {
    return {"device", dist::agree_on_device(keys, env, 60.0, choose).str()};
  } catch (const UserError& e) {
    return {"user", e.what()};
  } catch (const std::exception& e) {
    return {"internal", e.what()};
  }
}

// The multi-process tests' MASTER_PORT: under the kernel's ephemeral range (where a Gloo socket of
// a test running beside them could take a port probed with bind(0)), free, and not handed out
// twice in a row.
// A c10d failure becomes one line saying what failed, on which rank, what usually causes it (a
// dead peer unless the caller knows better, as NCCL's set-up does) and c10's first line only.
TEST(Guarded, OneLineWithWhatFailedItsLikelyCauseAndC10sFirstLine) {
  auto fails = [] {
    TORCH_CHECK(false, "Duplicate GPU detected\nsecond line");
    return 0;
  };
  auto message = [&](auto&&... likely) {
    try {
      dist::guarded("NCCL set-up", 3, 300.0, fails, likely...);
    } catch (const dist::CollectiveError& e) {
      return std::string(e.what());
    }
    return std::string("nothing thrown");
  };
  EXPECT_EQ(message(), "distributed NCCL set-up failed on rank 3 (another rank died, hangs, or is unreachable; "
                       "timeout train.dist_timeout_s=300s): Duplicate GPU detected");
  EXPECT_EQ(message(std::string("ranks sharing one GPU")),
            "distributed NCCL set-up failed on rank 3 (ranks sharing one GPU; timeout train.dist_timeout_s=300s): "
            "Duplicate GPU detected");
  EXPECT_EQ(dist::guarded("x", 0, 1.0, [] { return 7; }), 7);
}

TEST(FreePort, HandsOutFreshPortsBelowTheEphemeralRange) {
  const int a = test::free_port(), b = test::free_port();
  for (int p : {a, b}) {
    EXPECT_GE(p, 20000);
    EXPECT_LT(p, 32000);
  }
  EXPECT_NE(a, b);
}

// Rank 0 whose port another process holds (another job's rank 0 on the same node) says so,
// instead of blaming a dead or unreachable rank.
TEST(Rendezvous, APortTakenOnThisHostIsNamed) {
  const int port = test::free_port();
  const int held = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(held, 0);
  const int yes = 1;
  ::setsockopt(held, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(::bind(held, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(held, 1), 0);
  dist::LaunchEnv env;
  env.world = 2;
  env.master_port = port;
  std::string message;
  try {
    dist::meet(env, 5.0);
  } catch (const dist::CollectiveError& e) {
    message = e.what();
  }
  ::close(held);
  EXPECT_EQ(message, "rank 0 cannot host the job's store at port " + std::to_string(port) +
                         ": another process on this host holds it (another job's rank 0?); set MASTER_PORT to a "
                         "free port");
}

// One rank of Rendezvous.RanksAgreeOnTheirDevicesOnTwoRanks (skipped unless launched by it).
TEST(RendezvousWorker, DISABLED_RanksAgreeOnTheirDevices) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of Rendezvous.*, launched by it";
  const auto env = dist::detect_launch_env();
  const auto store = dist::meet(env, 60.0);
  const bool one = env.rank == 1;
  using P = std::pair<std::string, std::string>;
  // The same kind everywhere: each rank keeps its own (GPU indices differ by rank). No GPU is
  // needed: a device is only named here, no backend is made for it.
  EXPECT_EQ(agreed(store, env, "cpu", [] { return torch::Device(torch::kCPU); }), P("device", "cpu"));
  EXPECT_EQ(agreed(store, env, "gpus", [&] { return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.rank)); }),
            P("device", one ? "cuda:1" : "cuda:0"));
  // Rank 1 cannot choose (a user error): it keeps its own, rank 0 gets it named.
  EXPECT_EQ(agreed(store, env, "no_gpu",
                   [&] {
                     if (one) throw UserError("train.device is 'cuda' but LibTorch sees no CUDA device");
                     return torch::Device(torch::kCPU);
                   }),
            P("user", one ? "train.device is 'cuda' but LibTorch sees no CUDA device"
                          : "rank 1 stopped while choosing its device: train.device is 'cuda' but LibTorch sees "
                            "no CUDA device"));
  // Both fail: each its own. An internal error on rank 0 alone stays internal on rank 1.
  EXPECT_EQ(agreed(store, env, "both", [&]() -> torch::Device { throw UserError("mine " + std::to_string(env.rank)); }),
            P("user", "mine " + std::to_string(env.rank)));
  EXPECT_EQ(agreed(store, env, "internal",
                   [&] {
                     if (!one) throw std::runtime_error("CUDA driver: unknown error");
                     return torch::Device(torch::kCPU);
                   }),
            P("internal", one ? "rank 0 stopped while choosing its device: CUDA driver: unknown error"
                              : "CUDA driver: unknown error"));
  // Kinds that differ: every rank gets the same line, naming both.
  const auto mixed = agreed(store, env, "mixed", [&] {
    return one ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA, 0);
  });
  EXPECT_EQ(mixed.first, "user");
  EXPECT_NE(mixed.second.find("the ranks chose different kinds of device: rank 0 trains on cuda:0, rank 1 on cpu"),
            std::string::npos)
      << mixed.second;
  // Rank 0's process hosts the store: it leaves only after rank 1 is done with it.
  if (one) store->set("finished", std::vector<uint8_t>{1});
  else store->wait({"finished"});
}

TEST(Rendezvous, RanksAgreeOnTheirDevicesOnTwoRanks) {
  test::run_two_ranks("RendezvousWorker.DISABLED_RanksAgreeOnTheirDevices", "rendezvous");
}

// End to end, launched as srun does (no agent to end the others): rank 1 is told to train on a
// GPU it cannot see. Rank 0 stops at once with rank 1's reason (exit 2 each), and no run folder
// is made. (On a machine with a GPU rank 1 gets it, and the kinds differ instead.)
TEST(StartUp, RankThatCannotChooseItsDeviceStopsEveryRank) {
  const fs::path run = test::fresh_dir("startup_device");
  fs::remove_all(run);
  const std::string sets = "--set train.max_steps=2 --set train.dist_timeout_s=30";
  const int codes = launch_pair(pretrain_cmd(run, sets + " --set train.device=cpu"),
                                pretrain_cmd(run, sets + " --set train.device=cuda"), run);
  const std::string r0 = slurp(run.string() + ".r0.log"), r1 = slurp(run.string() + ".r1.log");
  ASSERT_EQ(codes, 22) << r0 << r1;
  if (torch::cuda::is_available()) {
    for (const auto* log : {&r0, &r1})
      EXPECT_NE(log->find("error: the ranks chose different kinds of device: rank 0 trains on cpu, rank 1 on cuda:"),
                std::string::npos)
          << *log;
  } else {
    const std::string reason = "train.device is 'cuda' but LibTorch sees no CUDA device";
    EXPECT_NE(r1.find("error: " + reason), std::string::npos) << r1;
    EXPECT_NE(r0.find("error: rank 1 stopped while choosing its device: " + reason), std::string::npos) << r0;
  }
  EXPECT_FALSE(fs::exists(run));
}

// The same for fine-tuning, whose ranks meet through the same DataParallel.
TEST(StartUp, FineTuningRankThatCannotChooseItsDeviceStopsEveryRank) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "rank 1 would find a GPU here";
  const fs::path ft = test::fresh_dir("startup_ft_device");
  fs::remove_all(ft);
  const int codes = launch_pair(test::finetune_cmd(test::tiny_pretrained_run(), ft),
                                test::finetune_cmd(test::tiny_pretrained_run(), ft, "--set train.device=cuda"), ft);
  const std::string r0 = slurp(ft.string() + ".r0.log"), r1 = slurp(ft.string() + ".r1.log");
  ASSERT_EQ(codes, 22) << r0 << r1;
  EXPECT_NE(r0.find("error: rank 1 stopped while choosing its device: train.device is 'cuda' but LibTorch sees no "
                    "CUDA device"),
            std::string::npos)
      << r0;
  EXPECT_FALSE(fs::exists(ft));
}

}  // namespace
}  // namespace rpe

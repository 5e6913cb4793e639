// Rank 0's long work (dist/rank0_only.h): the other ranks wait on its heartbeat in the store,
// however long the work takes, and give up only when the heartbeat stands still for
// train.dist_timeout_s. Before, they waited in a collective: training a sentencepiece tokenizer
// for longer than train.dist_timeout_s (5 minutes by default; hours on a large corpus) stopped
// every other rank with a timeout.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include "dist/rank0_only.h"
#include "dist/rendezvous.h"
#include "launch_ranks.h"
#include "util/errors.h"

namespace rpe {
namespace {
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(Rank0Only, InOneProcessTheWorkJustRuns) {
  dist::DataParallel single;
  int ran = 0;
  dist::rank0_only(single, "counting", [&] { ++ran; });
  EXPECT_EQ(ran, 1);
  EXPECT_THROW(dist::rank0_only(single, "x", [] { throw UserError("bad file"); }), UserError);
}

// One rank of Rank0Only.OthersWaitOnItsHeartbeatOnTwoGlooRanks (skipped unless launched by it).
TEST(Rank0OnlyWorker, DISABLED_OthersWaitOnItsHeartbeat) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of Rank0Only.*, launched by it";
  constexpr double kTimeout = 4.0;  // train.dist_timeout_s: short, but the ranks must still meet under load
  dist::DataParallel dp(dist::detect_launch_env(), torch::kCPU, kTimeout, 25.0);
  const bool chief = dp.rank() == 0;

  // Work of twice the timeout: the other rank waits it out and goes on.
  auto start = Clock::now();
  int ran = 0;
  dist::rank0_only(dp, "working", [&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(2 * kTimeout));
    ++ran;
  });
  EXPECT_EQ(ran, chief ? 1 : 0);
  EXPECT_GT(seconds_since(start), 2 * kTimeout - 1.0);  // rank 1 too: it waited for the end

  // The work's failure reaches the other rank with its reason, as all_or_none's would.
  std::string message;
  try {
    dist::rank0_only(dp, "writing the file", [] { throw UserError("runs/x/ckpt: No space left on device"); });
  } catch (const UserError& e) {
    message = e.what();
  }
  EXPECT_EQ(message, chief ? "runs/x/ckpt: No space left on device"
                           : "rank 0 stopped while writing the file: runs/x/ckpt: No space left on device");
  EXPECT_EQ(dp.sum({1.0})[0], 2.0);  // the group still works

  // Rank 0 stops answering: its process stopped (SIGSTOP; a host gone is alike), store server
  // and heartbeat with it. A store call has no timeout of its own: the other rank must still give
  // up once the heartbeat stood still for the timeout, naming what it waited for; then it wakes
  // rank 0, which finds rank 1 gone at the agreement.
  auto& store = *dp.store();
  const std::string pid = std::to_string(::getpid());
  if (chief) store.set("test/pid", std::vector<uint8_t>(pid.begin(), pid.end()));
  const auto pid_bytes = store.get("test/pid");
  dp.sum({1.0});  // rank 1 has read the pid before rank 0 stops (a stopped store answers nothing)
  if (chief) {
    EXPECT_THROW(dist::rank0_only(dp, "training the tokenizer", [] { std::raise(SIGSTOP); }), dist::CollectiveError);
    return;
  }
  const pid_t rank0 = static_cast<pid_t>(std::stol(std::string(pid_bytes.begin(), pid_bytes.end())));
  start = Clock::now();
  try {
    dist::rank0_only(dp, "training the tokenizer", [] {});
    ADD_FAILURE() << "rank 1 did not give up";
  } catch (const dist::CollectiveError& e) {
    message = e.what();
  }
  const double waited = seconds_since(start);
  ::kill(rank0, SIGCONT);
  EXPECT_EQ(message, "rank 1 waited while rank 0 was training the tokenizer, and rank 0 gave no sign of life for 4 s "
                     "(train.dist_timeout_s; its process or its host stopped answering; rank 0's log says more)");
  EXPECT_GT(waited, kTimeout);
  EXPECT_LT(waited, 2 * kTimeout);
}

TEST(Rank0Only, OthersWaitOnItsHeartbeatOnTwoGlooRanks) {
  test::run_two_ranks("Rank0OnlyWorker.DISABLED_OthersWaitOnItsHeartbeat", "rank0_only");
}

}  // namespace
}  // namespace rpe

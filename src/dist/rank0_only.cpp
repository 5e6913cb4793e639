// Rank 0's work waited for on its heartbeat in the store (see rank0_only.h).
#include "dist/rank0_only.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "dist/all_or_none.h"
#include "dist/rendezvous.h"
#include "util/log.h"

namespace rpe::dist {
namespace {
using Clock = std::chrono::steady_clock;
using std::chrono::duration;
using std::chrono::milliseconds;

constexpr auto kBeat = std::chrono::seconds(1);
constexpr auto kNote = std::chrono::minutes(5);  // how often a waiting rank says it still waits

// Adds 1 to `key` every kBeat from a thread of its own until destroyed. A store that fails
// (its host gone) ends the beat quietly: the waiting ranks see that and say so.
class Heartbeat {
 public:
  Heartbeat(c10d::Store& store, std::string key) : store_(store), key_(std::move(key)), thread_([this] { beat(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void beat() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      lock.unlock();
      try {
        store_.add(key_, 1);
      } catch (const std::exception&) {
        return;
      }
      lock.lock();
      wake_.wait_for(lock, kBeat, [this] { return done_; });
    }
  }

  c10d::Store& store_;
  std::string key_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// A waiting rank: looks for `done` (often at first, a checkpoint takes seconds; then every half
// second) and at the beat counter, until rank 0 is done or its counter stood still too long.
void wait_for_rank0(DataParallel& dp, c10d::Store& store, const std::string& beat, const std::string& done,
                    const std::string& what) {
  const double timeout_s = dp.timeout_s();
  const auto look = [&](auto&& f) { return guarded("wait for rank 0 (" + what + ")", dp.rank(), timeout_s, f); };
  const auto start = Clock::now();
  auto moved = start, next_note = start + kNote;
  int64_t last = -1;
  while (!look([&] { return store.check({done}); })) {
    const int64_t count = look([&] { return store.add(beat, 0); });  // 0 until rank 0's first beat
    const auto now = Clock::now();
    if (count != last) {
      last = count;
      moved = now;
    } else if (duration<double>(now - moved).count() > timeout_s) {
      throw CollectiveError("rank " + std::to_string(dp.rank()) + " waited while rank 0 was " + what +
                            ", and rank 0 gave no sign of life for train.dist_timeout_s=" +
                            std::to_string(static_cast<int64_t>(timeout_s)) +
                            "s (its process is stuck or its host unreachable; rank 0's log says more)");
    }
    if (now >= next_note) {
      log::info("dist", "still waiting for rank 0 ({}): {} min",
                what, std::chrono::duration_cast<std::chrono::minutes>(now - start).count());
      next_note += kNote;
    }
    const auto waited = now - start;
    std::this_thread::sleep_for(std::clamp<Clock::duration>(waited / 10, milliseconds(10), milliseconds(500)));
  }
}

}  // namespace

void rank0_only(DataParallel& dp, const std::string& what, const std::function<void()>& work) {
  if (!dp.distributed()) return work();
  c10d::Store& store = *dp.store();
  const std::string key = "rank0/" + std::to_string(dp.next_store_call());
  std::exception_ptr error;
  if (dp.rank() == 0) {
    try {
      Heartbeat heartbeat(store, key + "/beat");
      work();
    } catch (...) {
      error = std::current_exception();
    }
    guarded("end of rank 0's work (" + what + ")", 0, dp.timeout_s(), [&] {
      store.set(key + "/done", std::vector<uint8_t>{1});
      return 0;
    });
  } else {
    wait_for_rank0(dp, store, key + "/beat", key + "/done", what);
  }
  agree_all_succeeded(dp, what, error);
}

}  // namespace rpe::dist

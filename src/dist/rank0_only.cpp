// Rank 0's work waited for on its heartbeat in the store (see rank0_only.h).
#include "dist/rank0_only.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <memory>
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
constexpr double kFewestBeats = 3.0;             // a stall is never shorter than this many beats
constexpr int64_t kDone = int64_t{1} << 50;       // added to the counter when rank 0 is done
constexpr auto kNote = std::chrono::minutes(5);  // how often a waiting rank says it still waits

// Adds 1 to `key` every kBeat from a thread of its own until destroyed; a failed add (a store
// briefly unreachable) is tried again at the next beat.
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
      } catch (const std::exception&) {  // the waiting ranks judge a longer silence
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

// What a waiting rank's poller has seen. The poller reads the counter (one store operation a
// look: often at first, a checkpoint takes seconds; then every half second); the waiting rank
// judges from here, so a store that stops answering (rank 0's process stopped, its host gone:
// a store call has no timeout of its own) cannot hold it past the stall.
struct Sightings {
  std::atomic<int64_t> moved_ns{Clock::now().time_since_epoch().count()};  // when the counter last changed
  std::atomic<bool> done{false}, quit{false};
  std::mutex mutex;
  std::exception_ptr error;  // the store's, ending the poller
};

void poll(c10::intrusive_ptr<c10d::Store> store, std::string beat, std::shared_ptr<Sightings> seen) {
  const auto start = Clock::now();
  int64_t last = -1;
  while (!seen->quit) {
    int64_t count = 0;
    try {
      count = store->add(beat, 0);  // 0 until rank 0's first beat
    } catch (...) {
      std::lock_guard<std::mutex> lock(seen->mutex);
      seen->error = std::current_exception();
      return;
    }
    if (count != last) {
      last = count;
      seen->moved_ns = Clock::now().time_since_epoch().count();
    }
    if (count >= kDone) {
      seen->done = true;
      return;
    }
    std::this_thread::sleep_for(std::clamp<Clock::duration>((Clock::now() - start) / 10, milliseconds(50), milliseconds(500)));
  }
}

void wait_for_rank0(DataParallel& dp, const std::string& beat, const std::string& what) {
  const double stall_s = std::max(dp.timeout_s(), kFewestBeats * duration<double>(kBeat).count());
  QuietStoreLog quiet;  // a store gone (rank 0 died) is said in one line
  auto seen = std::make_shared<Sightings>();
  std::thread poller(poll, dp.store(), beat, seen);
  const auto start = Clock::now();
  auto next_note = start + kNote;
  for (;;) {
    std::this_thread::sleep_for(milliseconds(20));
    if (seen->done) break;
    const auto now = Clock::now();
    const double still_s = duration<double>(now - Clock::time_point(Clock::duration(seen->moved_ns.load()))).count();
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(seen->mutex);
      error = seen->error;
    }
    // A store call that failed at once (rank 0's process died: connection reset) says why; one
    // that timed out, or none at all, is the silence itself.
    if (error && still_s < 0.9 * stall_s) {
      poller.join();
      dp.abandon_group();  // its peer is gone: closing the group could block on it
      guarded("wait for rank 0 (" + what + ")", dp.rank(), dp.timeout_s(), [&]() -> int { std::rethrow_exception(error); });
    }
    if (error || still_s > stall_s) {
      seen->quit = true;
      poller.detach();  // it may be stuck in a store call; it holds the store and `seen` itself
      // That call holds the store client's lock, which the process group's own users of the
      // store (NCCL's heartbeat monitor) would wait on at shutdown: the group is left as after a
      // failed collective.
      dp.abandon_group();
      throw CollectiveError("rank " + std::to_string(dp.rank()) + " waited while rank 0 was " + what +
                            ", and rank 0 gave no sign of life for " + std::to_string(std::lround(stall_s)) +
                            " s (train.dist_timeout_s; its process or its host stopped answering; rank 0's log "
                            "says more)");
    }
    if (now >= next_note) {
      log::info("dist", "still waiting for rank 0 ({}): {} min", what,
                std::chrono::duration_cast<std::chrono::minutes>(now - start).count());
      next_note += kNote;
    }
  }
  poller.join();
}

}  // namespace

void rank0_only(DataParallel& dp, const std::string& what, const std::function<void()>& work) {
  if (!dp.distributed()) return work();
  c10d::Store& store = *dp.store();
  const std::string beat = "rank0/" + std::to_string(dp.next_store_call()) + "/beat";
  std::exception_ptr error;
  if (dp.rank() == 0) {
    try {
      Heartbeat heartbeat(store, beat);
      work();
    } catch (...) {
      error = std::current_exception();
    }
    try {
      guarded("end of rank 0's work (" + what + ")", 0, dp.timeout_s(), [&] { return store.add(beat, kDone); });
    } catch (...) {
      if (error) std::rethrow_exception(error);  // the work's own failure says more
      throw;
    }
  } else {
    wait_for_rank0(dp, beat, what);
  }
  agree_all_succeeded(dp, what, error);
}

}  // namespace rpe::dist

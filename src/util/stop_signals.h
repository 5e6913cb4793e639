// A polite stop for long runs: while a StopSignals object lives, SIGTERM, SIGINT, SIGHUP and
// SIGUSR1 no longer kill the process but ask it to stop. The training engine reads the request
// between optimizer steps, agrees on it with the other ranks and saves a checkpoint before it
// ends (train/engine.h), so a run preempted by its scheduler (Slurm's time limit or
// `--signal`, torchrun forwarding the signal it got, Ctrl-C) loses no steps and `--resume`
// continues it exactly.
//
// One request can arrive several times: Slurm signals every process of a job step, and torchrun,
// one of them, forwards its copy to its workers, so a worker gets SIGTERM twice within
// milliseconds. Signals within kEchoWindowNs of the first are therefore taken as the same
// request; one that comes later (a second Ctrl-C, seconds on, for a checkpoint that takes too
// long) takes its default action: the process ends by it. A signal the process was started with
// ignored (nohup's SIGHUP) stays ignored. The handler only touches lock-free atomics and calls
// async-signal-safe functions.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace rpe {

class StopSignals {
 public:
  static constexpr int64_t kEchoWindowNs = 2'000'000'000;  // 2 s: copies of one request
  // Installs the handlers; the destructor puts back the previous ones and forgets the request.
  // One at a time (std::logic_error for a second).
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The first signal that asked for a stop since the handlers were installed; 0 for none (and
  // while no StopSignals lives).
  static int requested();
  // Whether a StopSignals lives (an outer one, such as fine-tuning's over all its seeds, which
  // the engine then leaves in place rather than installing its own).
  static bool installed();
  // "SIGTERM", "SIGINT", ... ("signal N" for others).
  static std::string name(int signal);
  // For a stop the ranks agreed on because some rank got a signal, given this rank's `own`
  // request (0: another rank's): the words for the log, "on request (SIGTERM)" or "on request (a
  // signal another rank got)", and the signal this process ends by (its own, else SIGTERM).
  static std::string reason(int own);
  static int ends_by(int own);
};

// Thrown by the engine once it has stopped on request and saved its checkpoint; main() ends
// the process by the same signal (its default action), so the launcher and the shell see the
// run ended by it, or, stopped at train.time_limit_min (signal 0), with exit code 75
// (kExitTimeLimit). what(): one line for the log.
class StopRequested : public std::runtime_error {
 public:
  StopRequested(const std::string& message, int signal) : std::runtime_error(message), signal_(signal) {}
  // The signal this process got (a rank that stopped because another rank asked: SIGTERM); 0
  // when its own time limit stopped it.
  int signal() const { return signal_; }

 private:
  int signal_;
};

}  // namespace rpe

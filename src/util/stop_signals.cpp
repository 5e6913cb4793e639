// StopSignals (see stop_signals.h).
#include "util/stop_signals.h"

#include <signal.h>

#include <array>
#include <atomic>

namespace rpe {
namespace {

constexpr std::array<int, 4> kSignals = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
static_assert(std::atomic<int>::is_always_lock_free, "the handler may only touch a lock-free atomic");
std::atomic<int> g_requested{0};
std::array<struct sigaction, kSignals.size()> g_previous{};
bool g_installed = false;  // set and read by the thread that owns the StopSignals

extern "C" void on_stop_signal(int signal) {
  int none = 0;
  g_requested.compare_exchange_strong(none, signal);  // the first one is the one reported
}

}  // namespace

StopSignals::StopSignals() {
  if (g_installed) throw std::logic_error("StopSignals: the handlers are already installed");
  g_installed = true;
  g_requested.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a read or write the signal lands in goes on instead of failing with EINTR.
  // SA_RESETHAND: the next signal of the same kind takes its default action (a second Ctrl-C kills).
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  for (size_t i = 0; i < kSignals.size(); ++i) {
    sigaction(kSignals[i], nullptr, &g_previous[i]);
    // Ignored when the process started (nohup's SIGHUP, SIGINT of a job a script put in the
    // background): whoever started it wants it to run on through that signal, so it stays ignored.
    if (g_previous[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &action, nullptr);
  }
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  g_requested.store(0);
  g_installed = false;
}

int StopSignals::requested() { return g_installed ? g_requested.load(std::memory_order_relaxed) : 0; }

std::string StopSignals::name(int signal) {
  switch (signal) {  // not sigabbrev_np: glibc 2.32 and up only, older on many clusters
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal " + std::to_string(signal);
  }
}

}  // namespace rpe

// StopSignals (see stop_signals.h).
#include "util/stop_signals.h"

#include <signal.h>
#include <time.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>

namespace rpe {
namespace {

constexpr std::array<int, 4> kSignals = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
              "the handler may only touch lock-free atomics");
std::atomic<int> g_requested{0};
std::atomic<int64_t> g_first_ns{0};  // CLOCK_MONOTONIC of the first request; 0 until it is stored
std::array<struct sigaction, kSignals.size()> g_previous{};
bool g_installed = false;  // set and read by the thread that owns the StopSignals

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// Only async-signal-safe calls: clock_gettime, sigaction, raise; errno is left as it was.
extern "C" void on_stop_signal(int signal) {
  const int saved_errno = errno;
  const int64_t now = monotonic_ns();
  int none = 0;
  if (g_requested.compare_exchange_strong(none, signal)) {
    g_first_ns.store(now);  // the first one is the one reported
  } else if (const int64_t first = g_first_ns.load(); first != 0 && now - first > StopSignals::kEchoWindowNs) {
    // Asked again, well after the first: the default action now (the signal is blocked while
    // this handler runs, so it is delivered as the handler returns).
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(signal, &default_action, nullptr);
    raise(signal);
  }
  errno = saved_errno;
}

}  // namespace

StopSignals::StopSignals() {
  if (g_installed) throw std::logic_error("StopSignals: the handlers are already installed");
  g_installed = true;
  g_requested.store(0);
  g_first_ns.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a read or write the signal lands in goes on instead of failing with EINTR.
  action.sa_flags = SA_RESTART;
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
  g_first_ns.store(0);
  g_installed = false;
}

bool StopSignals::installed() { return g_installed; }

std::string StopSignals::reason(int own) {
  return "on request (" + (own != 0 ? name(own) : std::string("a signal another rank got")) + ")";
}

int StopSignals::ends_by(int own) { return own != 0 ? own : SIGTERM; }

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

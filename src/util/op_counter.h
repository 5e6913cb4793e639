// Counts the ATen ops dispatched at the top level while it lives (not the ops a composite or a
// CPU _foreach op runs inside them): how many kernels a piece of code asks for, a proxy for
// its launch count on CUDA. Used by the optimizer benchmark and its tests. One per thread.
#pragma once
#include <ATen/record_function.h>

namespace rpe {

class TopLevelOpCounter {
 public:
  TopLevelOpCounter() {
    count() = 0;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
              if (depth()++ == 0) ++count();
              return nullptr;
            },
            [](const at::RecordFunction&, at::ObserverContext*) { --depth(); })
            .scopes({at::RecordScope::FUNCTION}));
  }
  ~TopLevelOpCounter() { at::removeCallback(handle_); }
  TopLevelOpCounter(const TopLevelOpCounter&) = delete;
  TopLevelOpCounter& operator=(const TopLevelOpCounter&) = delete;
  int ops() const { return count(); }

 private:
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  static int& count() {
    thread_local int c = 0;
    return c;
  }
  at::CallbackHandle handle_;
};

}  // namespace rpe

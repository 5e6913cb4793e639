// A FIFO for tests of readers that must refuse it. A reader that (wrongly) opens it blocks
// until a writer comes; a helper thread keeps offering one (a non-blocking open for writing,
// which succeeds only while a reader waits, then closes at once), so such a reader gets
// end-of-file and the test fails on its assertions instead of hanging.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace rpe::test {

class FifoGuard {
 public:
  explicit FifoGuard(std::filesystem::path path) : path_(std::move(path)) {
    if (::mkfifo(path_.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + path_.string() + " failed");
    releaser_ = std::thread([this] {
      while (!done_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);  // ENXIO while no reader waits
        if (fd >= 0) ::close(fd);
      }
    });
  }
  ~FifoGuard() {
    done_ = true;
    releaser_.join();
    ::unlink(path_.c_str());
  }
  FifoGuard(const FifoGuard&) = delete;
  FifoGuard& operator=(const FifoGuard&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::atomic<bool> done_{false};
  std::thread releaser_;
};

}  // namespace rpe::test

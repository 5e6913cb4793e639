// See file_lock.h.
#include "util/file_lock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "util/log.h"

namespace rpe {

FileLock::FileLock(const std::filesystem::path& file, const std::string& waiting)
    : FileLock(file, std::function<void()>([&waiting] { log::info("data", "{}", waiting); })) {}

FileLock::FileLock(const std::filesystem::path& file, const std::function<void()>& on_wait) {
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd_ < 0) return;
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;
  if (::fcntl(fd_, F_SETLK, &whole) == 0) return;
  if (errno != EACCES && errno != EAGAIN) {
    problem_ = std::strerror(errno);
    return;
  }
  if (on_wait) on_wait();
  while (::fcntl(fd_, F_SETLKW, &whole) != 0) {
    if (errno == EINTR) continue;
    problem_ = std::strerror(errno);  // ENOLCK, EDEADLK: not held
    return;
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

std::string FileLock::note(std::chrono::seconds* age) const {
  char buf[4096];
  struct stat st {};
  const ssize_t n = held() ? ::pread(fd_, buf, sizeof buf, 0) : -1;
  if (n <= 0 || ::fstat(fd_, &st) != 0) return "";
  if (age) *age = std::chrono::seconds(std::time(nullptr) - st.st_mtime);
  return std::string(buf, static_cast<size_t>(n));
}

bool FileLock::leave_note(const std::string& note) {
  if (!held()) return false;
  // Written over the old note, then cut to length: on a full disk the file's block is reused (cut
  // first, it would be freed and needed again). A write cut short leaves a mix that matches no
  // note its reader compares it with, i.e. none.
  return ::pwrite(fd_, note.data(), note.size(), 0) == static_cast<ssize_t>(note.size()) &&
         ::ftruncate(fd_, static_cast<off_t>(note.size())) == 0;
}

}  // namespace rpe

// See file_lock.h.
#include "util/file_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/log.h"

namespace rpe {

FileLock::FileLock(const std::filesystem::path& file, const std::string& waiting) {
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
  log::info("data", "{}", waiting);
  while (::fcntl(fd_, F_SETLKW, &whole) != 0 && errno == EINTR) {
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace rpe

// An exclusive POSIX record lock (fcntl) on a file, held for the object's lifetime: prepare-data's
// output folder (data/prepare.cpp) and a sample index being built (data/shard_sequences.cpp), so
// that a second process on the same shared folder waits for the first instead of redoing or
// undoing its work. fcntl locks, unlike flock, reach across NFS clients (its lock manager) and
// Lustre (mounted with flock). Where the lock file cannot be made (a read-only folder) nothing is
// locked, silently; where the file system has no locks, problem() says why.
#pragma once
#include <filesystem>
#include <string>

namespace rpe {

class FileLock {
 public:
  // Locks `file` (created if missing), waiting while another process holds it; `waiting` is
  // logged (info) once when it must wait.
  FileLock(const std::filesystem::path& file, const std::string& waiting);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // The error that left the file unlocked although it was opened (no locks on this file system); "" otherwise.
  const std::string& problem() const { return problem_; }

 private:
  int fd_ = -1;
  std::string problem_;
};

}  // namespace rpe

// An exclusive POSIX record lock (fcntl) on a file, held for the object's lifetime: prepare-data's
// output folder (data/prepare.cpp) and a sample index being built (data/shard_sequences.cpp), so
// that a second process on the same shared folder waits for the first instead of redoing or
// undoing its work. fcntl locks, unlike flock, reach across NFS clients (its lock manager) and
// Lustre (mounted with flock). Where the lock file cannot be made (a read-only folder) nothing is
// locked, silently; where the file system has no locks, problem() says why.
// The lock file's content is a note the holder may leave for the next one (an index build that
// failed); taking an fcntl lock makes an NFS client read what the last holder wrote before it
// unlocked. Nothing else is ever in the file.
#pragma once
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

namespace rpe {

class FileLock {
 public:
  // Locks `file` (created if missing), waiting while another process holds it; `waiting` is
  // logged (info) once when it must wait.
  FileLock(const std::filesystem::path& file, const std::string& waiting);
  // The same with on_wait() called instead, once, before it waits: a caller taking many locks in
  // turn (one per shard) says once that it waits rather than once per lock.
  FileLock(const std::filesystem::path& file, const std::function<void()>& on_wait);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // The error that left the file unlocked although it was opened (no locks on this file system, a
  // failed wait); "" otherwise.
  const std::string& problem() const { return problem_; }
  bool held() const { return fd_ >= 0 && problem_.empty(); }  // false: nothing locked, no note read or left

  // The note a holder left (up to 4 KB; "" if none or nothing is held) and how long ago it was
  // written, by the file's modification time against this machine's clock (negative: the writer's clock is ahead).
  std::string note(std::chrono::seconds* age = nullptr) const;
  // Replaces the note ("" clears it); false where it cannot be written (nothing held, a full disk).
  bool leave_note(const std::string& note);

 private:
  int fd_ = -1;
  std::string problem_;
};

}  // namespace rpe

// Run folder and checkpoint resolution (see run_dir.h).
#include "train/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "train/checkpoint.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {

// "step_00000020.pt: checksum mismatch (...); step_00000010.pt: ..." for every listed file.
std::string reasons(const std::vector<std::pair<int64_t, fs::path>>& files) {
  std::string out;
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    std::string why;
    verify_checkpoint(it->second, &why);
    out += (out.empty() ? "" : "; ") + it->second.filename().string() + ": " + why;
  }
  return out;
}

// The largest "step" of metrics.jsonl's rows (torn or foreign lines ignored), 0 without rows.
int64_t last_metrics_step(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  int64_t last = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_object() && row.contains("step") && row["step"].is_number_integer())
      last = std::max(last, row["step"].get<int64_t>());
  }
  return last;
}

}  // namespace

CheckpointSource resolve_checkpoint(const std::string& what, const std::string& label) {
  const std::string name = label.empty() ? what : label + " " + what;
  const fs::path path = folder_path(what);
  std::error_code ec;
  const auto status = fs::status(path, ec);
  CheckpointSource out;
  if (fs::is_directory(status)) {
    // A run's checkpoints/ folder stands for the run.
    out.run_dir = path.filename() == "checkpoints" && list_checkpoints(path).empty() &&
                          !list_checkpoints(path.parent_path()).empty()
                      ? path.parent_path()
                      : path;
    const auto files = list_checkpoints(out.run_dir);
    if (files.empty())
      throw UserError(name + ": no checkpoint in this run folder (checkpoints/step_<N>.pt)");
    const auto latest = latest_checkpoint(out.run_dir);
    if (!latest) throw UserError(name + ": no usable checkpoint in this run folder: " + reasons(files));
    out.checkpoint = *latest;
    return out;
  }
  if (!fs::exists(status)) throw UserError(name + ": checkpoint not found (no such file or run folder)");
  out.checkpoint = path;
  const fs::path parent = path.parent_path();
  out.run_dir = parent.filename() == "checkpoints" ? parent.parent_path() : parent;
  return out;
}

namespace {

// What an rpe-train run folder holds: its log (written first, so a run stopped before its
// config.yaml has it), or its config with metrics or checkpoints.
bool is_run_folder(const fs::path& dir) {
  std::error_code ec;
  for (const char* log : {"train.log", "finetune.log"})
    if (fs::is_regular_file(dir / log, ec)) return true;
  if (!fs::is_regular_file(dir / "config.yaml", ec)) return false;
  for (const char* entry : {"metrics.jsonl", "checkpoints"})
    if (fs::exists(dir / entry, ec)) return true;
  return false;
}

// --overwrite deletes `dir`: only a run folder, never one holding the working directory or
// something the new run reads (an --init model, its vocabulary, the corpus).
void check_overwrite(const fs::path& dir, const RunDirRequest& request) {
  std::error_code ec;
  if (path_inside(fs::current_path(ec), dir))
    throw UserError("--overwrite: " + dir.string() + " holds the working directory; refusing to delete it");
  for (const auto& input : request.inputs)
    if (!input.empty() && path_inside(input, dir))
      throw UserError("--overwrite: " + dir.string() + " holds " + input.string() +
                      ", which this run reads; write the run elsewhere");
  if (!is_run_folder(dir))
    throw UserError("--overwrite: " + dir.string() +
                    " is not an rpe-train run folder (no train.log or finetune.log, no config.yaml beside "
                    "metrics or checkpoints); refusing to delete it");
}

// The run folders this process holds, by path: the folder's descriptor, flock'ed, kept open
// until the process ends (a second pretrain/finetune on the same folder is refused at once).
std::map<std::string, int>& held_locks() {
  static std::map<std::string, int> held;
  return held;
}

std::string lock_key(const fs::path& dir) {
  std::error_code ec;
  return fs::weakly_canonical(fs::absolute(dir), ec).string();
}

// Locks `dir` for this process (again after --overwrite made it anew); `keep` false only tests
// that no other process holds it.
void lock_run_dir(const fs::path& dir, bool keep) {
  auto& held = held_locks();
  const std::string key = lock_key(dir);
  const auto it = held.find(key);
  struct stat now {}, locked {};
  if (it != held.end() && ::fstat(it->second, &locked) == 0 && ::stat(dir.c_str(), &now) == 0 &&
      now.st_ino == locked.st_ino && now.st_dev == locked.st_dev)
    return;  // this process holds this very folder already
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot open run folder " + dir.string() + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK)
      throw UserError("run folder " + dir.string() + " is in use by another rpe-train process; wait for it to end");
    throw UserError("cannot lock run folder " + dir.string() + ": " + std::strerror(err));
  }
  if (!keep) {
    ::close(fd);
    return;
  }
  if (it != held.end()) ::close(it->second);  // the folder it locked is gone (--overwrite)
  held[key] = fd;
}

// True when `dir` is a folder with content; UserError for the refusals of check_run_dir.
bool existing_run(const fs::path& dir, const RunDirRequest& request) {
  if (request.resume && request.overwrite)
    throw UserError("--resume and --overwrite exclude each other: --resume continues the run in " + dir.string() +
                    ", --overwrite deletes it");
  std::error_code ec;
  const auto status = fs::status(dir, ec);
  if (fs::exists(status) && !fs::is_directory(status))
    throw UserError("run folder " + dir.string() + " exists and is not a folder");
  const bool exists = fs::is_directory(status) && !fs::is_empty(dir, ec);
  if (exists && !request.resume && !request.overwrite)
    throw UserError("run folder " + dir.string() + " already exists: " +
                    (request.can_resume ? "pass --resume to continue it, --overwrite to replace it"
                                        : "pass --overwrite to replace it") +
                    ", or --run-dir DIR for a new run beside it");  // replacing may not be what is meant
  if (exists && request.overwrite) check_overwrite(dir, request);
  if (exists) lock_run_dir(dir, /*keep=*/false);
  return exists;
}
}  // namespace

void check_run_dir(const fs::path& dir, const RunDirRequest& request) { existing_run(folder_path(dir), request); }

namespace {
// The run folders prepare_run_dir created in this process (as folder_path gives them): only
// these does discard_new_run_folder remove; another (made empty by a job script, a link to a
// scratch disk) is left as it was found, empty.
std::set<std::string>& created_here() {
  static std::set<std::string> dirs;
  return dirs;
}

// Removes what `dir` holds, where it points when it is a symlink; the folder itself stays.
void empty_folder(const fs::path& dir) {
  std::error_code ec;
  const fs::path target = fs::canonical(dir, ec);
  if (ec) throw UserError("cannot resolve run folder " + dir.string() + ": " + ec.message());
  for (const auto& entry : fs::directory_iterator(target, ec)) remove_tree(entry.path());
  if (ec) throw UserError("cannot list run folder " + target.string() + ": " + ec.message());
}
}  // namespace

void discard_new_run_folder(const fs::path& path) {
  const fs::path dir = folder_path(path);
  try {
    std::error_code ec;
    if (created_here().count(dir.string()) && !fs::is_symlink(dir, ec)) remove_tree(dir);
    else empty_folder(dir);
  } catch (const UserError& e) {
    log::warn("run", "{}", e.what());
  }
}

void close_failed_run(const std::exception& e, bool nothing_kept, log::FileSink& sink, const fs::path& dir) {
  if (nothing_kept && dynamic_cast<const UserError*>(&e) != nullptr) {
    sink.close();
    discard_new_run_folder(dir);
    return;
  }
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  sink.error_to_file(torch_error != nullptr ? torch_error->what_without_backtrace() : e.what());
}

// --overwrite's deletion. A run folder that is a symlink (runs/x -> a scratch disk) is emptied
// where it points, the link and the folder there (its mode, group, ACLs; a mount point) kept:
// removing the link would leave the old run there and write the new one here.
void remove_run(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_symlink(dir, ec)) empty_folder(dir);
  else remove_tree(dir);
}

bool prepare_run_dir(const fs::path& path, const RunDirRequest& request) {
  const fs::path dir = folder_path(path);  // "runs/x/" is runs/x (a link is then not followed)
  const bool exists = existing_run(dir, request);
  if (exists) lock_run_dir(dir, /*keep=*/true);  // before deleting: not from under a running process
  if (exists && request.overwrite) remove_run(dir);
  std::error_code ec;
  if (fs::create_directories(dir, ec)) created_here().insert(dir.string());
  if (ec) throw UserError("cannot create run folder " + dir.string() + ": " + ec.message());
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw UserError("run folder " + dir.string() + " is not writable: " + std::strerror(errno));
  lock_run_dir(dir, /*keep=*/true);
  return exists && request.resume;
}

std::optional<fs::path> checkpoint_to_resume(const fs::path& run_dir, int64_t save_every) {
  const auto files = list_checkpoints(run_dir);
  if (!files.empty()) {
    if (auto latest = latest_checkpoint(run_dir)) return latest;
    throw UserError("--resume: no usable checkpoint in " + (run_dir / "checkpoints").string() + ": " +
                    reasons(files) + " (pass --overwrite to start the run again)");
  }
  std::error_code ec;
  if (fs::exists(run_dir / "checkpoints" / "latest", ec))
    throw UserError("--resume: " + (run_dir / "checkpoints").string() +
                    " names a latest checkpoint but holds no step_<N>.pt file (pass --overwrite to start the run "
                    "again)");
  // A finished run saved its last step: its summary without a checkpoint is a run whose
  // checkpoints were removed, not one killed before its first (whose restart loses nothing).
  if (fs::exists(run_dir / "summary.json", ec))
    throw UserError("--resume: " + (run_dir / "summary.json").string() + " says the run finished, but " +
                    (run_dir / "checkpoints").string() +
                    " holds no checkpoint (deleted?); pass --overwrite to start the run again");
  const int64_t logged = last_metrics_step(run_dir / "metrics.jsonl");
  if (save_every > 0 && logged > save_every)
    throw UserError("--resume: " + (run_dir / "metrics.jsonl").string() + " reaches step " + std::to_string(logged) +
                    ", past the first checkpoint at step " + std::to_string(save_every) +
                    ", but " + (run_dir / "checkpoints").string() +
                    " holds none (deleted?); pass --overwrite to start the run again");
  return std::nullopt;
}

std::optional<fs::path> newest_finished_run(const fs::path& runs) {
  std::error_code ec;
  std::optional<fs::path> newest;
  fs::file_time_type newest_time{};
  for (fs::directory_iterator it(runs, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path dir = it->path();
    if (!it->is_directory(ec) || !fs::is_regular_file(dir / "summary.json", ec) || list_checkpoints(dir).empty()) continue;
    const auto time = fs::last_write_time(dir / "summary.json", ec);
    if (ec) continue;
    if (!newest || time > newest_time) {
      newest = dir;
      newest_time = time;
    }
  }
  return newest;
}

}  // namespace rpe

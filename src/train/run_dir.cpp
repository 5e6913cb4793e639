// Run folder and checkpoint resolution (see run_dir.h).
#include "train/run_dir.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

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
                    (request.can_resume ? "pass --resume to continue it or --overwrite to replace it"
                                        : "pass --overwrite to replace it"));
  return exists;
}
}  // namespace

void check_run_dir(const fs::path& dir, const RunDirRequest& request) { existing_run(dir, request); }

bool prepare_run_dir(const fs::path& dir, const RunDirRequest& request) {
  const bool exists = existing_run(dir, request);
  if (exists && request.overwrite) remove_tree(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UserError("cannot create run folder " + dir.string() + ": " + ec.message());
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw UserError("run folder " + dir.string() + " is not writable: " + std::strerror(errno));
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

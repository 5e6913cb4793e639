// Checkpoint save/load through torch::serialize archives.
#include "train/checkpoint.h"

#include <regex>

#include "rpe/version.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {

fs::path checkpoint_dir(const fs::path& run_dir) { return run_dir / "checkpoints"; }

void remove_old(const fs::path& dir, int64_t keep_last) {
  std::vector<std::pair<int64_t, fs::path>> found;
  static const std::regex pattern(R"(step_(\d+)\.pt)");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, pattern)) found.emplace_back(std::stoll(m[1]), e.path());
  }
  std::sort(found.begin(), found.end());
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < found.size(); ++i) fs::remove(found[i].second);
}

}  // namespace

fs::path save_checkpoint(const fs::path& run_dir, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                         const TrainState& state, const std::string& config_yaml, int64_t keep_last) {
  const fs::path dir = checkpoint_dir(run_dir);
  fs::create_directories(dir);
  char name[64];
  std::snprintf(name, sizeof name, "step_%08ld.pt", static_cast<long>(state.step));
  const fs::path file = dir / name;

  torch::serialize::OutputArchive archive;
  for (const auto& p : model.named_parameters()) archive.write("model/" + p.key(), p.value());
  for (const auto& b : model.named_buffers()) archive.write("model/" + b.key(), b.value(), /*is_buffer=*/true);
  if (optimizer) {
    torch::serialize::OutputArchive opt;
    optimizer->save(opt);
    archive.write("optimizer", opt);
  }
  archive.write("step", c10::IValue(state.step));
  archive.write("loader_epoch", c10::IValue(state.cursor.epoch));
  archive.write("loader_position", c10::IValue(state.cursor.position));
  archive.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  archive.write("config", c10::IValue(config_yaml));
  archive.write("version", c10::IValue(std::string(kVersion) + "+" + kGitRevision));

  write_atomic_with(file, [&](const fs::path& tmp) { archive.save_to(tmp.string()); });
  write_file_atomic(dir / "latest", file.filename().string() + "\n");
  remove_old(dir, keep_last);
  return file;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  const fs::path pointer = checkpoint_dir(run_dir) / "latest";
  if (!fs::exists(pointer)) return std::nullopt;
  std::string name = read_file(pointer);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  const fs::path file = checkpoint_dir(run_dir) / name;
  if (!fs::exists(file)) return std::nullopt;
  return file;
}

namespace {
torch::serialize::InputArchive open_archive(const fs::path& file) {
  if (!fs::exists(file)) throw UserError(file.string() + ": checkpoint not found");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(file.string());
  } catch (const std::exception& e) {
    throw UserError(file.string() + ": not a readable rpe-train checkpoint (truncated or corrupt?)");
  }
  return archive;
}
}  // namespace

std::string read_checkpoint_config(const fs::path& file) {
  auto archive = open_archive(file);
  c10::IValue v;
  if (!archive.try_read("config", v)) throw UserError(file.string() + ": checkpoint has no embedded config");
  return v.toStringRef();
}

CheckpointContents load_checkpoint(const fs::path& file, torch::nn::Module& model, torch::optim::Optimizer* optimizer) {
  auto archive = open_archive(file);
  torch::NoGradGuard no_grad;
  for (auto& p : model.named_parameters()) {
    torch::Tensor t;
    if (!archive.try_read("model/" + p.key(), t))
      throw UserError(file.string() + ": tensor model/" + p.key() + " is missing (different model or method?)");
    if (t.sizes() != p.value().sizes())
      throw UserError(file.string() + ": tensor model/" + p.key() + " has shape " + c10::str(t.sizes()) +
                      " but the config builds " + c10::str(p.value().sizes()));
    p.value().copy_(t);
  }
  CheckpointContents out;
  c10::IValue v;
  if (archive.try_read("step", v)) out.state.step = v.toInt();
  if (archive.try_read("loader_epoch", v)) out.state.cursor.epoch = v.toInt();
  if (archive.try_read("loader_position", v)) out.state.cursor.position = v.toInt();
  if (archive.try_read("config", v)) out.config_yaml = v.toStringRef();
  if (archive.try_read("version", v)) out.version = v.toStringRef();
  if (optimizer) {
    torch::serialize::InputArchive opt;
    if (archive.try_read("optimizer", opt)) optimizer->load(opt);
    torch::Tensor rng;
    if (archive.try_read("rng_cpu", rng)) {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      gen.set_state(rng);
    }
  }
  return out;
}

}  // namespace rpe

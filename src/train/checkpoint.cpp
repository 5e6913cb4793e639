// Checkpoint save/load through torch::serialize archives, with CRC32 sidecars.
#include "train/checkpoint.h"

#include <array>
#include <fstream>
#include <regex>

#include "rpe/version.h"
#include "train/lamb.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {

fs::path checkpoint_dir(const fs::path& run_dir) { return run_dir / "checkpoints"; }
fs::path sidecar(const fs::path& file) { return fs::path(file.string() + ".crc32"); }

// step_<N>.pt files of a folder, oldest first.
std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  if (!fs::is_directory(dir)) return found;
  static const std::regex pattern(R"(step_(\d+)\.pt)");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, pattern)) found.emplace_back(std::stoll(m[1]), e.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

void remove_old(const fs::path& dir, int64_t keep_last) {
  const auto found = list_checkpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < found.size(); ++i) {
    fs::remove(found[i].second);
    fs::remove(sidecar(found[i].second));
  }
}

// Optimizer state by parameter name ("optim/<param>/<field>"), in the model's parameter order.
// LibTorch's own Optimizer::save keys the state by tensor addresses and walks a hash map, so
// its bytes differ from process to process; this layout makes equal states give equal files.
void save_optimizer_state(torch::serialize::OutputArchive& archive, torch::nn::Module& model,
                          torch::optim::Optimizer& optimizer) {
  for (const auto& p : model.named_parameters()) {
    auto it = optimizer.state().find(p.value().unsafeGetTensorImpl());
    if (it == optimizer.state().end()) continue;
    const std::string key = "optim/" + p.key() + "/";
    if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(it->second.get())) {
      archive.write(key + "step", c10::IValue(s->step()));
      archive.write(key + "exp_avg", s->exp_avg(), true);
      archive.write(key + "exp_avg_sq", s->exp_avg_sq(), true);
      if (s->max_exp_avg_sq().defined()) archive.write(key + "max_exp_avg_sq", s->max_exp_avg_sq(), true);
    } else if (const auto* l = dynamic_cast<const LambParamState*>(it->second.get())) {
      archive.write(key + "step", c10::IValue(l->step()));
      archive.write(key + "exp_avg", l->exp_avg(), true);
      archive.write(key + "exp_avg_sq", l->exp_avg_sq(), true);
    } else {
      throw std::logic_error("save_checkpoint: unsupported optimizer state type");
    }
  }
}

void load_optimizer_state(torch::serialize::InputArchive& archive, torch::nn::Module& model,
                          torch::optim::Optimizer& optimizer, const std::string& optimizer_name,
                          const fs::path& file) {
  const bool lamb = dynamic_cast<Lamb*>(&optimizer) != nullptr;
  if (!optimizer_name.empty() && (optimizer_name == "lamb") != lamb)
    throw UserError(file.string() + ": optimizer state was written by '" + optimizer_name +
                    "', which does not match train.optimizer");
  for (const auto& p : model.named_parameters()) {
    const std::string key = "optim/" + p.key() + "/";
    c10::IValue step;
    if (!archive.try_read(key + "step", step)) continue;  // no state yet (e.g. never had a gradient)
    auto tensor = [&](const std::string& field) {
      torch::Tensor t;
      if (!archive.try_read(key + field, t)) return torch::Tensor();
      if (t.sizes() != p.value().sizes())
        throw UserError(file.string() + ": " + key + field + " has shape " + c10::str(t.sizes()) +
                        " but the parameter has " + c10::str(p.value().sizes()));
      return t.to(p.value().device()).clone();
    };
    auto& slot = optimizer.state()[p.value().unsafeGetTensorImpl()];
    if (lamb) {
      auto s = std::make_unique<LambParamState>();
      s->step(step.toInt()).exp_avg(tensor("exp_avg")).exp_avg_sq(tensor("exp_avg_sq"));
      slot = std::move(s);
    } else {
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->step(step.toInt()).exp_avg(tensor("exp_avg")).exp_avg_sq(tensor("exp_avg_sq"));
      if (auto m = tensor("max_exp_avg_sq"); m.defined()) s->max_exp_avg_sq(m);
      slot = std::move(s);
    }
  }
}

std::string crc_line(const fs::path& file) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "crc32 %08x size %lld\n", file_crc32(file),
                static_cast<long long>(fs::file_size(file)));
  return buf;
}

}  // namespace

uint32_t file_crc32(const fs::path& file) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;  // reflected 0x04C11DB7
      t[n] = c;
    }
    return t;
  }();
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UserError(file.string() + ": cannot be read");
  uint32_t crc = 0xFFFFFFFFu;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i)
      crc = table[(crc ^ static_cast<uint8_t>(buf[static_cast<size_t>(i)])) & 0xFFu] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

bool verify_checkpoint(const fs::path& file, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (!fs::exists(file)) return fail("file is missing");
  if (!fs::exists(sidecar(file))) return fail("checksum file " + sidecar(file).filename().string() + " is missing");
  const std::string expected = read_file(sidecar(file));
  const std::string actual = crc_line(file);
  if (expected != actual) {
    std::string e = expected, a = actual;
    while (!e.empty() && e.back() == '\n') e.pop_back();
    while (!a.empty() && a.back() == '\n') a.pop_back();
    return fail("checksum mismatch (recorded '" + e + "', file has '" + a + "'): truncated or corrupt");
  }
  return true;
}

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
  if (optimizer) save_optimizer_state(archive, model, *optimizer);
  archive.write("optimizer_name", c10::IValue(state.optimizer_name));
  archive.write("schedule", c10::IValue(state.schedule));
  archive.write("step", c10::IValue(state.step));
  archive.write("loader_epoch", c10::IValue(state.cursor.epoch));
  archive.write("loader_position", c10::IValue(state.cursor.position));
  archive.write("tokens_seen", c10::IValue(state.tokens_seen));
  archive.write("nonfinite_total", c10::IValue(state.nonfinite_total));
  archive.write("nonfinite_in_a_row", c10::IValue(state.nonfinite_in_a_row));
  archive.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  if (torch::cuda::is_available()) {
    for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i)
      archive.write("rng_cuda_" + std::to_string(i),
                    at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<int8_t>(i))).get_state());
  }
  archive.write("config", c10::IValue(config_yaml));
  archive.write("version", c10::IValue(std::string(kVersion) + "+" + kGitRevision));

  // File first, then its checksum, then the pointer: a crash in between leaves either no
  // sidecar (file skipped on resume) or a verified file.
  write_atomic_with(file, [&](const fs::path& tmp) { archive.save_to(tmp.string()); });
  write_file_atomic(sidecar(file), crc_line(file));
  write_file_atomic(dir / "latest", file.filename().string() + "\n");
  remove_old(dir, keep_last);
  return file;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  const auto found = list_checkpoints(checkpoint_dir(run_dir));
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    std::string why;
    if (verify_checkpoint(it->second, &why)) return it->second;
    log::warn("checkpoint", "{}: {}; falling back to the previous checkpoint", it->second.string(), why);
  }
  return std::nullopt;
}

namespace {
torch::serialize::InputArchive open_archive(const fs::path& file) {
  if (!fs::exists(file)) throw UserError(file.string() + ": checkpoint not found");
  std::string why;
  if (fs::exists(sidecar(file)) && !verify_checkpoint(file, &why)) throw UserError(file.string() + ": " + why);
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
  auto load_tensor = [&](const std::string& key, torch::Tensor target) {
    torch::Tensor t;
    if (!archive.try_read("model/" + key, t))
      throw UserError(file.string() + ": tensor model/" + key + " is missing (different model or method?)");
    if (t.sizes() != target.sizes())
      throw UserError(file.string() + ": tensor model/" + key + " has shape " + c10::str(t.sizes()) +
                      " but the config builds " + c10::str(target.sizes()));
    target.copy_(t);
  };
  for (auto& p : model.named_parameters()) load_tensor(p.key(), p.value());
  for (auto& b : model.named_buffers()) {
    torch::Tensor t;
    if (archive.try_read("model/" + b.key(), t) && t.sizes() == b.value().sizes()) b.value().copy_(t);
  }
  CheckpointContents out;
  c10::IValue v;
  auto read_int = [&](const char* key, int64_t& field) {
    if (archive.try_read(key, v)) field = v.toInt();
  };
  read_int("step", out.state.step);
  read_int("loader_epoch", out.state.cursor.epoch);
  read_int("loader_position", out.state.cursor.position);
  read_int("tokens_seen", out.state.tokens_seen);
  read_int("nonfinite_total", out.state.nonfinite_total);
  read_int("nonfinite_in_a_row", out.state.nonfinite_in_a_row);
  if (archive.try_read("optimizer_name", v)) out.state.optimizer_name = v.toStringRef();
  if (archive.try_read("schedule", v)) out.state.schedule = v.toStringRef();
  if (archive.try_read("config", v)) out.config_yaml = v.toStringRef();
  if (archive.try_read("version", v)) out.version = v.toStringRef();
  if (optimizer) {
    load_optimizer_state(archive, model, *optimizer, out.state.optimizer_name, file);
    torch::Tensor rng;
    if (archive.try_read("rng_cpu", rng)) {
      at::Generator cpu = at::detail::getDefaultCPUGenerator();  // a handle sharing the global state
      cpu.set_state(rng);
    }
    if (torch::cuda::is_available()) {
      for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i)
        if (archive.try_read("rng_cuda_" + std::to_string(i), rng)) {
          at::Generator gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<int8_t>(i)));
          gen.set_state(rng);
        }
    }
  }
  return out;
}

}  // namespace rpe

// Checkpoint contents: what is written into and read from the archive (format: checkpoint_file.cpp).
#include "train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <regex>

#include "dist/data_parallel.h"
#include "rpe/version.h"
#include "train/lamb.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/log.h"
#include "util/torch_compat.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {

fs::path checkpoint_dir(const fs::path& run_dir) { return run_dir / "checkpoints"; }

// TrainState::world_sizes as the archive keeps it: [n, 2] int64, a row per stretch.
torch::Tensor world_sizes_tensor(const std::vector<std::pair<int64_t, int64_t>>& stretches) {
  auto t = torch::empty({static_cast<int64_t>(stretches.size()), 2}, torch::kLong);
  for (size_t i = 0; i < stretches.size(); ++i) {
    t[static_cast<int64_t>(i)][0] = stretches[i].first;
    t[static_cast<int64_t>(i)][1] = stretches[i].second;
  }
  return t;
}

// After checkpoint `step` is written: keeps the newest keep_last of the steps up to it.
// - A checkpoint of a later step belongs to a timeline the run has left (it resumed from an
//   older one because that file failed its checksum): renamed out of the way (.superseded)
//   rather than counted, which would push out the good ones, the file just written included.
// - Temporary files of a write that died (a kill mid-checkpoint: step_N.pt.tmp.<pid>, GBs
//   each, or mid-update of the `latest` pointer) are removed: no other process writes this folder.
void remove_old(const fs::path& run_dir, int64_t step, int64_t keep_last) {
  std::error_code ec;
  const fs::path dir = checkpoint_dir(run_dir);
  static const std::regex leftover(R"((step_\d{1,18}\.pt|latest)\.tmp\.\d+)");
  const std::string mine = ".tmp." + std::to_string(::getpid());
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, leftover) && !name.ends_with(mine)) fs::remove(e.path(), ec);
  }
  std::vector<std::pair<int64_t, fs::path>> kept;
  for (const auto& [s, file] : list_checkpoints(run_dir)) {
    if (s <= step) {
      kept.emplace_back(s, file);
      continue;
    }
    log::warn("checkpoint", "{}: from after step {}, which this run resumed before: renamed to {}.superseded",
              file.string(), step, file.filename().string());
    fs::rename(file, file.string() + ".superseded", ec);
  }
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < kept.size(); ++i) {
    fs::remove(kept[i].second, ec);
    fs::remove(kept[i].second.string() + ".crc32", ec);  // the sidecar of an older checkpoint
  }
}

// Optimizer state by parameter name ("optim/<param>/<field>"), in the model's parameter order.
// LibTorch's own Optimizer::save keys the state by tensor addresses and walks a hash map, so
// its bytes differ from process to process; this layout makes equal states give equal files.
void save_optimizer_state(torch::serialize::OutputArchive& archive, torch::nn::Module& model,
                          torch::optim::Optimizer& optimizer) {
  for (const auto& p : model.named_parameters()) {
    auto it = optimizer.state().find(compat::optimizer_state_key(p.value()));
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
    auto& slot = optimizer.state()[compat::optimizer_state_key(p.value())];
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

// Where the model trains: its parameters' device (the CPU for a model without parameters).
torch::Device parameters_device(torch::nn::Module& model) {
  const auto params = model.parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

}  // namespace

RandomStates RandomStates::capture(const torch::Device& device) {
  RandomStates r;
  r.where = device;
  r.cpu = at::detail::getDefaultCPUGenerator().get_state();
  if (device.is_cuda()) r.device = at::globalContext().defaultGenerator(device).get_state();
  return r;
}

torch::Tensor every_rank_row(dist::DataParallel& dp, const torch::Tensor& row) {
  const auto bytes = row.to(torch::kCPU, torch::kUInt8).contiguous();
  const std::vector<double> mine(bytes.data_ptr<uint8_t>(), bytes.data_ptr<uint8_t>() + bytes.numel());
  const std::vector<double> all = dp.gather(mine);  // bytes as doubles: exact
  return torch::tensor(all, torch::kDouble).to(torch::kUInt8).view({dp.world(), bytes.numel()});
}

void restore_rank_device_rng(const TrainState& state, int64_t rank, int64_t world, const torch::Device& device) {
  const auto& rows = state.rng_device_ranks;
  if (!device.is_cuda() || !rows.defined() || rows.dim() != 2 || rows.size(0) != world || world < 2) return;
  RandomStates own;
  own.where = device;
  own.device = rows[rank].contiguous();
  own.restore();
}

void note_world_size(TrainState& state, int64_t from_step, int64_t world) {
  if (state.step <= from_step) return;
  if (!state.world_sizes.empty() && state.world_sizes.back().second == world) return;  // the same stretch
  state.world_sizes.emplace_back(from_step, world);
}

void RandomStates::restore() const {
  if (cpu.defined()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle sharing the global state
    gen.set_state(cpu);
  }
  if (device.defined() && where.is_cuda()) {
    at::Generator gen = at::globalContext().defaultGenerator(where);
    gen.set_state(device);
  }
}

void write_checkpoint(const fs::path& file, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                      const TrainState* state, const std::string& config_yaml) {
  torch::serialize::OutputArchive archive;
  for (const auto& p : model.named_parameters()) archive.write("model/" + p.key(), p.value());
  for (const auto& b : model.named_buffers()) archive.write("model/" + b.key(), b.value(), /*is_buffer=*/true);
  if (optimizer) save_optimizer_state(archive, model, *optimizer);
  if (state) {
    archive.write("optimizer_name", c10::IValue(state->optimizer_name));
    archive.write("schedule", c10::IValue(state->schedule));
    archive.write("step", c10::IValue(state->step));
    archive.write("loader_epoch", c10::IValue(state->cursor.epoch));
    archive.write("loader_position", c10::IValue(state->cursor.position));
    archive.write("tokens_seen", c10::IValue(state->tokens_seen));
    archive.write("nonfinite_total", c10::IValue(state->nonfinite_total));
    archive.write("nonfinite_in_a_row", c10::IValue(state->nonfinite_in_a_row));
    archive.write("loss_scale", c10::IValue(state->loss_scale));
    archive.write("loss_scale_streak", c10::IValue(state->loss_scale_streak));
    if (!state->log_window.empty()) archive.write("log_window", torch::tensor(state->log_window, torch::kDouble));
    if (!state->data_identity.empty()) archive.write("data_identity", c10::IValue(state->data_identity));
    if (!state->task_state.empty()) archive.write("task_state", c10::IValue(state->task_state));
    if (!state->world_sizes.empty()) archive.write("world_sizes", world_sizes_tensor(state->world_sizes));
    // The random streams of this rank (rank 0 saves). Every rank seeds alike, so on resume each
    // rank sets rank 0's states into its own generators: the CPU's, and its training device's
    // (cuda:LOCAL_RANK, whatever the index); a multi-GPU run's ranks then take their own device
    // stream from rng_device_ranks (restore_rank_device_rng).
    const RandomStates rng = RandomStates::capture(parameters_device(model));
    archive.write("rng_cpu", rng.cpu);
    if (rng.device.defined()) archive.write("rng_device", rng.device);
    if (state->rng_device_ranks.defined()) archive.write("rng_device_ranks", state->rng_device_ranks);
  } else {
    archive.write("step", c10::IValue(int64_t{0}));  // a model-only file: no training state
  }
  archive.write("config", c10::IValue(config_yaml));
  archive.write("version", c10::IValue(std::string(kVersion) + "+" + kGitRevision));
  write_checkpoint_file(file, archive);
}

fs::path checkpoint_file(const fs::path& run_dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step_%08ld.pt", static_cast<long>(step));
  return checkpoint_dir(run_dir) / name;
}

fs::path save_checkpoint(const fs::path& run_dir, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                         const TrainState& state, const std::string& config_yaml, int64_t keep_last) {
  const fs::path dir = checkpoint_dir(run_dir);
  const fs::path file = checkpoint_file(run_dir, state.step);
  // The file (checksum inside) first, then the pointer: a crash in between leaves a verified
  // file that `latest` does not name yet, which resume finds by listing the folder.
  write_checkpoint(file, model, optimizer, &state, config_yaml);
  write_file_atomic(dir / "latest", file.filename().string() + "\n");
  remove_old(run_dir, state.step, keep_last);
  return file;
}

std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const fs::path& run_dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  const fs::path dir = checkpoint_dir(run_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  static const std::regex pattern(R"(step_(\d{1,18})\.pt)");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, pattern)) found.emplace_back(std::stoll(m[1]), e.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  const auto found = list_checkpoints(run_dir);
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    std::string why;
    if (verify_checkpoint(it->second, &why)) return it->second;
    log::warn("checkpoint", "{}: {}; falling back to the previous checkpoint", it->second.string(), why);
  }
  return std::nullopt;
}

CheckpointHeader read_checkpoint_header(const fs::path& file) {
  auto archive = open_checkpoint(file);
  c10::IValue v;
  if (!archive.try_read("config", v)) throw UserError(file.string() + ": checkpoint has no embedded config");
  CheckpointHeader h{v.toStringRef(), std::nullopt};
  static const std::regex tokenizer(R"(, tokenizer ([0-9a-f]{8}),)");  // as trainer.cpp writes the identity
  std::smatch m;
  if (archive.try_read("data_identity", v) && v.isString()) {
    const std::string identity = v.toStringRef();
    if (std::regex_search(identity, m, tokenizer)) h.tokenizer_crc = static_cast<uint32_t>(std::stoul(m[1].str(), nullptr, 16));
  }
  return h;
}

std::string read_checkpoint_config(const fs::path& file) { return read_checkpoint_header(file).config; }

CheckpointContents load_checkpoint(const fs::path& file, torch::nn::Module& model, torch::optim::Optimizer* optimizer) {
  auto archive = open_checkpoint(file);
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
  read_int("loss_scale_streak", out.state.loss_scale_streak);
  if (archive.try_read("loss_scale", v) && v.isDouble()) out.state.loss_scale = v.toDouble();
  if (torch::Tensor w; archive.try_read("log_window", w) && w.dim() == 1 && w.scalar_type() == torch::kDouble) {
    const auto h = w.contiguous();
    out.state.log_window.assign(h.data_ptr<double>(), h.data_ptr<double>() + h.numel());
  }
  if (archive.try_read("data_identity", v) && v.isString()) out.state.data_identity = v.toStringRef();
  if (archive.try_read("task_state", v) && v.isString()) out.state.task_state = v.toStringRef();
  archive.try_read("rng_device_ranks", out.state.rng_device_ranks);
  if (torch::Tensor w; archive.try_read("world_sizes", w) && w.dim() == 2 && w.size(1) == 2 && w.scalar_type() == torch::kLong)
    for (int64_t i = 0; i < w.size(0); ++i) out.state.world_sizes.emplace_back(w[i][0].item<int64_t>(), w[i][1].item<int64_t>());
  if (archive.try_read("optimizer_name", v)) out.state.optimizer_name = v.toStringRef();
  if (archive.try_read("schedule", v)) out.state.schedule = v.toStringRef();
  if (archive.try_read("config", v)) out.config_yaml = v.toStringRef();
  if (archive.try_read("version", v)) out.version = v.toStringRef();
  if (optimizer) {
    load_optimizer_state(archive, model, *optimizer, out.state.optimizer_name, file);
    RandomStates rng;
    rng.where = parameters_device(model);
    archive.try_read("rng_cpu", rng.cpu);
    if (rng.where.is_cuda()) archive.try_read("rng_device", rng.device);
    rng.restore();
  }
  return out;
}

}  // namespace rpe

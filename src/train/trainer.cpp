// MLM pretraining (see trainer.h): builds the tokenizer, corpus, model and optimizer, restores
// a checkpoint, and hands the optimizer steps to the engine with the MLM task; then the
// held-out evaluation and summary.json.
#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "config/model_size.h"
#include "data/mlm_dataset.h"
#include "data/pretrain_corpus.h"
#include "dist/all_or_none.h"
#include "dist/data_parallel.h"
#include "dist/rank0_only.h"
#include "dist/rendezvous.h"
#include "dist/replica_check.h"
#include "model/attention/registry.h"
#include "model/bert.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/mlm_task.h"
#include "train/optim.h"
#include "train/run_dir.h"
#include "util/atomic_file.h"
#include "util/atomic_writer.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/log.h"
#include "util/stop_signals.h"

namespace rpe {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Rank 0 trains a missing tokenizer, the others wait and read it (none trains its own: a node
// that does not see the run folder stops the run, on every rank). Training takes hours on a
// large corpus: the others wait on rank 0's heartbeat, not under train.dist_timeout_s.
std::unique_ptr<Tokenizer> shared_tokenizer(Config& cfg, const fs::path& run_dir, dist::DataParallel& dp) {
  const fs::path path = run_dir / "tokenizer.model";
  std::unique_ptr<Tokenizer> tokenizer;
  dist::rank0_only(dp, "building the tokenizer", [&] { tokenizer = make_tokenizer(cfg.data, path); });
  if (cfg.data.tokenizer == "sentencepiece" && cfg.data.tokenizer_model.empty())
    dist::require_same_on_every_rank(dp, {{"whether " + path.string() + " exists (1: yes)", fs::exists(path) ? 1 : 0}});
  tokenizer = dist::all_or_none(dp, "reading the tokenizer", [&] {
    return tokenizer ? std::move(tokenizer) : make_tokenizer(cfg.data, path);
  });
  if (cfg.model.vocab_size == 0) cfg.model.vocab_size = tokenizer->vocab_size();
  require(cfg.model.vocab_size >= tokenizer->vocab_size(),
          "model.vocab_size " + std::to_string(cfg.model.vocab_size) + " is smaller than the tokenizer's " +
              std::to_string(tokenizer->vocab_size()));
  return tokenizer;
}

// The training state of the latest checkpoint (weights and optimizer loaded), or step 0.
TrainState restore(const fs::path& run_dir, bool resume, BertModel& model, torch::optim::Optimizer& optimizer,
                   const TrainOptions& t, const std::string& data_identity) {
  TrainState state;
  state.optimizer_name = t.optimizer;
  state.schedule = t.schedule;
  state.data_identity = data_identity;
  if (!resume) return state;
  const auto ckpt = checkpoint_to_resume(run_dir, t.save_every);
  if (!ckpt) {
    log::warn("train", "--resume: no usable checkpoint in {}, starting from step 0", run_dir.string());
    return state;
  }
  auto loaded = load_checkpoint(*ckpt, *model, &optimizer).state;
  if (!loaded.optimizer_name.empty() && loaded.optimizer_name != t.optimizer)
    throw UserError(ckpt->string() + ": written by optimizer '" + loaded.optimizer_name + "' but train.optimizer is '" +
                    t.optimizer + "'");
  // The data position is an index into these sequences, in the order train.seed shuffles them:
  // in other data or another order it would mean others. (A checkpoint of before the seed was
  // part of it names the rest: compared on that.)
  const std::string& was = loaded.data_identity;
  const bool older = was.find(", order of train.seed ") == std::string::npos;
  if (!was.empty() && was != data_identity && !(older && data_identity.rfind(was + ", ", 0) == 0))
    throw UserError(ckpt->string() + ": trained on " + loaded.data_identity + ", but the data is now " + data_identity +
                    ": its data position would mean other sequences (train on the same data, or start a new run)");
  loaded.optimizer_name = t.optimizer;
  loaded.schedule = t.schedule;
  loaded.data_identity = data_identity;
  log::info("train", "resumed from {} at step {}", ckpt->string(), loaded.step);
  return loaded;
}

void write_summary(const fs::path& run_dir, const Config& cfg, const PretrainResult& r, const EngineResult& e,
                   int64_t world, const torch::Device& device) {
  const int64_t rss = peak_rss_bytes(), dev_peak = peak_device_bytes(device);
  nlohmann::json summary = {{"steps", r.steps},
                            {"first_loss", r.first_loss},
                            {"final_loss", r.final_loss},
                            {"valid_loss", r.valid_loss},
                            {"valid_accuracy", r.valid_accuracy},
                            {"wall_s", r.seconds},                    // this process, startup included
                            {"train_s", e.state.train_seconds},       // the training loop, resumes added up
                            {"tokens_seen", e.state.tokens_seen},
                            {"nonfinite_skipped", e.state.nonfinite_total},
                            {"world_size", world},  // this process's; the run's: world_sizes
                            {"world_sizes", world_size_stretches(e.state.world_sizes, e.state.step)},
                            {"precision", cfg.train.precision},
                            {"optimizer", cfg.train.optimizer},
                            {"peak_rss_bytes", rss},
                            {"peak_device_bytes", dev_peak},
                            {"checkpoint", e.checkpoint.filename().string()},
                            {"method", cfg.model.attention.method},
                            {"parameters", r.parameters},
                            {"position_parameters", r.position_parameters}};
  if (cfg.train.precision == "fp16") summary["loss_scale"] = e.state.loss_scale;  // where the dynamic scale ended
  write_file_atomic(run_dir / "summary.json", summary.dump(2) + "\n");
  if (std::isnan(r.valid_loss))
    log::info("valid", "held-out MLM loss: none (nothing held out, or no held-out token masked)");
  else
    log::info("valid", "held-out MLM loss {:.4f}, accuracy {:.3f}, perplexity {:.2f}", r.valid_loss, r.valid_accuracy,
              std::exp(r.valid_loss));
  log::info("run", "done in {} | {} tokens seen ({} rank{}) | peak RSS {:.0f} MiB{} | {} steps skipped | checkpoint {}",
            format_duration(r.seconds), e.state.tokens_seen, world, world == 1 ? "" : "s", static_cast<double>(rss) / (1 << 20),
            dev_peak >= 0 ? fmt::format(" | peak {} memory {:.0f} MiB", device.str(), static_cast<double>(dev_peak) / (1 << 20))
                          : std::string(),
            e.state.nonfinite_total, e.checkpoint.string());
}

// What pretraining makes of the config's lengths and schedule, said before any data is read:
// a learned absolute table with fewer rows than the sequence is refused (it would fail at the
// first forward pass, after the tokenizer and corpus); settings that are valid but rarely
// meant are warned about.
void check_settings(const Config& cfg) {
  const MethodInfo& info = method_info(cfg.model.attention.method);
  if (has_absolute_table(cfg.model) && cfg.data.max_seq_len > cfg.model.max_position)
    cfg.fail("data.max_seq_len", std::to_string(cfg.data.max_seq_len) + " exceeds model.max_position (" +
                                     std::to_string(cfg.model.max_position) + "), the rows of the learned absolute table");
  const auto& t = cfg.train;
  if (t.warmup_steps > t.max_steps)
    log::warn_rank0("train", "train.warmup_steps ({}) exceeds train.max_steps ({}): the lr rises to {:.0f}% of train.lr "
                    "and never decays", t.warmup_steps, t.max_steps, 100.0 * static_cast<double>(t.max_steps) /
                    static_cast<double>(t.warmup_steps));
  const auto& m = cfg.model;
  if (!info.clipped || (info.unclipped_at_zero && m.attention.max_relative == 0)) return;
  const int64_t n = m.max_position, k = m.attention.max_relative;
  if (k > n - 1)
    log::warn_rank0("model", "model.attention.max_relative ({}) exceeds model.max_position - 1 ({}): the table rows of "
                    "distances {}..{} are never trained at pretraining lengths", k, n - 1, n, k);
  else if (k == 0 && cfg.data.max_seq_len > n)
    log::warn_rank0("model", "data.max_seq_len ({}) exceeds model.max_position ({}): with max_relative 0 (k = n - 1), "
                    "distances of {} and more share the table's edge row", cfg.data.max_seq_len, n, n);
}

// A corpus in which masking selects no token (a single word of a few pieces: whole-word masking
// never splits one) would train on nothing, a loss of 0 and an accuracy of no token: refused.
// Held-out sequences like that leave no held-out loss: a warning, as for no held-out documents.
void require_maskable(const PretrainCorpus& corpus, const DataOptions& d, const Tokenizer& tok) {
  const MaskingOptions masking = MaskingOptions::from(d);
  const std::string why = fmt::format("masking takes whole words of at most data.mask_prob ({:g}) of a sequence's tokens "
                                      "(at least 1), and every word there is longer", d.mask_prob);
  const int64_t n = corpus.train->size();
  if (n > 0 && !any_maskable(*corpus.train, tok.special(), masking))  // n == 0: the loader says so
    throw UserError(fmt::format("data.train_files ({}): nothing to mask in the {} training sequence{}: {}; give a "
                                "larger corpus{}", excerpt(join(d.train_files), 80), n, n == 1 ? "" : "s", why,
                                d.whole_word ? " (or data.whole_word: false)" : ""));
  if (corpus.valid->size() > 0 && !any_maskable(*corpus.valid, tok.special(), masking))
    log::warn_rank0("data", "nothing to mask in the {} held-out sequences ({}): there will be no held-out loss",
                    corpus.valid->size(), why);
}

// The corpus line of the log: sizes, and the share of the sequences' slots that hold tokens
// (the rest is padding: data.packing decides how much, docs/data.md).
void log_corpus(const PretrainCorpus& corpus, int64_t train_tokens, const DataOptions& d, const Tokenizer& tok,
                double secs) {
  const double filled = 100.0 * static_cast<double>(train_tokens) /
                        static_cast<double>(std::max<int64_t>(1, corpus.train->size() * d.max_seq_len));
  log::info("data", "{} tokenizer, vocab {} | {} train sequences ({} tokens, {:.1f}% of slots: {} packing), {} held-out, "
            "length {} | {:.1f}s", tok.kind(), tok.vocab_size(), corpus.train->size(), train_tokens, filled, d.packing,
            corpus.valid->size(), d.max_seq_len, secs);
}

// The model on `device`, its attention path and recomputation chosen, described in the log.
BertModel build_model(const ModelOptions& o, const torch::Device& device, const std::string& recompute) {
  BertModel model(o);
  model->to(device);
  model->set_fused_attention(use_fused_attention(device, o.attention.backend));
  model->set_activation_checkpointing(parse_recompute(recompute));
  if (recompute != "none") log::info("model", "activation checkpointing: {}", describe_recompute(parse_recompute(recompute)));
  log::info("model", "{} layers, hidden {}, heads {} | position: {} | {:.2f}M parameters, {} in position method", o.layers,
            o.hidden, o.heads, model->position->describe(), static_cast<double>(model->parameter_count()) / 1e6,
            model->position_parameter_count());
  return model;
}

// Every rank read these by itself; across nodes they agree only on a shared file system.
void require_same_inputs(dist::DataParallel& dp, const std::string& config_yaml, uint32_t tokenizer_crc,
                         const PretrainCorpus& corpus, int64_t train_tokens, int64_t resume_step) {
  dist::require_same_on_every_rank(
      dp, {{"the resolved config (CRC-32)", crc32_update(0, config_yaml.data(), config_yaml.size())},
           {"the tokenizer (CRC-32 of its pieces)", tokenizer_crc},
           {"the training sequences", corpus.train->size()},
           {"the training tokens", train_tokens},
           {"the held-out sequences", corpus.valid->size()},
           {"the step it resumes from", resume_step}});
}

// A resumed run whose config changed (train.lr, model.dropout, ...: the checkpoint holds only
// what must match) names the keys that changed and keeps the config that ran until now as
// config.before_step_<N>.yaml, so that the folder tells what each stretch of the run ran with.
void keep_changed_config(const fs::path& run_dir, const Config& cfg, const std::string& config_yaml, int64_t step) {
  const fs::path file = run_dir / "config.yaml";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return;
  const std::string before = read_file(file);
  if (before == config_yaml) return;
  std::vector<std::string> changes;
  try {
    changes = config_differences(config_from_yaml(before, file.string()), cfg);
  } catch (const UserError&) {
    changes = {file.filename().string() + " (not readable as a config of this version)"};
  }
  if (changes.empty()) return;  // the same values, written otherwise
  const fs::path kept = run_dir / ("config.before_step_" + std::to_string(step) + ".yaml");
  if (!fs::exists(kept, ec)) write_file_atomic(kept, before);  // a second change at this step keeps the first
  log::warn("train", "--resume with a changed config: {}; the run goes on with the new values ({} keeps the old)",
            join(changes, ", "), kept.filename().string());
}

// Rank 0's files of a run about to train: config.yaml (only once the checkpoint took this
// config and the ranks agreed: a refused --resume leaves the run's own), and metrics.jsonl cut
// back to the checkpoint, with what summary.json takes from the rows before it.
void open_run_files(const fs::path& run_dir, const Config& cfg, const std::string& config_yaml, EngineSetup& setup,
                    TrainState& state) {
  const int64_t max_steps = cfg.train.max_steps;
  if (state.step > 0) keep_changed_config(run_dir, cfg, config_yaml, state.step);
  write_file_atomic(run_dir / "config.yaml", config_yaml);
  // Resumed from the final checkpoint (killed before summary.json): the final evaluation is redone.
  const bool finished = state.step >= max_steps;
  continue_metrics(run_dir / "metrics.jsonl", state, finished, setup);
  // A finished run resumed to train further is unfinished again: its old summary.json would
  // make `finetune` without --init take a mid-training checkpoint for the finished run.
  if (!finished) {
    std::error_code ec;
    fs::remove(run_dir / "summary.json", ec);
  }
}

// Trains in a folder rank 0 has readied: the run itself, after the ranks have met.
PretrainResult train_in_folder(const Config& cfg_in, const fs::path& run_dir, bool resume, const PretrainHooks& hooks,
                               dist::DataParallel& dp, const torch::Device& device, Clock::time_point start) {
  Config cfg = cfg_in;
  const auto& t = cfg.train;
  const bool chief = dp.rank() == 0;  // writes the run folder's files
  log::info("run", "run folder {} | {} | device {} | precision {} | {} rank(s), backend {}", run_dir.string(),
            describe_runtime(), device.str(), t.precision, dp.world(), dp.backend_name());
  const int64_t micro_batch = micro_batch_size(t, dp.world());
  check_settings(cfg);

  const auto tokenizer = shared_tokenizer(cfg, run_dir, dp);
  const auto t0 = Clock::now();
  PretrainCorpus corpus = dist::all_or_none(dp, "reading the corpus", [&] {
    PretrainCorpus c = build_corpus(cfg.data, *tokenizer);
    require_maskable(c, cfg.data, *tokenizer);
    return c;
  });
  const int64_t train_tokens = corpus.train->real_tokens();  // a scan for an in-memory corpus: once
  log_corpus(corpus, train_tokens, cfg.data, *tokenizer, std::chrono::duration<double>(Clock::now() - t0).count());
  const std::string config_yaml = to_yaml(cfg);

  const uint32_t tokenizer_crc = tokenizer_crc32(*tokenizer);
  const std::string data = fmt::format(
      "{} training sequences ({} tokens) of length {}, {} packing, tokenizer {:08x}, order of train.seed {}",
      corpus.train->size(), train_tokens, cfg.data.max_seq_len, cfg.data.packing, tokenizer_crc, t.seed);
  BertModel model = build_model(cfg.model, device, t.activation_checkpointing);
  auto optimizer = make_optimizer(*model, t);
  TrainState state =
      dist::all_or_none(dp, "loading the checkpoint", [&] { return restore(run_dir, resume, model, *optimizer, t, data); });
  restore_rank_device_rng(state, dp.rank(), dp.world(), device);  // multi-GPU: each rank's own dropout stream
  require_same_inputs(dp, config_yaml, tokenizer_crc, corpus, train_tokens, state.step);
  dp.broadcast_parameters(*model);  // after a resume too: every rank starts from rank 0's weights

  EngineSetup setup;
  setup.train = t;
  setup.device = device;
  setup.dp = &dp;
  setup.run_dir = run_dir;
  setup.config_yaml = config_yaml;
  setup.hooks = hooks;
  setup.stop_on_signals = true;  // a preempted run saves its step and ends (`--resume` continues it)
  setup.stop_at = time_limit_deadline(t, start);
  setup.flops_per_token = model_flops_per_token(cfg.model, tokenizer->vocab_size(), cfg.data.max_seq_len, cfg.data.mask_prob);
  // Rank 0's files, in one step every rank agrees on (a full disk stops them all at once, not
  // at the first step's all-reduce).
  dist::all_or_none(dp, "writing config.yaml and metrics.jsonl", [&] {
    if (chief) open_run_files(run_dir, cfg, config_yaml, setup, state);
  });
  MlmTask task(model, corpus.train, corpus.valid, *tokenizer, cfg, micro_batch, dp.rank(), dp.world(), device);
  task.set_fixed_shapes(t.cuda_graphs);  // a graph replays one set of shapes
  Engine engine(std::move(setup), *model, *optimizer, task);
  const EngineResult e = engine.run(state);

  PretrainResult result;
  result.run_dir = run_dir;
  result.steps = e.state.step;
  result.first_loss = e.first_loss;  // NaN (summary.json: null) when no logged step updated the weights
  result.final_loss = e.final_loss;
  const auto valid = engine.evaluate(e.state);  // every rank: the held-out pass is split over them
  if (!chief) {
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  }
  result.valid_loss = valid.value("loss", std::nan(""));
  result.valid_accuracy = valid.value("mlm_accuracy", std::nan(""));
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.parameters = model->parameter_count();
  result.position_parameters = model->position_parameter_count();
  write_summary(run_dir, cfg, result, e, dp.world(), device);
  return result;
}

}  // namespace

PretrainResult pretrain(const Config& cfg, const fs::path& run_dir, const RunDirRequest& folder,
                        const PretrainHooks& hooks) {
  const auto start = Clock::now();
  require_train_files(cfg, "pretraining");
  const auto& t = cfg.train;
  if (t.threads > 0) torch::set_num_threads(static_cast<int>(t.threads));
  torch::manual_seed(static_cast<uint64_t>(t.seed));  // same on every rank: identical init and dropout streams
  const dist::LaunchEnv env = dist::detect_launch_env();
  // Before the rendezvous: every rank knows the world size from its launcher, so a batch that does
  // not divide stops each one at once, not after the whole job has met (or one rank at the store).
  micro_batch_size(t, env.world);
  // The engine refuses it too, once everything is loaded (and for the cases it alone can see).
  if (t.cuda_graphs && env.distributed())
    throw UserError("train.cuda_graphs: one process outside a process group only for now (set it to false)");
  dist::DataParallel dp(env, [&] { return training_device(t.device, env.local_rank, env.group_ranks()); },
                        t.dist_timeout_s, t.bucket_mb);
  const torch::Device device = dp.device();
  const bool chief = dp.rank() == 0;
  // Only rank 0 checks, clears and logs into the folder, once every rank has joined: its refusal
  // of an existing run stops them all at once instead of leaving them at the rendezvous.
  const bool chief_resumes = dist::all_or_none(dp, "readying the run folder", [&] {
    return chief && prepare_run_dir(run_dir, folder);  // false for --resume of an empty folder
  });
  const bool resume = dp.any(chief_resumes);  // every rank follows rank 0's look
  log::FileSink sink(chief ? run_dir / "train.log" : fs::path());
  // A job script that always passes --resume starts its run this way; a mistyped --run-dir too.
  if (chief && folder.resume && !resume) log::warn("run", "--resume: no run in {} yet: starting a new run", run_dir.string());
  try {
    return train_in_folder(cfg, run_dir, resume, hooks, dp, device, start);
  } catch (const StopRequested&) {
    throw;  // no failure: its checkpoint is written and train.log says so
  } catch (const std::exception& e) {
    // A new run that fails on its inputs (missing corpus, bad vocabulary, ...) before it trains
    // leaves no folder behind, so the corrected command is not refused as "already exists". A
    // resumed run, one that has trained (metrics rows, checkpoints) or trained its tokenizer
    // (hours at scale; another rank's failure or a timeout comes as a UserError too), and one its
    // machine stopped (out of memory, a device error) keep everything, and train.log says what
    // went wrong; --resume continues them (with the tokenizer already trained).
    std::error_code ec;
    const fs::path metrics = run_dir / "metrics.jsonl";
    const bool stepped = (fs::exists(metrics, ec) && fs::file_size(metrics, ec) > 0) || !list_checkpoints(run_dir).empty();
    const bool tokenizer = fs::exists(run_dir / "tokenizer.model", ec);
    if (chief && !resume && !stepped && tokenizer)
      log::warn("run", "{} kept for its trained tokenizer.model: --resume reuses it as it is (other data.tokenizer_* "
                "settings or data: --overwrite)", run_dir.string());
    close_failed_run(e, chief && !resume && !stepped && !tokenizer, sink, run_dir);
    throw;
  }
}

}  // namespace rpe

// Fine-tuning driver (see finetune.h): resolves the config, reads the inputs (prepare.h), and
// per seed runs the task module (squad_task.h, glue_task.h) whose training goes through the
// engine (train/engine.h). Under torchrun every rank trains its share; rank 0 alone creates the
// run folder, evaluates and writes results (the other ranks wait at the next seed's broadcast,
// within train.dist_timeout_s).
#include "finetune/finetune.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <regex>

#include "dist/all_or_none.h"
#include "dist/data_parallel.h"
#include "dist/replica_check.h"
#include "finetune/glue_task.h"
#include "finetune/prepare.h"
#include "finetune/resume.h"
#include "finetune/squad_task.h"
#include "model/attention/registry.h"
#include "model/recompute.h"
#include "rpe/version.h"
#include "train/checkpoint.h"
#include "train/engine.h"
#include "train/run_dir.h"
#include "util/atomic_file.h"
#include "util/atomic_writer.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/log.h"
#include "util/stop_signals.h"

namespace rpe::finetune {
namespace fs = std::filesystem;

namespace {
// --init of a run folder takes its newest checkpoint: of a pretraining that has not finished (no
// summary.json; stopped, or still running), that is some step short of train.max_steps. Or it
// is the final one: a stop at the last step (train.time_limit_min, a signal) comes after the
// final checkpoint and before the final held-out evaluation, which writes summary.json; so
// does a kill during that evaluation. Those weights are the trained model: only the
// evaluation and summary.json (the cost table's) are missing, and `pretrain --resume` adds them.
void warn_unfinished(const std::string& init, const fs::path& checkpoint, int64_t max_steps) {
  std::smatch m;
  const std::string name = checkpoint.filename().string();
  static const std::regex step(R"(step_0*(\d{1,18})\.pt)");  // 18 digits fit int64: stoll cannot throw
  if (!std::regex_match(name, m, step)) {
    log::warn_rank0("finetune", "--init {}: its pretraining has not finished (no summary.json): fine-tuning from its "
                    "newest checkpoint, {} (of {} steps) ({})", init, name, max_steps, checkpoint.string());
  } else if (const int64_t at = std::stoll(m[1].str()); at < max_steps) {
    log::warn_rank0("finetune", "--init {}: its pretraining has not finished (no summary.json): fine-tuning from its "
                    "newest checkpoint, step {} of {} ({})", init, at, max_steps, checkpoint.string());
  } else {
    log::warn_rank0("finetune", "--init {}: its pretraining trained all its steps ({} of {}); only its final held-out "
                    "evaluation and summary.json are missing (it stopped after its last step, e.g. at "
                    "train.time_limit_min, or is still evaluating): fine-tuning from its final checkpoint ({}); "
                    "`pretrain --resume` of that run folder evaluates it and writes summary.json", init, at, max_steps,
                    checkpoint.string());
  }
}
}  // namespace

ResolvedConfig resolve_finetune_config(const FinetuneRequest& req) {
  ResolvedConfig r;
  if (req.init.empty()) {
    r.cfg = load_config(req.config_file, req.sets);
    r.pretrain_max_len = 0;  // not pretrained: the tables show no pretraining length, nor the paper's row
    if (r.cfg.data.tokenizer_model.empty())
      throw UserError(req.config_file.string() + ": without --init, data.tokenizer_model must name a tokenizer");
    return r;
  }
  const CheckpointSource source = resolve_checkpoint(req.init, "--init");
  const CheckpointHeader header = read_checkpoint_header(source.checkpoint);
  r = resolve_finetune_config_over(req, header.config, source.checkpoint.string(), source.run_dir);
  r.checkpoint = source.checkpoint;
  r.pretrained_tokenizer_crc = header.tokenizer_crc;
  std::error_code ec;
  if (fs::is_directory(req.init, ec) && !fs::exists(source.run_dir / "summary.json", ec))
    warn_unfinished(req.init, source.checkpoint, config_from_yaml(header.config, source.checkpoint.string()).train.max_steps);
  return r;
}

ResolvedConfig resolve_finetune_config_over(const FinetuneRequest& req, const std::string& base_yaml,
                                            const std::string& base_name, const fs::path& pretrain_dir) {
  ResolvedConfig r;
  r.pretrain_run = req.init;
  const Config base = config_from_yaml(base_yaml, base_name + " (embedded config)");
  // The pretraining's precision too (bf16 on GPUs), unless the fine-tuning config or a --set says:
  // a bf16 run fine-tuned in fp32 by default ran at a fraction of its speed without a word.
  r.cfg = load_config_over(base_yaml, base_name, {"model", "data"}, req.config_file, req.sets, {"train.precision"});
  r.pretrain_max_len = base.data.max_seq_len;
  // The weights' lineage (docs/checkpoints.md): fine-tuning them with another method than the one
  // they learned in pretraining is a method swap, which the result lines and saved models record.
  const std::string learned = base.model.weights_pretrained_with();
  r.cfg.model.pretrained_method = learned == r.cfg.model.attention.method ? "" : learned;
  auto& att = r.cfg.model.attention;
  if (r.cfg.model.max_position != base.model.max_position && att.max_relative == 0 &&
      base.model.attention.max_relative == 0 && !method_info(att.method).unclipped_at_zero) {
    att.max_relative = base.model.max_position - 1;  // keep the pretrained k (and table shapes)
    log::info("finetune", "model.max_position {} -> {}: keeping the pretrained clipping distance k = {}",
              base.model.max_position, r.cfg.model.max_position, att.max_relative);
  }
  if (r.cfg.data.tokenizer_model.empty()) {
    const fs::path tok = pretrain_dir / "tokenizer.model";
    if (r.cfg.data.tokenizer == "sentencepiece" && !fs::exists(tok))
      throw UserError("--init " + req.init + ": the pretraining tokenizer " + tok.string() +
                      " is missing (set data.tokenizer_model)");
    r.cfg.data.tokenizer_model = tok.string();
  }
  return r;
}

eval::ResultRow base_row(const Prepared& p, const BertModel& bert, const std::string& run_id, int64_t seed,
                         const fs::path& seed_dir) {
  eval::ResultRow r;
  r.run_id = run_id;
  std::error_code ec;
  const fs::path run = fs::absolute(seed_dir, ec).parent_path();
  r.run_dir = run.lexically_normal().string();
  r.run_started = p.run_started;
  r.method = p.rc.cfg.model.attention.method;
  // k only where the method clips distances (its registry entry says so); 0 = none
  const MethodInfo& info = method_info(r.method);
  const bool unclipped = info.unclipped_at_zero && p.rc.cfg.model.attention.max_relative == 0;
  r.k = info.clipped && !unclipped ? bert->position->clip_distance() : 0;
  const auto keys = bert->position->option_keys();  // log buckets, where the method reads them
  if (std::find(keys.begin(), keys.end(), "position_buckets") != keys.end())
    r.position_buckets = p.rc.cfg.model.attention.position_buckets;
  r.pretrain_run = p.rc.pretrain_run;
  r.pretrain_checkpoint = p.rc.checkpoint.filename().string();
  r.pretrain_max_len = p.rc.pretrain_max_len;
  if (!p.rc.pretrain_run.empty()) r.pretrain_method = p.rc.cfg.model.weights_pretrained_with();  // "": not pretrained
  r.seed = seed;
  r.select = p.rc.cfg.finetune.select;
  r.finetune_max_len = p.rc.cfg.finetune.max_seq_len;
  r.git_revision = kGitRevision;
  r.time = eval::utc_now();
  return r;
}

void remove_tree(const fs::path& path) { rpe::remove_tree(path); }

fs::path default_run_folder(const Config& cfg) {
  const fs::path dir = fs::path(cfg.run.root) / cfg.run.name;
  return cfg.finetune.task == "squad" ? dir : dir / cfg.finetune.task;
}

// What a results file must be, checked without creating anything: not a folder, and, where it
// has lines, a results file (lines are appended to what is there, and a last line without its
// newline, a write a crash cut short, is cut off first: a file of anything else, a checkpoint or
// the dev set named by mistake, would be damaged; refused, untouched).
void check_results_file(const fs::path& file) {
  const std::string name = "finetune.results_file " + file.string();
  std::error_code ec;  // a missing file is fine: it is created
  if (fs::is_directory(file, ec)) throw UserError(name + ": is a folder, not a file");
  if (fs::is_regular_file(file, ec) && fs::file_size(file, ec) > 0) {
    try {
      eval::read_results(file);
    } catch (const UserError& e) {
      throw UserError(name + ": not a results file: " + e.what());
    }
  }
}

// finetune.results_file gets a line after each evaluation: made ready now (its folder created,
// the file opened for appending), so a path that cannot take one stops the run before it trains.
void ready_results_file(const fs::path& file) {
  const std::string name = "finetune.results_file " + file.string();
  check_results_file(file);
  // Its own error_code: the checks above leave one set for a file that does not exist yet, and a
  // bare name ("r.jsonl", no folder part) has no folder to create that would clear it.
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  if (ec) throw UserError(name + ": cannot create its folder: " + ec.message());
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw UserError(name + ": cannot open it for appending: " + std::strerror(errno));
  ::close(fd);
}

namespace {

// What the run folder is refused or replaced under: --overwrite, never deleting an input.
RunDirRequest run_dir_request(const ResolvedConfig& rc, const FinetuneRequest& req) {
  const auto& f = rc.cfg.finetune;
  RunDirRequest request{req.resume, req.overwrite, /*can_resume=*/true};
  for (const std::string& input : {req.init, rc.checkpoint.string(), rc.cfg.data.tokenizer_model, f.train_file, f.dev_file,
                                   f.data_dir, f.glue_dir})
    if (!input.empty()) request.inputs.emplace_back(input);
  return request;
}

// Rank 0: refuses an existing run folder (unless --overwrite or --resume; never one holding an
// input), creates it and stores the resolved config. True when it continues a run (--resume).
bool create_run_folder(const fs::path& dir, Prepared& p, const FinetuneRequest& req) {
  const Config& cfg = p.rc.cfg;
  const auto& f = cfg.finetune;
  const bool resumed = prepare_run_dir(dir, run_dir_request(p.rc, req));
  if (req.resume && !resumed) log::warn("run", "--resume: no run in {} yet: starting a new run", dir.string());
  // This run's lines from now on; those of a run this one replaced (--overwrite) are older. A
  // resumed run's lines are of the run it continues (or the tables would take them for another).
  p.run_started = resumed ? resumed_run_started(f.results_file, dir) : eval::utc_now_ns();
  if (resumed) {
    ready_results_file(f.results_file);
    return true;  // config.yaml is the run's own (check_resumable compared it)
  }
  try {  // after the folder: the results file may be inside it (the reproduction scripts put it there)
    ready_results_file(f.results_file);
  } catch (const UserError&) {
    discard_new_run_folder(dir);  // new and empty: nothing of a run is lost
    throw;
  }
  write_file_atomic(dir / "config.yaml", to_yaml(cfg));
  return false;
}

// Every seed of a fine-tuning run, in the folder rank 0 created, after the ranks checked that they
// read the same inputs.
FinetuneOutcome train_seeds(Prepared& p, const FinetuneRequest& req, dist::DataParallel& dp, const fs::path& dir,
                            std::optional<std::chrono::steady_clock::time_point> stop_at) {
  const auto& cfg = p.rc.cfg;
  const torch::Device device = dp.device();
  // Every rank read these by itself; across nodes they agree only on a shared file system.
  const std::string yaml = to_yaml(cfg);
  size_t dev_items = p.dev_f.size();
  for (const auto& split : p.dev) dev_items += split.ids.size();
  // The items' token ids, not only their count: the ranks split the training items and score
  // their own copies of the dev items (a stale file on one node would mix its predictions in).
  uint32_t train_crc = 0, dev_crc = 0;
  auto add = [](uint32_t& crc, const std::vector<int64_t>& ids) {
    const int64_t n = static_cast<int64_t>(ids.size());
    crc = crc32_update(crc32_update(crc, &n, sizeof n), ids.data(), ids.size() * sizeof(int64_t));
  };
  for (const auto& f : p.train_f) add(train_crc, f.ids);
  for (const auto& ids : p.train_ids) add(train_crc, ids);
  for (const auto& f : p.dev_f) add(dev_crc, f.ids);
  for (const auto& split : p.dev)
    for (const auto& ids : split.ids) add(dev_crc, ids);
  dist::require_same_on_every_rank(dp, {{"the resolved config (CRC-32)", crc32_update(0, yaml.data(), yaml.size())},
                                        {"the tokenizer (CRC-32 of its pieces)", tokenizer_crc32(*p.tok)},
                                        {"the training items", p.train_f.size() + p.train_ids.size()},
                                        {"the training items' tokens (CRC-32)", train_crc},
                                        {"the dev items", dev_items},
                                        {"the dev items' tokens (CRC-32)", dev_crc}});

  // What every seed's context shares: the config its checkpoints embed, the items their data
  // position indexes, the time limit and the command that continues the run.
  SeedContext base;
  base.device = device;
  base.dp = &dp;
  base.resume = req.resume;
  base.config_yaml = yaml;
  base.data_identity = fmt::format("{} training items (tokens CRC-32 {:08x})", p.train_f.size() + p.train_ids.size(),
                                   train_crc);
  base.stop_at = stop_at;
  base.resume_hint = "the same `rpe-train finetune " + (p.squad ? std::string("squad") : "glue --task " + cfg.finetune.task) +
                     "` command with --resume continues the run";
  std::vector<int64_t> seeds = req.seeds.empty() ? std::vector<int64_t>{cfg.train.seed} : req.seeds;
  FinetuneOutcome out{dir, {}};
  bool trained_one = false;
  // Held over every seed, not only its training (the engine leaves these in place): a stop asked
  // in a seed's final evaluation lets it finish and write its results, then stops before the
  // next seed (stop_between_seeds) instead of ending the process with the seed's training lost.
  const StopSignals signals;
  for (int64_t seed : seeds) {
    SeedContext ctx = base;
    ctx.dir = dir / ("seed" + std::to_string(seed));
    ctx.run_id = dir.filename().string() + "/seed" + std::to_string(seed);
    ctx.seed = seed;
    // Rank 0's folder, before the seed's collectives: a failure (a full disk) stops every rank at
    // once. A finished seed of a resumed run is skipped by all of them, on rank 0's word.
    const bool finished = dist::all_or_none(dp, "readying " + ctx.dir.string(), [&] {
      return ctx.chief() && req.resume && finished_seed(ctx, cfg.finetune.results_file);
    });
    if (dp.any(finished)) continue;
    // The engine reads the time limit during a seed's training only: one that passed in the
    // previous seed's final evaluation stops the run here, not after the next seed's first step.
    stop_between_seeds(ctx, trained_one, cfg.train.time_limit_min);
    dist::all_or_none(dp, "readying " + ctx.dir.string(), [&] {
      if (ctx.chief()) ready_seed_folder(ctx, req.resume);
    });
    trained_one = true;
    const auto rows = p.squad ? run_squad_seed(p, ctx) : run_glue_seed(p, ctx);  // rank 0's, in results_file
    out.rows.insert(out.rows.end(), rows.begin(), rows.end());
    // Its checkpoints were for resuming it (the optimizer state is twice the model): the model
    // the keeper kept (seed<N>/model/) is what stays.
    dist::all_or_none(dp, "removing " + (ctx.dir / "checkpoints").string(), [&] {
      if (ctx.chief()) remove_tree(ctx.dir / "checkpoints");
    });
  }
  if (const int asked = StopSignals::requested(); asked != 0)  // in the last seed's final evaluation
    log::info("finetune", "{} came after the last seed's training: the run finished", StopSignals::name(asked));
  return out;
}

}  // namespace

FinetuneOutcome run_finetune(const FinetuneRequest& req) {
  Prepared p;
  p.rc = resolve_finetune_config(req);
  const auto& cfg = p.rc.cfg;
  // train.time_limit_min counts from the start of the command, as in pretraining: past it, the
  // seed in training stops after a step with a checkpoint (exit code 75; --resume continues).
  const auto stop_at = time_limit_deadline(cfg.train, std::chrono::steady_clock::now());
  if (cfg.train.threads > 0) torch::set_num_threads(static_cast<int>(cfg.train.threads));
  const dist::LaunchEnv env = dist::detect_launch_env();
  micro_batch_size(cfg.train, env.world);  // the same verdict on every rank, before the rendezvous
  dist::DataParallel dp(env, [&] { return training_device(cfg.train.device, env.local_rank, env.group_ranks()); },
                        cfg.train.dist_timeout_s, cfg.train.bucket_mb);
  const torch::Device device = dp.device();
  // "ft5/" is the folder ft5: its name makes the results' run ids.
  const fs::path dir = folder_path(req.run_dir.empty() ? default_run_folder(cfg) : fs::path(req.run_dir));
  // Rank 0's outputs, refused before the inputs are read and tokenized (minutes on the full
  // SQuAD): an existing run folder without --overwrite, a results file that cannot take a line.
  // Nothing is created yet; create_run_folder checks again when it does.
  dist::all_or_none(dp, "checking the run folder and finetune.results_file", [&] {
    if (dp.rank() != 0) return;
    check_run_dir(dir, run_dir_request(p.rc, req));
    std::error_code exists_ec;
    if (req.resume && fs::is_directory(dir, exists_ec) && !fs::is_empty(dir, exists_ec)) check_resumable(dir, cfg);
    // One inside a folder --overwrite replaces goes with it (the reproduction scripts keep theirs there).
    std::error_code ec;
    const fs::path results = fs::weakly_canonical(cfg.finetune.results_file, ec), run = fs::weakly_canonical(dir, ec);
    const bool replaced = req.overwrite && !ec && results.string().rfind(run.string() + "/", 0) == 0;
    if (!replaced) check_results_file(cfg.finetune.results_file);
  });
  // After the ranks have met, each reads the data and checks the checkpoint's shapes and the
  // lengths (once, before anything is written); a rank that cannot stops them all at once.
  dist::all_or_none(dp, "reading the fine-tuning inputs", [&] {
    read_inputs(p, req);
    BertModel probe(cfg.model);
    load_encoder(probe, p, longest_input(p), /*report=*/true);
    log::info("model", "{} layers, hidden {} | position: {} | init {} | device {} | precision {}", cfg.model.layers,
              cfg.model.hidden, probe->position->describe(), p.rc.checkpoint.empty() ? "random" : p.rc.checkpoint.string(),
              device.str(), cfg.train.precision);
    if (cfg.train.activation_checkpointing != "none")
      log::info("model", "activation checkpointing: {}", describe_recompute(parse_recompute(cfg.train.activation_checkpointing)));
  });
  // Rank 0's refusal of an existing folder stops every rank at once.
  const bool resumed = dist::all_or_none(dp, "creating the run folder", [&] {
    return dp.rank() == 0 && create_run_folder(dir, p, req);
  });
  log::FileSink sink(dp.rank() == 0 ? dir / "finetune.log" : fs::path());  // rank 0 logs into it
  try {
    return train_seeds(p, req, dp, dir, stop_at);
  } catch (const StopRequested&) {
    throw;  // no failure: the seed's checkpoint is written and finetune.log says so
  } catch (const std::exception& e) {
    // As pretraining does (train/trainer.cpp): a new folder whose run stopped on a user error
    // before any seed began (the ranks disagree on the config or the data: a node's stale copy)
    // holds nothing of a run and goes, so that the corrected command is not refused as "already
    // exists"; otherwise finetune.log keeps the error as its last line, as train.log does.
    std::error_code ec;
    const bool began = fs::exists(dir / ("seed" + std::to_string(req.seeds.empty() ? cfg.train.seed : req.seeds[0])), ec);
    close_failed_run(e, dp.rank() == 0 && !began && !resumed, sink, dir);  // a resumed run's folder stays
    throw;
  }
}

}  // namespace rpe::finetune

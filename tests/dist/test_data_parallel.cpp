// Multi-process data parallelism, end to end: the rpe-train binary is launched as 2 ranks
// (the torchrun environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) on CPU and must end
// with the parameters of one process training on the same global batch (dropout off, <= 1e-6).
// A rank that dies makes the survivor exit with a clear error within the timeout; ranks that
// read different inputs (a run folder not shared, a stale copy of it) all stop at the start
// with one line. On two Gloo ranks (this test binary relaunched as both): the all-reduce
// overlapped with backward (gradient hooks) equals the one after backward, fp16's loss scale,
// skipped steps and weights stay the same on every rank, and replicas that diverge stop the
// run at the next checkpoint; a signal that reaches one rank stops both after the same step.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>

#include "../train/tiny_run.h"
#include "../train/toy_engine.h"
#include "launch_ranks.h"
#include "dist/data_parallel.h"
#include "dist/replica_check.h"
#include "model/bert.h"
#include "train/checkpoint.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/stop_signals.h"
#include "test_models.h"
#include "test_paths.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;
using test::free_port;
using test::launch_pair;
using test::pretrain_cmd;
using test::run_shell;
using test::run_two_ranks;
using test::slurp;

std::vector<torch::Tensor> params_of(const fs::path& run) {
  const auto file = latest_checkpoint(run);
  EXPECT_TRUE(file.has_value()) << run;
  if (!file) return {};
  BertModel model(config_from_yaml(read_checkpoint_config(*file), file->string()).model);
  load_checkpoint(*file, *model, nullptr);
  return model->parameters();
}

void with_env(const std::map<std::string, std::string>& vars, const std::function<void()>& body) {
  for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  body();
  for (const auto& [k, v] : vars) ::unsetenv(k.c_str());
}

TEST(LaunchEnv, ReadsTorchrunThenMpiThenSlurm) {
  with_env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "1234"}},
           [] {
             const auto e = dist::detect_launch_env();
             EXPECT_EQ(e.rank, 3);
             EXPECT_EQ(e.world, 8);
             EXPECT_EQ(e.local_rank, 1);
             EXPECT_EQ(e.master_addr, "node7");
             EXPECT_EQ(e.master_port, 1234);
             EXPECT_EQ(e.launcher, "torchrun");
           });
  with_env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "2"}, {"SLURM_STEP_ID", "0"}}, [] {
    const auto e = dist::detect_launch_env();
    EXPECT_EQ(e.rank, 5);
    EXPECT_EQ(e.world, 6);
    EXPECT_EQ(e.local_rank, 2);
    EXPECT_EQ(e.launcher, "slurm");
  });
  with_env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, [] {
    EXPECT_EQ(dist::detect_launch_env().launcher, "mpirun");
  });
  // A job over several nodes without MASTER_ADDR would meet at 127.0.0.1 on every node: refused.
  with_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}, {"SLURM_NNODES", "2"}, {"SLURM_STEP_ID", "3"}}, [] {
    try {
      dist::detect_launch_env();
      ADD_FAILURE() << "a 2-node Slurm job without MASTER_ADDR was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("MASTER_ADDR is not set and this slurm job spans several nodes"),
                std::string::npos) << e.what();
    }
  });
  with_env({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "16"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"},
            {"MASTER_ADDR", "node1"}},
           [] { EXPECT_EQ(dist::detect_launch_env().master_addr, "node1"); });
  // The launcher's job id names the store keys (a second job on the same port keeps to its own),
  // and, without MASTER_PORT, the port: two jobs on one node meet at ports of their own, each in
  // [15000, 32000) (FNV-1a of "4242.0" is 0xcce8c46a80153245: 15000 + it mod 17000 = 22381).
  auto slurm_job = [](const char* id, const char* step, const char* port) {
    std::map<std::string, std::string> vars = {
        {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", id}, {"SLURM_STEP_ID", step}};
    if (port) vars["MASTER_PORT"] = port;
    dist::LaunchEnv e;
    with_env(vars, [&] { e = dist::detect_launch_env(); });
    return e;
  };
  EXPECT_EQ(slurm_job("4242", "0", nullptr).job, "4242.0");
  EXPECT_EQ(slurm_job("4242", "0", nullptr).master_port, 22381);
  EXPECT_NE(slurm_job("4243", "0", nullptr).master_port, 22381);
  EXPECT_NE(slurm_job("4242", "1", nullptr).master_port, 22381);
  EXPECT_EQ(slurm_job("4242", "0", "29501").master_port, 29501);  // MASTER_PORT given: taken as it is
  with_env({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"PMIX_NAMESPACE", "prterun-n1-77@1"}},
           [] { EXPECT_EQ(dist::detect_launch_env().job, "prterun-n1-77@1"); });
  // mpirun inside an sbatch script: every process inherits the script's SLURM_PROCID=0 and
  // SLURM_NTASKS; its own rank is Open MPI's.
  with_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}, {"OMPI_COMM_WORLD_RANK", "3"},
            {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}},
           [] {
             const auto e = dist::detect_launch_env();
             EXPECT_EQ(e.rank, 3);
             EXPECT_EQ(e.world, 8);
             EXPECT_EQ(e.local_rank, 3);
             EXPECT_EQ(e.launcher, "mpirun");
           });
  // rpe-train run by the sbatch script itself (or an salloc shell): the allocation's SLURM_PROCID=0
  // of SLURM_NTASKS, but no srun task (no SLURM_STEP_ID). One process, warned about, not rank 0
  // of 8 waiting at the rendezvous for ranks nobody started.
  with_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "4242"}}, [] {
    const auto e = dist::detect_launch_env();
    EXPECT_EQ(e.world, 1);
    EXPECT_FALSE(e.distributed());
  });
  EXPECT_EQ(dist::detect_launch_env().world, 1);
  EXPECT_FALSE(dist::detect_launch_env().distributed());
  with_env({{"RPE_TRAIN_GROUP_OF_ONE", "1"}}, [] {  // one process in a process group of its own
    const auto e = dist::detect_launch_env();
    EXPECT_EQ(e.world, 1);
    EXPECT_TRUE(e.group_of_one);
    EXPECT_TRUE(e.distributed());
  });
  with_env({{"RPE_TRAIN_GROUP_OF_ONE", "0"}}, [] { EXPECT_FALSE(dist::detect_launch_env().distributed()); });
  with_env({{"RPE_TRAIN_GROUP_OF_ONE", "yes"}}, [] {
    EXPECT_EQ(test::user_error([] { dist::detect_launch_env(); }),
              "environment variable RPE_TRAIN_GROUP_OF_ONE='yes' is not 0 or 1");
  });
  with_env({{"RANK", "4"}, {"WORLD_SIZE", "2"}}, [] { EXPECT_THROW(dist::detect_launch_env(), UserError); });
  with_env({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, [] { EXPECT_THROW(dist::detect_launch_env(), UserError); });
}

// Each process of a multi-process run on its own GPU: cuda:LOCAL_RANK when it sees the node's
// GPUs (torchrun), cuda:0 when it sees only its own (Slurm --gpus-per-task=1); refused when it
// cannot have one, or when train.device names one GPU for every process (NCCL: duplicate GPU).
TEST(LaunchEnv, EachProcessTakesItsOwnGpu) {
  EXPECT_EQ(rank_gpu(0, 8), 0);
  EXPECT_EQ(rank_gpu(7, 8), 7);
  EXPECT_EQ(rank_gpu(3, 1), 0);
  const auto few = test::user_error([] { rank_gpu(4, 2); });
  EXPECT_NE(few.find("rank-local process 4 (LOCAL_RANK) needs GPU cuda:4 but sees only 2"), std::string::npos) << few;
  const auto one = test::user_error([] { training_device("cuda:1", 0, /*group_ranks=*/2); });
  EXPECT_NE(one.find("train.device: 'cuda:1' would put every process of this multi-process run on one GPU"),
            std::string::npos)
      << one;
  EXPECT_EQ(training_device("cpu", 3, /*group_ranks=*/2), torch::Device(torch::kCPU));
  // A group of one (RPE_TRAIN_GROUP_OF_ONE) may name its GPU: refused here only for want of one.
  if (!torch::cuda::is_available()) {
    const auto alone = test::user_error([] { training_device("cuda:1", 0, /*group_ranks=*/1); });
    EXPECT_EQ(alone.find("multi-process"), std::string::npos) << alone;
  }
}

// Pretrains `sets` in one process and on two Gloo ranks with the same global batch: the weights
// must agree and have moved from their initialisation.
void expect_two_ranks_train_as_one(const std::string& sets, const std::string& name) {
  const fs::path single = test::fresh_dir(name + "_single"), pair = test::fresh_dir(name + "_pair");
  ASSERT_EQ(run_shell(pretrain_cmd(single, sets) + " > " + (single.string() + ".log") + " 2>&1"), 0)
      << slurp(single.string() + ".log");
  ASSERT_EQ(launch_pair(pretrain_cmd(pair, sets), pretrain_cmd(pair, sets), pair), 0)
      << slurp(pair.string() + ".r0.log") << slurp(pair.string() + ".r1.log");
  EXPECT_NE(slurp(pair.string() + ".r0.log").find("rank 0/2"), std::string::npos);
  const auto a = params_of(single), b = params_of(pair);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  EXPECT_LE(worst, 1e-6);
  // Both trained: the weights left their common initialisation (seed 7).
  torch::manual_seed(7);
  BertModel init(config_from_yaml(read_checkpoint_config(*latest_checkpoint(single)), "init").model);
  EXPECT_GT((init->parameters()[0] - a[0]).abs().max().item<double>(), 1e-4);
  const std::string summary = slurp(pair / "summary.json");
  EXPECT_NE(summary.find("\"world_size\": 2"), std::string::npos) << summary;
}

const char* const kNoDropout = "--set train.max_steps=4 --set model.dropout=0 --set model.attention_dropout=0";

TEST(DataParallel, TwoProcessesMatchOneProcessWithTheSameGlobalBatch) {
  expect_two_ranks_train_as_one(kNoDropout, "dp");
}

// DeBERTa's shared table gets a gradient from each layer's recomputed backward (GradSync counts them).
TEST(DataParallel, TwoProcessesMatchOneProcessWithRecomputedDebertaLayers) {
  // Appended rather than `std::string(kNoDropout) + "..."`: GCC 12 warns falsely on that
  // (-Warray-bounds in the inlined memcpy of operator+).
  std::string sets = kNoDropout;
  sets += " --set model.attention.method=deberta --set train.activation_checkpointing=layers";
  expect_two_ranks_train_as_one(sets, "dp_deberta");
}

// Whether two runs logged the same training losses, to `tol` (relative); returns the rows compared.
int64_t expect_same_losses(const fs::path& a_dir, const fs::path& b_dir, double tol) {
  const auto a = test::read_jsonl(a_dir / "metrics.jsonl"), b = test::read_jsonl(b_dir / "metrics.jsonl");
  EXPECT_EQ(a.size(), b.size()) << a_dir << " vs " << b_dir;
  int64_t rows = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i].contains("split") || !a[i].contains("loss")) continue;
    ++rows;
    const double x = a[i].at("loss").get<double>(), y = b[i].at("loss").get<double>();
    EXPECT_LE(std::abs(x - y), tol * std::abs(x)) << a_dir << " step " << a[i]["step"] << ": " << x << " vs " << y;
  }
  return rows;
}

// One process in a process group of its own (RPE_TRAIN_GROUP_OF_ONE=1, as torchrun
// --nproc-per-node=1 launches it) against one process without: the multi-process path on one
// device (rendezvous, broadcast, the all-reduce overlapped with backward over two micro-batches,
// the checks across ranks at the checkpoint; for fine-tuning, the dev set scored in shares)
// trains as one process does. On the CPU that path is Gloo's and the weights are equal to the
// bit; on a GPU it is NCCL's, the one check of it a machine with one GPU allows, and CUDA's
// atomics may order sums differently from run to run: the logged losses agree to `loss_tol`
// (relative). Dropout stays on: the same streams either way.
void expect_group_of_one_trains_as_one(const std::string& device, const std::string& backend, double loss_tol) {
  const std::string on = " --set train.log_every=1 --set train.device=" + device;
  const std::string sets = "--set train.max_steps=4 --set train.grad_accum=2" + on;
  const fs::path single = test::fresh_dir("group1_" + device + "_single"), group = test::fresh_dir("group1_" + device);
  const std::string env = "RPE_TRAIN_GROUP_OF_ONE=1 RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(free_port()) + " timeout 120 ";
  auto run = [&](const std::string& cmd, const fs::path& log) {
    ASSERT_EQ(run_shell(cmd + " > " + log.string() + " 2>&1"), 0) << slurp(log);
  };
  run(pretrain_cmd(single, sets), single.string() + ".log");
  run(env + pretrain_cmd(group, sets), group.string() + ".log");
  const std::string log = slurp(group / "train.log");
  EXPECT_NE(log.find("rank 0/1 (local 0) via torchrun"), std::string::npos) << log;
  EXPECT_NE(log.find("| backend " + backend), std::string::npos) << log;
  EXPECT_EQ(expect_same_losses(single, group, loss_tol), 4);
  // Fine-tuning SQuAD from the single run's model, both ways.
  const fs::path ft_single = single / "ft", ft_group = group / "ft";
  run(test::finetune_cmd(single, ft_single, on + " --seeds 1"), single.string() + ".ft.log");
  run(env + test::finetune_cmd(single, ft_group, on + " --seeds 1"), group.string() + ".ft.log");
  EXPECT_NE(slurp(group.string() + ".ft.log").find("| backend " + backend), std::string::npos);
  EXPECT_GT(expect_same_losses(ft_single / "seed1", ft_group / "seed1", loss_tol), 0);
  if (loss_tol > 0) return;
  const auto pa = params_of(single), pb = params_of(group);
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "parameter " << i;
  const auto results = [](const fs::path& ft) { return nlohmann::json::parse(slurp(ft / "seed1" / "results.json")); };
  const auto ra = results(ft_single), rb = results(ft_group);
  for (const char* key : {"exact", "f1", "total", "steps"}) EXPECT_EQ(ra[key], rb[key]) << key;
}

TEST(DataParallel, AGroupOfOneOnGlooTrainsAsOneProcess) { expect_group_of_one_trains_as_one("cpu", "gloo", 0.0); }

TEST(DataParallel, CudaGroupOfOneOnNcclTrainsAsOneProcess) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_group_of_one_trains_as_one("cuda", "nccl", 1e-4);
}

// A node that does not see the run folder rank 0 writes: it must neither train a tokenizer of
// its own nor leave rank 0 waiting; both stop at once with one line (exit 2 each).
TEST(DataParallel, RankThatDoesNotSeeTheRunFolderStopsEveryRank) {
  const fs::path seen = test::fresh_dir("dp_seen"), unseen = test::fresh_dir("dp_unseen");
  fs::remove_all(unseen);
  // The tokenizer is trained into the run folder (by rank 0), not read from the test's data.
  const std::string sets = "--set train.max_steps=2 --set data.tokenizer_model=\"\" --set data.tokenizer_vocab_size=200";
  ASSERT_EQ(launch_pair(pretrain_cmd(seen, sets), pretrain_cmd(unseen, sets), seen), 22);
  for (const char* r : {".r0.log", ".r1.log"}) {
    const std::string log = slurp(seen.string() + r);
    EXPECT_NE(log.find("error: ranks disagree on whether "), std::string::npos) << log;
    EXPECT_NE(log.find("tokenizer.model exists (1: yes): rank 0 has 1, rank 1 has 0; every rank must read the same"),
              std::string::npos)
        << log;
  }
  EXPECT_FALSE(fs::exists(unseen / "tokenizer.model"));
}

// --resume where one node's run folder is a stale copy (its newest checkpoint is older): the
// ranks would train different numbers of steps and hang at the end; they stop at the start.
TEST(DataParallel, RanksResumingFromDifferentCheckpointsStopAtOnce) {
  const fs::path run = test::fresh_dir("dp_resume"), stale = test::tiny_data_dir() / "dp_resume_stale";
  const std::string sets = "--set train.save_every=2 --set train.keep_checkpoints=5";
  ASSERT_EQ(run_shell(pretrain_cmd(run, sets + " --set train.max_steps=4") + " > " + run.string() + ".log 2>&1"), 0)
      << slurp(run.string() + ".log");
  fs::remove_all(stale);
  fs::copy(run, stale, fs::copy_options::recursive);
  fs::remove(stale / "checkpoints" / "step_00000004.pt");
  const std::string more = sets + " --set train.max_steps=6";
  ASSERT_EQ(launch_pair(pretrain_cmd(run, more, "--resume"), pretrain_cmd(stale, more, "--resume"), run), 22);
  for (const char* r : {".r0.log", ".r1.log"}) {
    const std::string log = slurp(run.string() + r);
    EXPECT_NE(log.find("error: ranks disagree on the step it resumes from: rank 0 has 4, rank 1 has 2; "),
              std::string::npos)
        << log;
  }
}

// Fine-tuning checks the same: here the ranks were given different settings (as nodes reading
// different copies of a config file would be).
TEST(DataParallel, FineTuningRanksWithDifferentConfigsStopAtOnce) {
  const fs::path ft = test::tiny_data_dir() / "dp_ft";
  fs::remove_all(ft);
  auto finetune = [&](int64_t examples) {
    // Appended, not "literal" + std::string&&: GCC 13 warns falsely on that (-Warray-bounds).
    std::string limit = "--set finetune.max_train_examples=";
    limit += std::to_string(examples);
    return test::finetune_cmd(test::tiny_pretrained_run(), ft, limit);
  };
  ASSERT_EQ(launch_pair(finetune(16), finetune(24), ft), 22);
  for (const char* r : {".r0.log", ".r1.log"}) {
    const std::string log = slurp(ft.string() + r);
    EXPECT_NE(log.find("error: ranks disagree on the resolved config (CRC-32): rank 0 has "), std::string::npos) << log;
  }
  // Nothing of a run began: the new folder goes (as a pretraining run's does), so the corrected
  // job is not refused as "already exists" (it was, until rank 0 removed it).
  EXPECT_FALSE(fs::exists(ft));
  EXPECT_EQ(launch_pair(finetune(16), finetune(16), ft), 0) << slurp(ft.string() + ".r0.log");
}

// A fine-tuning run that stops once a seed has begun (every loss non-finite: lr 1e30) keeps its
// folder, and rank 0's finetune.log ends with the error line, as train.log does (it had none).
TEST(DataParallel, AStoppedFineTuningRunKeepsItsErrorInFinetuneLog) {
  const fs::path ft = test::tiny_data_dir() / "dp_ft_stopped";
  fs::remove_all(ft);
  const std::string cmd = test::finetune_cmd(test::tiny_pretrained_run(), ft, "--set train.lr=1e30");
  ASSERT_EQ(launch_pair(cmd, cmd, ft), 22) << slurp(ft.string() + ".r0.log");
  const std::string log = slurp(ft / "finetune.log");
  const auto last = log.rfind('\n', log.size() - 2);
  EXPECT_NE(log.find(" error training stopped at step ", last), std::string::npos) << log;
}

// The same dev file name, another content on one node (a stale copy): the ranks score their own
// copies (dist/sharded_eval.h), so they compare the items' tokens, not only their count. Rank 1
// runs in a folder whose dev.json has one question's words reordered: as many windows, other ids.
TEST(DataParallel, FineTuningRanksWithDifferentDevFilesStopAtOnce) {
  const fs::path ft = test::fresh_dir("dp_ft_dev");
  fs::remove_all(ft);
  const fs::path a = test::fresh_dir("dp_ft_dev_a"), b = test::fresh_dir("dp_ft_dev_b");
  const std::string dev = slurp(test::source_dir() + "/data/sample/squad/dev-v1.1.json");
  const std::string question = "When does Tara repair the fence?";
  ASSERT_NE(dev.find(question), std::string::npos);
  std::string other = dev;
  other.replace(other.find(question), question.size(), "When does Tara the fence repair?");
  std::ofstream(a / "dev.json") << dev;
  std::ofstream(b / "dev.json") << other;
  auto in = [&](const fs::path& dir) {
    return "sh -c \"cd " + dir.string() + " && exec " +
           test::finetune_cmd(test::tiny_pretrained_run(), ft, "--set finetune.dev_file=dev.json") + "\"";
  };
  ASSERT_EQ(launch_pair(in(a), in(b), ft), 22);
  for (const char* r : {".r0.log", ".r1.log"}) {
    const std::string log = slurp(ft.string() + r);
    EXPECT_NE(log.find("error: ranks disagree on the dev items' tokens (CRC-32): rank 0 has "), std::string::npos) << log;
  }
}

TEST(DataParallel, DeadRankMakesTheOtherExitWithinTheTimeout) {
  const fs::path run = test::fresh_dir("dp_dead");
  const std::string sets = "--set train.max_steps=100000 --set train.dist_timeout_s=5";
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " WORLD_SIZE=2";
  // Rank 1 is SIGKILLed once rank 0 logs its first training step; rank 0 must then fail on its
  // own (dist_timeout_s = 5), well before the outer `timeout 90`.
  const std::string r0_log = run.string() + ".r0.log";
  const std::string launch = "(" + env + " RANK=1 " + pretrain_cmd(run, sets) + " > /dev/null 2>&1 & p1=$!; " + env +
                             " RANK=0 timeout 90 " + pretrain_cmd(run, sets) + " > " + r0_log + " 2>&1 & p0=$!; " +
                             "for i in $(seq 900); do grep -q \"train\\] step\" " + r0_log +
                             " && break; sleep 0.1; done; kill -9 $p1; wait $p0; exit $?)";
  const int code = run_shell(launch);
  const std::string log = slurp(r0_log);
  EXPECT_EQ(code, 2) << log;  // UserError exit code, not 124 (the outer timeout) or a crash
  EXPECT_NE(log.find("[train] step"), std::string::npos) << log;  // it died mid-training
  EXPECT_NE(log.find("failed on rank 0 (another rank died"), std::string::npos) << log;
}

// A rank whose peers never come (a node that did not start; rank 0 elsewhere) fails after the
// timeout with one line: c10d's own log of each failed attempt to reach the store (ERROR, with a
// C++ stack trace) is held back while the ranks meet.
TEST(DataParallel, ARankAloneAtTheRendezvousFailsWithOneLine) {
  const fs::path run = test::fresh_dir("dp_alone");
  const std::string log = run.string() + ".log";
  const int code = run_shell("MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " WORLD_SIZE=2 RANK=1 " +
                             pretrain_cmd(run, "--set train.dist_timeout_s=2") + " > " + log + " 2>&1");
  const std::string out = slurp(log);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("error: distributed rendezvous failed on rank 1 (another rank died, hangs, or is unreachable; "
                     "timeout train.dist_timeout_s=2s)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("frame #"), std::string::npos) << out;
  EXPECT_EQ(out.find("[c10d]"), std::string::npos) << out;
}

// The GradSync workers' rank: a small model with rank 0's weights (seed 3), two micro-batches of
// this rank's own data, and the gradients as they stand (clones; zeros where there is none).
struct RankModel {
  BertModel model;
  std::vector<torch::Tensor> params;
  torch::Tensor ids1, ids2;  // [2, 12], [3, 12]
  RankModel(dist::DataParallel& dp, const ModelOptions& o, int64_t rank, Recompute mode = Recompute::none)
      : model(seeded(o)) {
    model->set_activation_checkpointing(mode);
    dp.broadcast_parameters(*model);
    params = model->parameters();
    torch::manual_seed(100 + rank);  // different data per rank
    ids1 = torch::randint(5, o.vocab_size, {2, 12}, torch::kLong);
    ids2 = torch::randint(5, o.vocab_size, {3, 12}, torch::kLong);
  }
  void backward(const torch::Tensor& ids) { model->encode(ids, {}).pow(2).mean().backward(); }
  static BertModel seeded(const ModelOptions& o) {
    torch::manual_seed(3);
    return BertModel(o);
  }
  std::vector<torch::Tensor> grads() const {
    std::vector<torch::Tensor> g;
    for (const auto& p : params) g.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    return g;
  }
};

// One rank of GradSync.OverlappedEqualsAfterBackwardOnTwoGlooRanks (skipped unless launched by it).
// Two micro-batches of rank-specific data; the overlapped sync (hooks armed for the second
// backward only) must give exactly the gradients of average_gradients after both backwards
// (a sum of two values is exact in any order), averaged (the same on both ranks, not the
// local gradient), with buckets launched inside backward.
// (DISABLED_: not run on its own; the launcher asks for it with --gtest_also_run_disabled_tests.)
TEST(GradSyncWorker, DISABLED_OverlappedEqualsAfterBackward) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of GradSync.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, /*bucket_mb=*/0.01);  // ~10 KB buckets: several of them
  RankModel r(dp, test::small_model_options("absolute", {.vocab = 60, .hidden = 32, .ffn = 64, .dropout = 0.0}), env.rank);
  auto& [model, params, ids1, ids2] = r;
  // The MLM head stays unused: those parameters get no gradient (zeros in both syncs).
  dp.attach_gradient_hooks(params);
  dp.arm_gradient_sync();  // a first step: it learns which parameters backward leaves out
  r.backward(ids1);
  EXPECT_FALSE(dp.finish_gradient_sync());
  model->zero_grad();
  r.backward(ids1);
  dp.arm_gradient_sync();
  r.backward(ids2);
  const int64_t launched = dp.buckets_launched_in_backward();
  EXPECT_FALSE(dp.finish_gradient_sync());
  const auto overlapped = r.grads();
  EXPECT_GT(launched, 1);  // buckets went out while backward was still running
  int64_t encoder_elements = 0;  // after the first step only what some rank reaches is sent
  for (const auto& p : model->named_parameters())
    if (p.key().rfind("mlm", 0) != 0) encoder_elements += p.value().numel();
  EXPECT_EQ(dp.gradient_elements_reduced(), encoder_elements);
  // Reached by no rank: no gradient at all, as one process leaves them (the optimizer skips them).
  int64_t head = 0;
  for (const auto& p : model->named_parameters()) {
    if (p.key().rfind("mlm", 0) != 0) continue;
    ++head;
    EXPECT_FALSE(p.value().grad().defined()) << p.key();
  }
  EXPECT_GT(head, 0);

  dp.attach_gradient_hooks({});  // hooks off: the reference path
  model->zero_grad();
  r.backward(ids1);
  r.backward(ids2);
  const auto local = r.grads();
  dp.average_gradients(params);
  const auto after = r.grads();
  double diff = 0, moved = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    diff = std::max(diff, (overlapped[i] - after[i]).abs().max().item<double>());
    moved = std::max(moved, (after[i] - local[i]).abs().max().item<double>());
  }
  EXPECT_EQ(diff, 0.0);
  EXPECT_GT(moved, 1e-6);  // the average is not this rank's own gradient
  auto first = overlapped[0].clone();
  auto from0 = first.clone();
  dp.all_reduce_sum(from0);
  EXPECT_LT((from0 / 2 - first).abs().max().item<double>(), 1e-7);  // both ranks hold the same mean

  // Reached by rank 1 only: rank 0 adds zeros, and both hold rank 1's gradient / 2.
  dp.attach_gradient_hooks(params);
  model->zero_grad();
  dp.arm_gradient_sync();
  auto hidden = model->encode(ids1, {});
  (env.rank == 1 ? hidden.pow(2).mean() + model->mlm_logits(hidden).pow(2).mean() : hidden.pow(2).mean()).backward();
  EXPECT_FALSE(dp.finish_gradient_sync());
  for (const auto& p : model->named_parameters()) {
    if (p.key().rfind("mlm", 0) != 0) continue;
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    auto g = p.value().grad().clone(), sum = g.clone();
    dp.all_reduce_sum(sum);
    EXPECT_LT((sum / 2 - g).abs().max().item<double>(), 1e-7) << p.key();  // the same on both ranks
  }
}

// One rank of GradSync.RecomputedSharedTableEqualsAfterBackwardOnTwoGlooRanks. DeBERTa's
// relative table is one parameter read by every layer; with activation checkpointing each
// layer's recomputed backward accumulates into it on its own, so its gradient arrives once per
// layer, and a bucket counted down once per arrival went out before its other members' were
// final. One bucket (the default size) holds them all here: the overlapped sync must still equal
// average_gradients after backward, in both modes, and still launch inside backward.
TEST(GradSyncWorker, DISABLED_RecomputedSharedTableEqualsAfterBackward) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of GradSync.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, /*bucket_mb=*/25.0);
  for (const Recompute mode : {Recompute::attention, Recompute::layers}) {
    SCOPED_TRACE(describe_recompute(mode));
    RankModel r(dp, test::small_model_options("deberta", {.vocab = 60, .hidden = 32, .layers = 3, .ffn = 64, .dropout = 0.0}),
                env.rank, mode);
    auto& [model, params, ids1, ids2] = r;
    dp.attach_gradient_hooks(params);
    for (const auto& ids : {ids1, ids2}) {  // a first step, then one that overlaps
      model->zero_grad();
      dp.arm_gradient_sync();
      r.backward(ids);
      EXPECT_FALSE(dp.finish_gradient_sync());
    }
    const int64_t launched = dp.buckets_launched_in_backward();
    const auto overlapped = r.grads();
    dp.attach_gradient_hooks({});
    model->zero_grad();
    r.backward(ids2);
    dp.average_gradients(params);
    const auto after = r.grads();
    EXPECT_EQ(launched, 1);
    for (const auto& p : model->named_parameters())
      if (p.key().find("rel_embeddings") != std::string::npos) {
        ASSERT_TRUE(p.value().grad().defined());
        EXPECT_GT(p.value().grad().abs().max().item<double>(), 0.0);
      }
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_EQ((overlapped[i] - after[i]).abs().max().item<double>(), 0.0) << "parameter " << i;
  }
  // More accumulations than the first step counted (here: two backwards in one armed step) is
  // refused, as a bucket may have gone out without the later ones: finish() says so (it waits
  // for its buckets, which the other rank launched too) and keeps the reason for the caller.
  RankModel r(dp, test::small_model_options("absolute", {.vocab = 60, .hidden = 32, .ffn = 64, .dropout = 0.0}), env.rank);
  dp.attach_gradient_hooks(r.params);
  dp.arm_gradient_sync();
  r.backward(r.ids1);
  EXPECT_FALSE(dp.finish_gradient_sync());
  EXPECT_EQ(dp.gradient_sync_refusal(), nullptr);
  dp.arm_gradient_sync();
  r.backward(r.ids1);
  r.backward(r.ids1);
  EXPECT_TRUE(dp.finish_gradient_sync()) << "a gradient accumulated twice was all-reduced";
  try {
    ASSERT_NE(dp.gradient_sync_refusal(), nullptr);
    std::rethrow_exception(dp.gradient_sync_refusal());
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("accumulated 2 times in a backward, 1 in the first step"), std::string::npos)
        << e.what();
  }
}

// One rank of GradSync.ReachedInAnEarlierMicroBatchOnTwoGlooRanks: the MLM head gets its
// gradient in the first micro-batch of each step only, none in the armed (last) one; it must be
// all-reduced as it is, not taken for a parameter no rank reached (which has its gradient
// dropped), in the first step and after.
TEST(GradSyncWorker, DISABLED_ReachedInAnEarlierMicroBatchIsKept) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of GradSync.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, /*bucket_mb=*/0.01);
  RankModel r(dp, test::small_model_options("absolute", {.vocab = 60, .hidden = 32, .ffn = 64, .dropout = 0.0}), env.rank);
  auto& [model, params, ids1, ids2] = r;
  auto step = [&](bool sync) {  // two micro-batches: the head's loss in the first only
    model->zero_grad();
    auto h = model->encode(ids1, {});
    (h.pow(2).mean() + model->mlm_logits(h).pow(2).mean()).backward();
    if (sync) dp.arm_gradient_sync();
    model->encode(ids2, {}).pow(2).mean().backward();
    if (sync) {
      EXPECT_FALSE(dp.finish_gradient_sync());
    }
    std::vector<torch::Tensor> g;
    for (const auto& p : params) g.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    return g;
  };
  for (int s = 0; s < 2; ++s) {  // the first step learns, the second uses what it learnt
    SCOPED_TRACE("step " + std::to_string(s + 1));
    dp.attach_gradient_hooks(params);
    if (s == 1) step(true);  // hooks attached anew: a first step again
    const auto synced = step(true);
    dp.attach_gradient_hooks({});
    step(false);
    dp.average_gradients(params);
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(synced[i].defined()) << "parameter " << i;
      EXPECT_EQ((synced[i] - params[i].grad()).abs().max().item<double>(), 0.0) << "parameter " << i;
    }
  }
}

// One rank of GradSync.RefusalStopsEveryRankOnTwoGlooRanks. From step 3 on, rank 1 alone
// backpropagates an extra term into the weight inside the armed backward (a graph that changes
// between steps, on one rank only), so its gradient sync refuses the step. Every rank must stop
// together, rank 1 with its reason and rank 0 naming rank 1 and that reason, instead of rank 0
// going on into its next collective and failing there with a transport error or the timeout;
// for both ways an update is decided: on the device one step late (AdamW) and on the host (SGD).
// The ranks end in step (a last collective matches) with equal weights (the step was skipped).
TEST(GradSyncWorker, DISABLED_RefusalStopsEveryRank) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of GradSync.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, /*timeout_s=*/20.0, /*bucket_mb=*/25.0);
  for (const std::string optimizer : {"adamw", "sgd"}) {
    SCOPED_TRACE(optimizer);
    auto t = test::toy_options(8, 1);
    t.optimizer = optimizer;
    torch::nn::Linear* model = nullptr;
    EngineHooks hooks;
    hooks.on_loss = [&](int64_t step, torch::Tensor&) {
      if (step >= 2 && env.rank == 1) ((*model)->weight.sum() * 0.0).backward();
    };
    test::ToyRun r(t, hooks, {}, {}, &dp);
    model = &r.model;
    try {
      r.engine->run(TrainState{});
      ADD_FAILURE() << "the run ended although rank 1 refused a step's gradients";
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(env.rank == 1 ? "syncing the gradients of step 3: gradient sync: a parameter's gradient was "
                                         "accumulated 2 times in a backward, 1 in the first step"
                                       : "rank 1 stopped while syncing the gradients of step 3: gradient sync: a "
                                         "parameter's gradient was accumulated 2 times"),
                std::string::npos)
          << msg;
    }
    EXPECT_EQ(dist::replica_difference(dp, *r.model), "");
  }
  EXPECT_EQ(dp.sum({1.0}).at(0), 2.0);
}

// One rank of NonFinite.EveryRankNamesTheKeptCheckpointOnTwoGlooRanks. From step 2 on every
// loss is NaN, so after max_nonfinite_in_a_row skipped steps the run stops and rank 0 keeps the
// last finite weights. Every rank's message must say where (rank 1 used to say "are not kept":
// only rank 0 writes, and rank 1 took its own empty result for no checkpoint).
TEST(NonFiniteWorker, DISABLED_EveryRankNamesTheKeptCheckpoint) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of NonFinite.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 20.0, 25.0);
  EngineHooks hooks;
  hooks.on_loss = [](int64_t step, torch::Tensor& loss) {
    if (step >= 1) loss = loss * std::nan("");
  };
  const fs::path run = test::fresh_dir("nonfinite_ranks_r" + std::to_string(env.rank));  // rank 0 alone writes
  test::ToyRun r(test::toy_options(10, 1), hooks, {}, run, &dp);
  try {
    r.engine->run(TrainState{});
    FAIL() << "the run went on after max_nonfinite_in_a_row skipped steps";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("are kept in " + (run / "checkpoints" / "step_00000004.pt").string()), std::string::npos) << msg;
  }
  if (env.rank == 0) {
    EXPECT_TRUE(fs::exists(run / "checkpoints" / "step_00000004.pt"));
  }
}

// One rank of a StopOnSignal.* test on two Gloo ranks: rank 1 alone gets SIGTERM after step
// `signal_after` of the toy task's `steps` (a launcher that signals one node first); both ranks
// must stop after step `stop_at`, each naming rank 0's checkpoint, which is the only one kept.
void expect_both_ranks_stop(int64_t steps, int64_t log_every, int64_t signal_after, int64_t stop_at,
                            const std::string& name) {
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 20.0, 25.0);
  EngineHooks hooks;
  hooks.on_step = [&](int64_t step, double) {
    if (env.rank == 1 && step == signal_after) std::raise(SIGTERM);
  };
  const fs::path run = test::fresh_dir(name + "_r" + std::to_string(env.rank));  // rank 0 alone writes
  auto t = test::toy_options(steps, 1);
  t.log_every = log_every;
  test::ToyRun r(t, hooks, {}, run, &dp, /*stop_on_signals=*/true);
  try {
    r.engine->run(TrainState{});
    FAIL() << "rank " << env.rank << " did not stop";
  } catch (const StopRequested& e) {
    EXPECT_EQ(e.signal(), SIGTERM);
    const std::string msg = e.what();
    const std::string why = env.rank == 1 ? "(SIGTERM)" : "(a signal another rank got)";
    const std::string at = " after step " + std::to_string(stop_at) + " of " + std::to_string(steps);
    EXPECT_NE(msg.find("stopped on request " + why + at), std::string::npos) << msg;
    EXPECT_NE(msg.find(checkpoint_file(run, stop_at).string()), std::string::npos) << msg;
  }
  if (env.rank == 0) {
    const auto kept = list_checkpoints(run);
    ASSERT_EQ(kept.size(), 1u);
    EXPECT_EQ(kept.front().first, stop_at);
  }
}

// Signalled after step 3, both ranks learn it from step 4's all-reduce and stop after step 4
// (no log step: its flags are read at step 5's update, one step late).
TEST(StopWorker, DISABLED_EveryRankStopsAtTheSameStep) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of StopOnSignal.*, launched by it";
  expect_both_ranks_stop(/*steps=*/10, /*log_every=*/5, /*signal_after=*/3, /*stop_at=*/4, "stop_ranks");
}

// Signalled after the last step: the agreement after the final checkpoint stops both there.
TEST(StopWorker, DISABLED_ASignalInTheLastStepStopsEveryRank) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of StopOnSignal.*, launched by it";
  expect_both_ranks_stop(/*steps=*/6, /*log_every=*/2, /*signal_after=*/6, /*stop_at=*/6, "stop_end_ranks");
}

// One rank of StopOnSignal.ATimeLimitOnOneRankStopsEveryRankAlikeOnTwoGlooRanks: rank 0 is past
// its time limit from the start (its own clock; rank 1 has none), so both stop after step 1 with
// its checkpoint, and both as at the time limit (signal 0: exit code 75 on every rank, which
// one job script reads), not rank 1 by SIGTERM.
TEST(StopWorker, DISABLED_ATimeLimitOnOneRankStopsEveryRankAlike) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of StopOnSignal.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 20.0, 25.0);
  const fs::path run = test::fresh_dir("stop_limit_ranks_r" + std::to_string(env.rank));
  auto t = test::toy_options(6, 1);
  t.time_limit_min = 0.5;
  std::optional<std::chrono::steady_clock::time_point> stop_at;
  if (env.rank == 0) stop_at = std::chrono::steady_clock::now();
  test::ToyRun r(t, {}, {}, run, &dp, /*stop_on_signals=*/true, stop_at);
  try {
    r.engine->run(TrainState{});
    FAIL() << "rank " << env.rank << " did not stop";
  } catch (const StopRequested& e) {
    EXPECT_EQ(e.signal(), 0);
    EXPECT_NE(std::string(e.what()).find("stopped at the time limit (train.time_limit_min 0.5) after step 1 of 6"),
              std::string::npos)
        << e.what();
  }
  if (env.rank == 0) {
    const auto kept = list_checkpoints(run);
    ASSERT_EQ(kept.size(), 1u);
    EXPECT_EQ(kept.front().first, 1);
  }
}

// One rank of Checkpoint.EveryRankRowOnTwoGlooRanks: the rows a multi-GPU checkpoint keeps of
// every rank's device stream (train/checkpoint.h) come back in rank order, byte for byte.
TEST(RankRowWorker, DISABLED_EveryRankRowIsInRankOrder) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of Checkpoint.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, 25.0);
  auto row = [](int64_t rank) { return (torch::arange(16, torch::kLong) * 17 + 200 * rank).remainder(256).to(torch::kUInt8); };
  const auto all = every_rank_row(dp, row(env.rank));
  ASSERT_EQ(all.sizes(), (std::vector<int64_t>{2, 16}));
  EXPECT_TRUE(torch::equal(all[0], row(0)));
  EXPECT_TRUE(torch::equal(all[1], row(1)));
}

// One rank of Fp16.RanksAgreeOnTwoGlooRanks (skipped unless launched by it). fp16 on the toy
// task from S = 2^30, two micro-batches per step: the first steps overflow and halve S, then it
// trains. Each rank has its own targets, hence its own local gradients, but one all-reduced
// gradient: S, the skipped steps and the weights must end bitwise equal on both ranks (each
// equals the mean over ranks), while the local losses differ.
TEST(Fp16Worker, DISABLED_RanksAgreeOnTheLossScaleAndTheSkips) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of Fp16.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, /*bucket_mb=*/25.0);
  auto t = test::toy_fp16_options(30, 2, std::pow(2.0, 30));
  t.log_every = 10;
  test::ToyRun r(t, {}, {}, {}, &dp);
  r.data.y.add_(0.5 * static_cast<double>(env.rank));  // rank-specific targets
  const auto w0 = r.model->weight.detach().clone();
  const EngineResult e = r.engine->run(TrainState{});
  auto on_every_rank = [&](const torch::Tensor& v) {  // v equals the mean of v over the ranks
    auto mine = v.detach().to(torch::kDouble).clone(), sum = mine.clone();
    dp.all_reduce_sum(sum);
    return torch::equal(sum / 2, mine);
  };
  EXPECT_GT(e.state.nonfinite_total, 3);  // S halved several times ...
  EXPECT_LT(e.state.nonfinite_total, 25);  // ... and then the run trained
  EXPECT_EQ(e.state.nonfinite_in_a_row, 0);
  EXPECT_TRUE(on_every_rank(torch::full({}, static_cast<double>(e.state.nonfinite_total))));
  EXPECT_TRUE(on_every_rank(r.engine->loss_scaler().scale()));
  EXPECT_TRUE(on_every_rank(r.model->weight));
  EXPECT_TRUE(on_every_rank(r.model->bias));
  EXPECT_FALSE(torch::equal(r.model->weight, w0));
  torch::NoGradGuard no_grad;
  const auto local_loss = (r.model->forward(r.data.x).squeeze(-1) - r.data.y).pow(2).mean();
  EXPECT_FALSE(on_every_rank(local_loss));  // the ranks did see different data
}

// One rank of Replicas.DivergenceStopsTheRunOnTwoGlooRanks (skipped unless launched by it).
// Both ranks train the toy task with a checkpoint every 4 steps; after step 6, rank 1 alone
// nudges its weight (as a rank-dependent update would). Step 4's checkpoint is written (the
// replicas agreed), step 8's is not: every rank stops there with the same error, naming the
// tensor, the ranks and (rank 0, which keeps them) the newest checkpoint.
TEST(ReplicaWorker, DISABLED_DivergenceStopsTheRun) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of Replicas.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, /*bucket_mb=*/25.0);
  auto t = test::toy_options(10, 1);
  t.save_every = 4;
  const fs::path run = test::fresh_dir("replica_check_r" + std::to_string(env.rank));  // rank 0 alone writes
  torch::nn::Linear* model = nullptr;
  EngineHooks hooks;
  hooks.on_step = [&](int64_t step, double) {
    torch::NoGradGuard no_grad;
    if (step == 6 && env.rank == 1) (*model)->weight.add_(1e-3);
  };
  test::ToyRun r(t, hooks, {}, run, &dp);
  model = &r.model;
  EXPECT_EQ(dist::replica_difference(dp, *r.model), "");  // after the start's broadcast
  {  // floating-point buffers count too, whatever their dtype; integer ones are left out
    torch::nn::Module m;
    m.register_parameter("w", torch::ones({3}));
    auto table = m.register_buffer("table", torch::arange(4, torch::kDouble));
    m.register_buffer("ids", torch::arange(4, torch::kLong) + env.rank);  // differs, not compared
    EXPECT_EQ(dist::replica_difference(dp, m), "");
    if (env.rank == 1) table[2] = 2.5;
    EXPECT_EQ(dist::replica_difference(dp, m),
              "'table' differs between rank 0 and rank 1 (L1 norm 6 vs 6.5)");
  }
  {  // one weight of a BERT-sized table moved by 1e-3: norms summed in fp32 round it away
    torch::nn::Module big;
    torch::manual_seed(7);
    auto w = big.register_parameter("word_embeddings", torch::randn({30522, 768}) * 0.02);
    EXPECT_EQ(dist::replica_difference(dp, big), "");
    if (env.rank == 1) {
      torch::NoGradGuard no_grad;
      w[12345][67] += 1e-3;
    }
    EXPECT_NE(dist::replica_difference(dp, big).find("'word_embeddings' differs between rank 0 and rank 1"),
              std::string::npos);
  }
  try {
    r.engine->run(TrainState{});
    FAIL() << "the run ended although the replicas diverged";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("replicas diverged by step 8: 'weight' differs between rank 0 and rank 1"), std::string::npos)
        << msg;
    if (env.rank == 0) {
      EXPECT_NE(msg.find("newest checkpoint, from when they agreed: "), std::string::npos) << msg;
    }
  }
  if (env.rank == 0) {
    const auto newest = latest_checkpoint(run);
    ASSERT_TRUE(newest.has_value());
    EXPECT_EQ(newest->filename(), "step_00000004.pt");
  }
}

TEST(GradSync, OverlappedEqualsAfterBackwardOnTwoGlooRanks) {
  run_two_ranks("GradSyncWorker.DISABLED_OverlappedEqualsAfterBackward", "grad_sync");
}

TEST(GradSync, RecomputedSharedTableEqualsAfterBackwardOnTwoGlooRanks) {
  run_two_ranks("GradSyncWorker.DISABLED_RecomputedSharedTableEqualsAfterBackward", "grad_sync_recompute");
}

TEST(GradSync, ReachedInAnEarlierMicroBatchOnTwoGlooRanks) {
  run_two_ranks("GradSyncWorker.DISABLED_ReachedInAnEarlierMicroBatchIsKept", "grad_sync_earlier");
}

TEST(GradSync, RefusalStopsEveryRankOnTwoGlooRanks) {
  run_two_ranks("GradSyncWorker.DISABLED_RefusalStopsEveryRank", "grad_sync_refusal");
}

TEST(NonFinite, EveryRankNamesTheKeptCheckpointOnTwoGlooRanks) {
  run_two_ranks("NonFiniteWorker.DISABLED_EveryRankNamesTheKeptCheckpoint", "nonfinite_ranks");
}

TEST(StopOnSignal, EveryRankStopsAtTheSameStepOnTwoGlooRanks) {
  run_two_ranks("StopWorker.DISABLED_EveryRankStopsAtTheSameStep", "stop_ranks");
}

TEST(StopOnSignal, ASignalInTheLastStepStopsEveryRankOnTwoGlooRanks) {
  run_two_ranks("StopWorker.DISABLED_ASignalInTheLastStepStopsEveryRank", "stop_end_ranks");
}
TEST(StopOnSignal, ATimeLimitOnOneRankStopsEveryRankAlikeOnTwoGlooRanks) {
  run_two_ranks("StopWorker.DISABLED_ATimeLimitOnOneRankStopsEveryRankAlike", "stop_limit_ranks");
}

TEST(Checkpoint, EveryRankRowOnTwoGlooRanks) {
  run_two_ranks("RankRowWorker.DISABLED_EveryRankRowIsInRankOrder", "rank_rows");
}

TEST(Replicas, DivergenceStopsTheRunOnTwoGlooRanks) {
  run_two_ranks("ReplicaWorker.DISABLED_DivergenceStopsTheRun", "replica_check");
}

TEST(Fp16, RanksAgreeOnTwoGlooRanks) {
  run_two_ranks("Fp16Worker.DISABLED_RanksAgreeOnTheLossScaleAndTheSkips", "fp16_ranks");
}

}  // namespace
}  // namespace rpe

// Launching the rpe-train binary, or this test binary, as two ranks of one job on this machine
// (the torchrun environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Gloo on CPU), for the
// multi-process tests. Each rank runs under `timeout 120`, so a hang ends as exit code 124.
#pragma once
#include <gtest/gtest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>

#include "../train/tiny_run.h"
#include "test_paths.h"

namespace rpe::test {
namespace fs = std::filesystem;

// A port for a job's store (MASTER_PORT), free now and handed to no other test process of this
// machine recently. Binding port 0 would be simpler but racy: the kernel hands out ports of its
// ephemeral range (ip_local_port_range, 32768-60999 by default), where every Gloo listener and
// client socket of a test running beside this one (ctest -j) also lands, so a port probed and
// released here could be taken before the store binds it. So ports come from below that range,
// in turn from a counter that this user's test processes share through a locked file, and each is
// checked by binding it.
inline int free_port() {
  constexpr int kFirst = 20000, kCount = 12000;  // [20000, 32000): under the ephemeral range
  auto bindable = [](int port) {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    return ok;
  };
  const fs::path counter = fs::temp_directory_path() / ("rpe-train-test-ports-" + std::to_string(::getuid()));
  const int fd = ::open(counter.c_str(), O_RDWR | O_CREAT, 0666);
  if (fd < 0 || ::flock(fd, LOCK_EX) != 0) throw std::runtime_error("free_port: cannot lock " + counter.string());
  char text[16] = {};
  const ssize_t got = ::pread(fd, text, sizeof text - 1, 0);
  // The first process of a boot starts at a pid-dependent place, so runs do not all begin at kFirst.
  int64_t next = got > 0 ? std::atoll(text) : ::getpid();
  int port = -1;
  for (int tries = 0; tries < kCount && port < 0; ++tries, ++next) {
    const int candidate = kFirst + static_cast<int>(next % kCount);
    if (bindable(candidate)) port = candidate;
  }
  const std::string written = std::to_string(next % kCount) + "\n";
  const bool saved = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, written.data(), written.size(), 0) ==
                                                    static_cast<ssize_t>(written.size());
  ::flock(fd, LOCK_UN);
  ::close(fd);
  if (port < 0 || !saved) throw std::runtime_error("free_port: no free port in [20000, 32000)");
  return port;
}

inline std::string slurp(const fs::path& f) {
  std::ifstream in(f);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline int run_shell(const std::string& cmd) {
  const int status = std::system(("bash -c '" + cmd + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `rpe-train pretrain` on the tiny config; `mode`: --overwrite (a fresh run) or --resume.
inline std::string pretrain_cmd(const fs::path& run, const std::string& sets, const std::string& mode = "--overwrite") {
  return train_binary() + " pretrain --config " + (tiny_data_dir() / "base.yaml").string() +
         " --run-dir " + run.string() + " " + mode + " " + sets;
}

// `rpe-train finetune squad` from the pretraining run `pre` into `ft` on the sample SQuAD files
// (16 training and 16 dev examples, one epoch, short windows); `extra` comes last, and a later
// --set of a key wins.
inline std::string finetune_cmd(const fs::path& pre, const fs::path& ft, const std::string& extra = "") {
  const std::string squad = source_dir() + "/data/sample/squad/";
  return train_binary() + " finetune squad --config " + source_dir() + "/configs/finetune/tiny_squad.yaml --init " +
         pre.string() + " --run-dir " + ft.string() + " --set finetune.train_file=" + squad +
         "train-v1.1.json --set finetune.dev_file=" + squad + "dev-v1.1.json --set finetune.max_seq_len=32"
         " --set finetune.doc_stride=16 --set finetune.max_query_len=12 --set finetune.max_train_examples=16"
         " --set finetune.max_eval_examples=16 --set finetune.epochs=1 --set train.device=cpu"
         " --set train.dist_timeout_s=30 " + extra;
}

// A 2-step pretraining run of the tiny config, made once per test process.
inline fs::path tiny_pretrained_run() {
  static const fs::path pre = [] {
    const fs::path dir = fresh_dir("ranks_pretrained");
    EXPECT_EQ(run_shell(pretrain_cmd(dir, "--set train.max_steps=2") + " > " + dir.string() + ".log 2>&1"), 0)
        << slurp(dir.string() + ".log");
    return dir;
  }();
  return pre;
}

// Two ranks, each with its own command line (nodes without a shared file system each see their
// own copy of the run folder); returns r0 * 10 + r1 of their exit codes and writes
// LOGS.r0.log and LOGS.r1.log.
inline int launch_pair(const std::string& cmd0, const std::string& cmd1, const fs::path& logs) {
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " WORLD_SIZE=2";
  return run_shell("(" + env + " RANK=1 LOCAL_RANK=1 timeout 120 " + cmd1 + " > " + logs.string() + ".r1.log 2>&1 & " +
                   env + " RANK=0 LOCAL_RANK=0 timeout 120 " + cmd0 + " > " + logs.string() +
                   ".r0.log 2>&1; r0=$?; wait $!; r1=$?; exit $((r0 * 10 + r1)))");
}

// Runs this test binary as two Gloo ranks of `worker` (a DISABLED_ test); both must pass it.
inline void run_two_ranks(const std::string& worker, const std::string& name) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const fs::path logs = fresh_dir(name);
  const std::string env = "RPE_DIST_WORKER=1 OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(free_port()) + " WORLD_SIZE=2";
  // Streamed: GCC 12 warns falsely (-Wrestrict, its bug 105329) on "literal" + std::string&&.
  auto rank = [&](int r) {
    std::ostringstream cmd;
    cmd << env << " RANK=" << r << " timeout 120 " << self << " --gtest_also_run_disabled_tests --gtest_filter="
        << worker << " > " << (logs / "r").string() << r << " 2>&1";  // logs/r0, logs/r1
    return cmd.str();
  };
  std::ostringstream both;
  both << "(" << rank(1) << " & " << rank(0) << "; r0=$?; wait $!; exit $((r0 + $?)))";
  const int code = run_shell(both.str());
  const std::string r0 = slurp(logs / "r0"), r1 = slurp(logs / "r1");
  ASSERT_EQ(code, 0) << r0 << r1;
  for (const auto* log : {&r0, &r1}) {
    EXPECT_NE(log->find("[  PASSED  ] 1 test"), std::string::npos) << *log;
    EXPECT_EQ(log->find("SKIPPED"), std::string::npos) << *log;
  }
}

}  // namespace rpe::test

// data_bench's measured phases, each run in a fresh process (`data_bench --child MODE ...`),
// so that a phase's peak RSS holds nothing of an earlier one. The child prints one line of
// numbers and reads its own VmHWM just before it exits.
//   prepare OUT VOCAB THREADS FILE...   prepare-data (forced) into OUT; prints bytes tokens
//                                       documents shards seconds cpu_seconds peak_MB and the
//                                       threads' read tokenize commit write wait seconds
//   start OUT VOCAB L B FILE...         a pretraining start from OUT as pretrain makes it
//                                       (build_corpus, the loader with its prefetch thread):
//                                       prints seconds-to-first-batch peak_MB anon_MB file_MB
//                                       shard-maps_MB index-map_MB sequences
// Both mirror rpe-train's process setup (keep_freed_host_memory) and use the same data
// options, so a start finds the shards current for its files.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "data/mlm_dataset.h"
#include "data/prepare.h"
#include "data/pretrain_corpus.h"
#include "data/wordpiece_tokenizer.h"
#include "util/cpu_memory.h"
#include "util/log.h"

using namespace rpe;

namespace {
double process_cpu_seconds() {  // all threads of the process
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// "VmHWM:    2172 kB" -> 2.1 (MB); 0 when the key is missing.
double status_mb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  return 0.0;
}

// Resident MB of the mappings of shard files and of sample-index caches (/proc/self/smaps).
std::pair<double, double> mapped_mb() {
  std::ifstream in("/proc/self/smaps");
  double shard = 0, index = 0;
  int kind = 0;  // of the current mapping: 0 other, 1 shard, 2 index
  for (std::string line; std::getline(in, line);) {
    if (line.find(':') > line.find(' ')) {  // a mapping's header line: "start-end perms offset dev inode path"
      kind = line.size() > 6 && line.compare(line.size() - 6, 6, ".shard") == 0 ? 1
             : line.find("/index-") != std::string::npos                      ? 2
                                                                               : 0;
    } else if (kind && line.rfind("Rss:", 0) == 0) {
      (kind == 1 ? shard : index) += std::stod(line.substr(4)) / 1024.0;
    }
  }
  return {shard, index};
}

DataOptions options(const std::string& vocab, char** files, int n) {
  DataOptions d;
  d.train_files.assign(files, files + n);
  d.tokenizer = "wordpiece";
  d.tokenizer_model = vocab;
  d.valid_fraction = 0.002;
  return d;
}
}  // namespace

int child_main(int argc, char** argv) {
  keep_freed_host_memory();  // as rpe-train's main does
  log::init(/*quiet=*/true);
  const std::string mode = argv[0];
  if (mode == "prepare" && argc >= 5) {
    const DataOptions d = options(argv[2], argv + 4, argc - 4);
    const WordPieceTokenizer tok(d.tokenizer_model, true);
    const double c0 = process_cpu_seconds();
    const PrepareSummary s = prepare_data(d, tok, {argv[1], std::stoi(argv[3]), /*force=*/true});
    const double cpu = process_cpu_seconds() - c0;
    std::printf("%lld %lld %lld %lld %.4f %.4f %.1f %.4f %.4f %.4f %.4f %.4f\n", static_cast<long long>(s.bytes),
                static_cast<long long>(s.tokens), static_cast<long long>(s.documents),
                static_cast<long long>(s.train_shards + s.valid_shards), s.seconds, cpu, status_mb("VmHWM"),
                s.times.read, s.times.tokenize, s.times.commit, s.write_seconds, s.times.wait);
    return 0;
  }
  if (mode == "start" && argc >= 6) {
    DataOptions d = options(argv[2], argv + 5, argc - 5);
    d.shards = argv[1];
    d.max_seq_len = std::stoll(argv[3]);
    const WordPieceTokenizer tok(d.tokenizer_model, true);
    const auto t0 = std::chrono::steady_clock::now();
    const PretrainCorpus corpus = build_corpus(d, tok);
    MlmLoader loader(corpus.train, tok, {MaskingOptions::from(d), std::stoll(argv[4]), 1234, true, 0, 1, d.prefetch});
    loader.next();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto [shard_mb, index_mb] = mapped_mb();
    std::printf("%.4f %.1f %.1f %.1f %.1f %.1f %lld\n", seconds, status_mb("VmHWM"), status_mb("RssAnon"),
                status_mb("RssFile"), shard_mb, index_mb, static_cast<long long>(corpus.train->size()));
    return 0;
  }
  std::fprintf(stderr, "data_bench --child: prepare OUT VOCAB THREADS FILE... | start OUT VOCAB L B FILE...\n");
  return 2;
}

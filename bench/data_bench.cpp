// Data pipeline benchmark: WordPiece tokenization MB/s (one thread), prepare-data MB/s
// (one thread and all cores), and masking + batching tokens/s on one core (MlmLoader::next
// without prefetch: whole-word masking and the [B, L] tensors). Prints a Markdown report.
// Uses ../shared/data (corpus + uncased vocabulary) when present, else generated text.
// Usage: data_bench [SHARED_DATA_DIR] [--seq-len L] [--batch B]
#include <sys/utsname.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "data/corpus.h"
#include "data/mlm_dataset.h"
#include "data/prepare.h"
#include "data/wordpiece_tokenizer.h"
#include "util/atomic_file.h"
#include "util/log.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace rpe;

static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds of the calling thread: on a shared machine, throughput per CPU-second is the
// figure that does not depend on what else runs.
static double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

static std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

int main(int argc, char** argv) {
  log::init(/*quiet=*/true);
  std::string data = argc > 1 && argv[1][0] != '-' ? argv[1] : "../shared/data";
  int64_t seq_len = 512, batch = 32;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--seq-len") seq_len = std::stoll(argv[i + 1]);
    if (std::string(argv[i]) == "--batch") batch = std::stoll(argv[i + 1]);
  }
  const fs::path vocab = fs::path(data) / "vocab/uncased/vocab.txt";
  if (!fs::exists(vocab)) {
    std::fprintf(stderr, "data_bench: %s not found (pass the shared data folder)\n", vocab.string().c_str());
    return 2;
  }
  const WordPieceTokenizer tok(vocab, true);
  std::vector<std::string> files;
  for (const char* f : {"corpus/brown.txt", "corpus/nlp-corpus.txt"})
    if (fs::exists(fs::path(data) / f)) files.push_back((fs::path(data) / f).string());

  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  utsname u{};
  uname(&u);
  std::string load;
  std::getline(std::ifstream("/proc/loadavg"), load);
  std::printf("# Data pipeline benchmark (CPU)\n\n%s | %s | %u hardware threads | %s %s | load average at start: %s\n\n",
              date, cpu_name().c_str(), std::thread::hardware_concurrency(), u.sysname, u.release,
              load.substr(0, load.find(' ')).c_str());
  std::printf("Corpus: %zu file(s) of ../shared/data/corpus, BERT uncased vocabulary (30,522).\n\n", files.size());
  std::printf("| measurement | value |\n|---|---|\n");

  // 1. Tokenization alone, one thread.
  int64_t bytes = 0, tokens = 0;
  std::vector<Document> docs;
  for (const auto& f : files) {
    auto d = read_documents(f);
    docs.insert(docs.end(), d.begin(), d.end());
  }
  auto t0 = Clock::now();
  double c0 = thread_cpu_seconds();
  for (const auto& d : docs)
    for (const auto& s : d.sentences) {
      bytes += static_cast<int64_t>(s.size());
      tokens += static_cast<int64_t>(tok.encode(s).ids.size());
    }
  double secs = seconds_since(t0), cpu = thread_cpu_seconds() - c0;
  std::printf("| WordPiece encode, 1 thread | %.1f MB/s wall, %.1f MB/s per CPU-second (%lld tokens) |\n",
              bytes / secs / 1e6, bytes / cpu / 1e6, static_cast<long long>(tokens));

  // 2. prepare-data end to end (read, validate, tokenize, write shards), 1 thread and all cores.
  DataOptions d;
  d.train_files = files;
  d.tokenizer = "wordpiece";
  d.tokenizer_model = vocab.string();
  const fs::path out = fs::temp_directory_path() / "rpe_data_bench_shards";
  for (const int threads : {1, 0}) {
    const PrepareSummary s = prepare_data(d, tok, {out, threads, /*force=*/true});
    std::printf("| prepare-data, %s | %.1f MB/s (%.1f MB in %.2f s; %lld docs, %lld tokens) |\n",
                threads == 1 ? "1 thread" : "all cores", s.bytes / s.seconds / 1e6, s.bytes / 1e6, s.seconds,
                static_cast<long long>(s.documents), static_cast<long long>(s.tokens));
  }

  // 3. Masking + batching on one core: packed sequences from the shards, loader without prefetch.
  const PreparedShards shards = open_prepared(out, tok);
  auto packed = std::make_shared<PackedSequences>(
      pack_streams(PreparedShards::streams(shards.train), tok.special(), seq_len, true));
  for (const bool whole_word : {true, false}) {
    MaskingOptions m;
    m.whole_word = whole_word;
    MlmLoader loader(packed, tok, m, batch, 1234, true);
    const int64_t batches = std::max<int64_t>(20, 3 * packed->size() / batch);
    loader.next();  // warm up
    int64_t real = 0;
    t0 = Clock::now();
    c0 = thread_cpu_seconds();
    for (int64_t b = 0; b < batches; ++b) real += loader.next().tokens;
    secs = seconds_since(t0);
    cpu = thread_cpu_seconds() - c0;
    const double positions = static_cast<double>(batches * batch * seq_len);
    std::printf("| masking + batching, 1 core, %s, B=%lld L=%lld | %.2f M tokens/s wall, %.2f M tokens/s per "
                "CPU-second (non-pad: %.2f M/s wall) |\n",
                whole_word ? "whole-word" : "token-level", static_cast<long long>(batch),
                static_cast<long long>(seq_len), positions / secs / 1e6, positions / cpu / 1e6, real / secs / 1e6);
  }
  for (const auto& e : fs::directory_iterator(out)) fs::remove(e.path());  // (LibTorch's remove_all crashes)
  fs::remove(out);
  std::printf("\nTarget: masking + batching >= 2 M tokens/s on one core.\n");
  return 0;
}

// Data pipeline benchmark, printed as Markdown (bench/results/data_cpu.md):
//  1. real English (../shared/data corpora, BERT uncased vocabulary): WordPiece encode MB/s on
//     one thread, prepare-data MB/s on one thread and on all cores;
//  2. synthetic corpora of growing size (default 64, 256, 1024 MB of text, generated into the
//     temp folder and deleted after): prepare-data MB/s and peak RSS, then a pretraining start
//     from the shards (open + verify, sample index, first batch): time to first batch and RSS,
//     first start (verification, index built) and second start (stamps, cached index);
//  3. the loader on one core (no prefetch): masking + batching tokens/s at L=512.
// Peak RSS per phase: /proc/self/clear_refs resets the high-water mark (VmHWM) between phases.
// Usage: data_bench [SHARED_DATA_DIR] [--sizes-mb 64,256,1024] [--seq-len L] [--batch B]
#include <sys/utsname.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "data/corpus.h"
#include "data/mlm_dataset.h"
#include "data/prepare.h"
#include "data/shard_sequences.h"
#include "data/wordpiece_tokenizer.h"
#include "util/log.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace rpe;

namespace {
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double thread_cpu_seconds() {  // on a shared machine, work per CPU-second does not depend on the load
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string first_line_with(const char* file, const char* key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return line.substr(line.find(':') + 1);
  return "";
}

double process_cpu_seconds() {  // all threads of the process
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct EfficiencyRow {
  int threads;
  double wall, per_cpu;
};

// "VmHWM:    2172 kB" -> 2.1 (MB); 0 when the key is missing.
double status_mb(const char* key) {
  const std::string value = first_line_with("/proc/self/status", key);
  return value.find_first_of("0123456789") == std::string::npos ? 0.0 : std::stod(value) / 1024.0;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// English-like text from the vocabulary's whole words (Zipf-like: word w with weight ~1/rank),
// sentences of 4-30 words, documents of 3-40 sentences, blank lines between documents.
void generate_corpus(const fs::path& file, const std::vector<std::string>& words, int64_t bytes, uint64_t seed) {
  std::ofstream out(file, std::ios::binary);
  uint64_t x = seed;
  auto next = [&] { return x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 33; };
  std::string buf;
  int64_t written = 0;
  while (written < bytes) {
    const uint64_t sentences = 3 + next() % 38;
    for (uint64_t s = 0; s < sentences; ++s) {
      const uint64_t n = 4 + next() % 27;
      for (uint64_t w = 0; w < n; ++w) {
        const double u = static_cast<double>(next() % 1000000 + 1) / 1e6;  // rank ~ size^u: log-uniform
        const size_t rank = static_cast<size_t>(std::pow(static_cast<double>(words.size()), u)) - 1;
        buf += words[std::min(rank, words.size() - 1)];
        buf += w + 1 < n ? ' ' : '\n';
      }
    }
    buf += '\n';
    if (buf.size() > (1 << 20)) written += static_cast<int64_t>(buf.size()), out << buf, buf.clear();
  }
  out << buf;
}

void remove_folder(const fs::path& dir) {  // (LibTorch's fs::remove_all crashes)
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  for (const auto& f : files) fs::remove(f);
  fs::remove(dir);
}

struct Start {
  double seconds = 0, rss_mb = 0, anon_mb = 0, file_mb = 0;
  int64_t sequences = 0;
};

// A pretraining start from prepared shards: open (verify), sample index, loader, first batch.
Start start_from_shards(const fs::path& out, const WordPieceTokenizer& tok, int64_t L, int64_t B) {
  reset_peak_rss();
  const auto t0 = Clock::now();
  auto shards = std::make_shared<const PreparedShards>(open_prepared(out, tok));
  auto data = std::make_shared<ShardSequences>(shards, false, out, tok.special(), L, true);
  MlmLoader loader(data, tok, {MaskingOptions{}, B, 1234, true, 0, 1, 2});
  loader.next();
  Start s;
  s.seconds = seconds_since(t0);
  for (int i = 0; i < 50; ++i) loader.next();
  s.rss_mb = status_mb("VmHWM");
  s.anon_mb = status_mb("RssAnon");
  s.file_mb = status_mb("RssFile");
  s.sequences = data->size();
  return s;
}
}  // namespace

int main(int argc, char** argv) {
  log::init(/*quiet=*/true);
  std::string data = argc > 1 && argv[1][0] != '-' ? argv[1] : "../shared/data";
  int64_t seq_len = 512, batch = 32;
  std::vector<int64_t> sizes_mb = {64, 256, 1024};
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seq-len") seq_len = std::stoll(argv[i + 1]);
    if (a == "--batch") batch = std::stoll(argv[i + 1]);
    if (a == "--sizes-mb") {
      sizes_mb.clear();
      std::stringstream ss(argv[i + 1]);
      for (std::string v; std::getline(ss, v, ',');) sizes_mb.push_back(std::stoll(v));
    }
  }
  const fs::path vocab = fs::path(data) / "vocab/uncased/vocab.txt";
  if (!fs::exists(vocab)) {
    std::fprintf(stderr, "data_bench: %s not found (pass the shared data folder)\n", vocab.string().c_str());
    return 2;
  }
  const WordPieceTokenizer tok(vocab, true);
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  utsname u{};
  uname(&u);
  std::string load;
  std::getline(std::ifstream("/proc/loadavg"), load);
  std::printf("# Data pipeline benchmark (CPU)\n\n%s |%s | %d hardware threads | %s %s | load average at start: %s\n\n",
              date, first_line_with("/proc/cpuinfo", "model name").c_str(), cores, u.sysname, u.release,
              load.substr(0, load.find(' ')).c_str());

  // 1. Real English.
  std::vector<std::string> files;
  for (const char* f : {"corpus/brown.txt", "corpus/nlp-corpus.txt"})
    if (fs::exists(fs::path(data) / f)) files.push_back((fs::path(data) / f).string());
  std::printf("## Real English: %zu file(s) of ../shared/data/corpus, BERT uncased vocabulary (30,522)\n\n",
              files.size());
  std::printf("| measurement | value |\n|---|---|\n");
  int64_t bytes = 0, tokens = 0;
  std::vector<Document> docs;
  for (const auto& f : files)
    for (auto& d : read_documents(f)) docs.push_back(std::move(d));
  auto t0 = Clock::now();
  double c0 = thread_cpu_seconds();
  for (const auto& d : docs)
    for (const auto& s : d.sentences) {
      bytes += static_cast<int64_t>(s.size());
      tokens += static_cast<int64_t>(tok.encode(s).ids.size());
    }
  double secs = seconds_since(t0), cpu = thread_cpu_seconds() - c0;
  std::printf("| WordPiece encode, 1 thread | %.1f MB/s wall, %.1f MB/s per CPU-second (%lld tokens, %.2f bytes/token) |\n",
              bytes / secs / 1e6, bytes / cpu / 1e6, static_cast<long long>(tokens),
              static_cast<double>(bytes) / static_cast<double>(tokens));
  docs.clear();
  DataOptions d;
  d.train_files = files;
  d.tokenizer = "wordpiece";
  d.tokenizer_model = vocab.string();
  const fs::path work = fs::temp_directory_path() / "rpe_data_bench";
  fs::create_directories(work);
  for (const int threads : {1, cores}) {
    const PrepareSummary s = prepare_data(d, tok, {work / "real", threads, /*force=*/true});
    std::printf("| prepare-data, %d thread(s) | %.1f MB/s (%.1f MB in %.2f s; %lld docs, %lld tokens) |\n", threads,
                s.bytes / s.seconds / 1e6, s.bytes / 1e6, s.seconds, static_cast<long long>(s.documents),
                static_cast<long long>(s.tokens));
  }
  remove_folder(work / "real");

  // 2. Synthetic corpora of growing size.
  std::vector<std::string> words;
  {
    std::ifstream in(vocab);
    std::string line;
    for (int id = 0; std::getline(in, line); ++id)
      if (id >= 1996 && line.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos) words.push_back(line);
  }
  std::printf("\n## Synthetic corpora (vocabulary words, log-uniform ranks), L=%lld, %d threads for prepare\n\n",
              static_cast<long long>(seq_len), cores);
  std::vector<EfficiencyRow> efficiency_rows;
  std::printf("| text | tokens | shards | prepare | prepare peak RSS | first start: time to first batch, peak RSS "
              "(anon + file) | second start | sequences |\n|---|---|---|---|---|---|---|---|\n");
  std::vector<Start> starts;
  fs::path largest;
  for (size_t k = 0; k < sizes_mb.size(); ++k) {
    const fs::path text = work / ("corpus_" + std::to_string(sizes_mb[k]) + ".txt");
    generate_corpus(text, words, sizes_mb[k] << 20, 42 + k);
    d.train_files = {text.string()};
    d.valid_fraction = 0.002;
    const fs::path out = work / ("shards_" + std::to_string(sizes_mb[k]));
    if (k == 0) {  // per-core throughput and parallel efficiency, on the smallest corpus
      for (const int threads : {1, cores}) {
        const double p0 = process_cpu_seconds();
        const PrepareSummary s = prepare_data(d, tok, {out, threads, true});
        const double used = process_cpu_seconds() - p0;
        efficiency_rows.push_back({threads, s.bytes / s.seconds / 1e6, s.bytes / used / 1e6});
      }
    }
    reset_peak_rss();
    const PrepareSummary s = prepare_data(d, tok, {out, cores, true});
    const double prepare_rss = status_mb("VmHWM");
    const Start first = start_from_shards(out, tok, seq_len, batch);
    const Start second = start_from_shards(out, tok, seq_len, batch);
    starts.push_back(second);
    std::printf("| %.0f MB | %.1f M | %lld | %.1f MB/s (%.0f s) | %.0f MB | %.2f s, %.0f MB (%.0f + %.0f) | %.2f s, "
                "%.0f MB (%.0f + %.0f) | %lld |\n",
                s.bytes / 1e6, s.tokens / 1e6, static_cast<long long>(s.train_shards + s.valid_shards),
                s.bytes / s.seconds / 1e6, s.seconds, prepare_rss, first.seconds, first.rss_mb, first.anon_mb,
                first.file_mb, second.seconds, second.rss_mb, second.anon_mb, second.file_mb,
                static_cast<long long>(first.sequences));
    std::fflush(stdout);
    fs::remove(text);
    if (k + 1 < sizes_mb.size()) remove_folder(out);
    else largest = out;
  }
  if (starts.size() >= 2) {
    const Start &a = starts.front(), &b = starts.back();
    std::printf("\nPretraining start, anonymous RSS growth from the smallest to the largest corpus: %.1f bytes per "
                "sequence (%.1f MB for %lld more sequences).\n",
                (b.anon_mb - a.anon_mb) * 1048576.0 / static_cast<double>(b.sequences - a.sequences),
                b.anon_mb - a.anon_mb, static_cast<long long>(b.sequences - a.sequences));
  }
  std::printf("\n| prepare-data on the smallest corpus | wall MB/s | MB per CPU-second |\n|---|---|---|\n");
  for (const auto& r : efficiency_rows) std::printf("| %d thread(s) | %.1f | %.1f |\n", r.threads, r.wall, r.per_cpu);
  if (efficiency_rows.size() == 2)
    std::printf("\nParallel efficiency on %d threads (wall MB/s / (threads x 1-thread wall MB/s)): %.0f%%.\n", cores,
                100.0 * efficiency_rows[1].wall / (cores * efficiency_rows[0].wall));

  // 3. The loader on one core, no prefetch: reading from the shards' maps, masking, [B, L] tensors.
  {
    auto shards = std::make_shared<const PreparedShards>(open_prepared(largest, tok));
    auto seqs = std::make_shared<ShardSequences>(shards, false, largest, tok.special(), seq_len, true);
    MlmLoader loader(seqs, tok, {MaskingOptions{}, batch, 99, true});
    loader.next();
    int64_t real = 0;
    const int64_t batches = 200;
    t0 = Clock::now();
    c0 = thread_cpu_seconds();
    for (int64_t b = 0; b < batches; ++b) real += loader.next().tokens;
    secs = seconds_since(t0);
    cpu = thread_cpu_seconds() - c0;
    const double positions = static_cast<double>(batches * batch * seq_len);
    std::printf("\nLoader on one core (largest corpus, random order, whole-word masking, B=%lld L=%lld): %.2f M "
                "tokens/s wall, %.2f M tokens/s per CPU-second (non-pad %.2f M/s wall). Target: >= 0.1 M/s.\n",
                static_cast<long long>(batch), static_cast<long long>(seq_len), positions / secs / 1e6,
                positions / cpu / 1e6, real / secs / 1e6);
  }
  remove_folder(largest);
  fs::remove(work);
  return 0;
}

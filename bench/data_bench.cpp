// Data pipeline benchmark, printed as Markdown (bench/results/data_cpu.md):
//  1. real English (../shared/data corpora, BERT uncased vocabulary): WordPiece encode MB/s on
//     one thread, prepare-data MB/s on one thread and on all cores;
//  2. synthetic corpora of growing size (default 64, 256, 1024 MB of text, generated into the
//     temp folder and deleted after): prepare-data MB/s, peak RSS and where its threads' time
//     went; then pretraining starts from the shards (build_corpus as pretrain calls it, the
//     loader with its prefetch thread, the first batch): time to the first batch and peak RSS,
//     first start (verification, index built) and second start (stamps, cached index); on the
//     largest corpus (one large file), prepare-data on 1 thread against all cores, alternated;
//  3. the loader on one core (no prefetch): masking + batching tokens/s at L=512.
// Every prepare and start runs in a fresh process (this program with --child ...), which reads
// its own peak RSS (VmHWM: heap and mapped file pages alike) just before it exits: nothing of an
// earlier phase (allocator residue, mappings) is in a figure.
// Usage: data_bench [SHARED_DATA_DIR] [--sizes-mb 64,256,1024] [--seq-len L] [--batch B]
//                   [--repeats R (1-thread / all-core prepare pairs, default 2)]
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
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

int child_main(int argc, char** argv);  // data_bench_child.cpp

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

std::string load_average() {
  std::string load;
  std::getline(std::ifstream("/proc/loadavg"), load);
  return load.substr(0, load.find(' '));
}

// Runs `data_bench --child ARGS...` (this very binary) and returns the numbers it prints on
// its last line; exits when the child fails.
std::vector<double> run_child(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> all = {"data_bench", "--child"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid = 0;
  std::fflush(stdout);
  if (posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("cannot start a child process");
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "data_bench: child %s failed:\n%s\n", args[0].c_str(), out.c_str());
    std::exit(1);
  }
  std::istringstream last(out.substr(out.find_last_of('\n', out.size() - 2) + 1));
  std::vector<double> v;
  for (double x; last >> x;) v.push_back(x);
  return v;
}

// What a --child prepare prints (see data_bench_child.cpp).
struct Prepared {
  double bytes, tokens, documents, shards, seconds, cpu, peak_mb, read, tokenize, commit, write, wait;
  int threads;
  double mb_s() const { return bytes / seconds / 1e6; }
  double mb_cpu_s() const { return bytes / cpu / 1e6; }
};
Prepared prepare_child(const fs::path& out, const fs::path& vocab, int threads, const std::vector<std::string>& files) {
  std::vector<std::string> a = {"prepare", out.string(), vocab.string(), std::to_string(threads)};
  a.insert(a.end(), files.begin(), files.end());
  const auto v = run_child(a);
  return {v.at(0), v.at(1), v.at(2), v.at(3), v.at(4), v.at(5), v.at(6), v.at(7), v.at(8), v.at(9), v.at(10), v.at(11),
          threads};
}

// What a --child start prints.
struct Start {
  double seconds, peak_mb, anon_mb, file_mb, shard_mb, index_mb, sequences;
};
Start start_child(const fs::path& out, const fs::path& vocab, const fs::path& text, int64_t L, int64_t B) {
  const auto v = run_child({"start", out.string(), vocab.string(), std::to_string(L), std::to_string(B), text.string()});
  return {v.at(0), v.at(1), v.at(2), v.at(3), v.at(4), v.at(5), v.at(6)};
}

std::string profile(const Prepared& p) {  // where the threads' time went, as shares of threads x wall
  const double all = p.threads * p.seconds / 100.0;
  char line[200];
  std::snprintf(line, sizeof line, "read %.0f%%, tokenize %.0f%%, commit %.0f%% (write %.0f%%), waiting %.0f%%",
                p.read / all, p.tokenize / all, p.commit / all, p.write / all, p.wait / all);
  return line;
}

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

constexpr const char* kUsage =
    "Usage: data_bench [SHARED_DATA_DIR] [--sizes-mb 64,256,1024] [--seq-len L] [--batch B]\n"
    "                  [--repeats R (1-thread / all-core prepare pairs, default 2)]\n";

struct Args {
  std::string data = "../shared/data";
  int64_t seq_len = 512, batch = 32, repeats = 2;
  std::vector<int64_t> sizes_mb = {64, 256, 1024};
};

Args parse_args(int argc, char** argv) {
  Args args;
  if (argc > 1 && argv[1][0] != '-') args.data = argv[1];
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seq-len") args.seq_len = std::stoll(argv[i + 1]);
    if (a == "--batch") args.batch = std::stoll(argv[i + 1]);
    if (a == "--repeats") args.repeats = std::max<int64_t>(1, std::stoll(argv[i + 1]));
    if (a == "--sizes-mb") {
      args.sizes_mb.clear();
      std::stringstream ss(argv[i + 1]);
      for (std::string v; std::getline(ss, v, ',');) args.sizes_mb.push_back(std::stoll(v));
    }
  }
  return args;
}

void print_title(int cores) {  // date, CPU, kernel and load: what the figures below depend on
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  utsname u{};
  uname(&u);
  std::printf("# Data pipeline benchmark (CPU)\n\n%s |%s | %d hardware threads | %s %s | load average at start: %s\n\n",
              date, first_line_with("/proc/cpuinfo", "model name").c_str(), cores, u.sysname, u.release,
              load_average().c_str());
}

// Section 1's first row: WordPiece encode of the real corpora's sentences on this thread.
void bench_encode(const std::vector<std::string>& files, const WordPieceTokenizer& tok) {
  int64_t bytes = 0, tokens = 0;
  std::vector<Document> docs;
  for (const auto& f : files)
    for (auto& d : read_documents(f)) docs.push_back(std::move(d));
  const auto t0 = Clock::now();
  const double c0 = thread_cpu_seconds();
  for (const auto& d : docs)
    for (const auto& s : d.sentences) {
      bytes += static_cast<int64_t>(s.size());
      tokens += static_cast<int64_t>(tok.encode_corpus(s).ids.size());  // the pretraining path's call
    }
  const double secs = seconds_since(t0), cpu = thread_cpu_seconds() - c0;
  std::printf("| WordPiece encode, 1 thread | %.1f MB/s wall, %.1f MB/s per CPU-second (%lld tokens, %.2f bytes/token) |\n",
              bytes / secs / 1e6, bytes / cpu / 1e6, static_cast<long long>(tokens),
              static_cast<double>(bytes) / static_cast<double>(tokens));
}

// Section 1's prepare rows: the real corpora on one thread, then on all cores.
void bench_prepare_real(const std::vector<std::string>& files, const fs::path& vocab, const fs::path& work, int cores) {
  for (const int threads : {1, cores}) {
    const Prepared p = prepare_child(work / "real", vocab, threads, files);
    std::printf("| prepare-data, %d thread(s) | %.1f MB/s (%.1f MB in %.2f s; %.0f docs, %.0f tokens) |\n", threads,
                p.mb_s(), p.bytes / 1e6, p.seconds, p.documents, p.tokens);
  }
  remove_folder(work / "real");
}

// The synthetic corpora's words: the vocabulary's lowercase whole words past the specials
// and single characters (ids from 1996 on in BERT's uncased vocabulary).
std::vector<std::string> vocabulary_words(const fs::path& vocab) {
  std::vector<std::string> words;
  std::ifstream in(vocab);
  std::string line;
  for (int id = 0; std::getline(in, line); ++id)
    if (id >= 1996 && line.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos) words.push_back(line);
  return words;
}

// One large file (the largest corpus, `bytes` of it) on 1 thread and on all cores, alternated
// (a drifting machine speed affects both alike), into a scratch folder; deletes the file.
void bench_parallel_prepare(const fs::path& text, double bytes, const fs::path& vocab, const fs::path& work, int cores,
                            int64_t repeats) {
  std::vector<Prepared> one, all;
  for (int64_t r = 0; r < repeats; ++r) {
    one.push_back(prepare_child(work / "scratch", vocab, 1, {text.string()}));
    all.push_back(prepare_child(work / "scratch", vocab, cores, {text.string()}));
  }
  remove_folder(work / "scratch");
  fs::remove(text);
  std::printf("\n| prepare-data, one %.0f MB file | wall MB/s | MB per CPU-second | where the threads' time went "
              "(share of threads x wall) |\n|---|---|---|---|\n", bytes / 1e6);
  std::vector<double> ratios;
  for (size_t r = 0; r < one.size(); ++r) {
    for (const Prepared* p : {&one[r], &all[r]})
      std::printf("| %d thread(s), run %zu | %.1f | %.1f | %s |\n", p->threads, r + 1, p->mb_s(), p->mb_cpu_s(),
                  profile(*p).c_str());
    ratios.push_back(all[r].mb_s() / (cores * one[r].mb_s()));
  }
  std::printf("\nParallel efficiency on %d threads, one %.0f MB file (wall MB/s / (threads x 1-thread wall MB/s), "
              "per pair):", cores, bytes / 1e6);
  for (const double e : ratios) std::printf(" %.0f%%", 100 * e);
  std::printf("; median %.0f%%. Target: >= 80%%. Load average now: %s.\n", 100 * median(ratios),
              load_average().c_str());
}

// How a pretraining start's memory grows per sequence, from the smallest corpus to the largest
// (each pair: first start, second start).
void print_start_growth(const std::vector<std::pair<Start, Start>>& starts) {
  const Start &a1 = starts.front().first, &b1 = starts.back().first;
  const Start &a2 = starts.front().second, &b2 = starts.back().second;
  const double more = b1.sequences - a1.sequences;
  auto per_seq = [&](double mb_a, double mb_b) { return (mb_b - mb_a) * 1048576.0 / more; };
  std::printf("\nPretraining start, growth from the smallest to the largest corpus (%.0f more sequences), bytes per "
              "sequence: peak RSS %.1f at the first start, %.1f at the second; RSS once started (anon + file) %.1f "
              "and %.1f; anonymous RSS %.1f and %.1f; the index map's resident pages %.1f and %.1f. Target: < 16 "
              "(the index: 8). A peak also holds the pages of the sequence being read (the kernel maps up to a "
              "few hundred KB around each fault) and one 1 MB piece of a scan: about a MB that does not grow "
              "with the corpus.\n",
              more, per_seq(a1.peak_mb, b1.peak_mb), per_seq(a2.peak_mb, b2.peak_mb),
              per_seq(a1.anon_mb + a1.file_mb, b1.anon_mb + b1.file_mb),
              per_seq(a2.anon_mb + a2.file_mb, b2.anon_mb + b2.file_mb), per_seq(a1.anon_mb, b1.anon_mb),
              per_seq(a2.anon_mb, b2.anon_mb), per_seq(a1.index_mb, b1.index_mb), per_seq(a2.index_mb, b2.index_mb));
}

// Section 2: per size, generate, prepare on all cores, start twice; every corpus but the largest
// is deleted after its row. Returns the largest corpus's shard folder (section 3 reads it).
fs::path bench_synthetic(const Args& args, const fs::path& vocab, const fs::path& work, int cores) {
  const std::vector<std::string> words = vocabulary_words(vocab);
  std::printf("\n## Synthetic corpora (vocabulary words, log-uniform ranks), L=%lld, %d threads for prepare\n\n"
              "Each prepare and each start is a fresh process; peak RSS is its VmHWM (heap and mapped file pages).\n\n",
              static_cast<long long>(args.seq_len), cores);
  std::printf("| text | tokens | shards | prepare | prepare peak RSS | first start: time to first batch, peak RSS "
              "(anon + file) | second start | sequences |\n|---|---|---|---|---|---|---|---|\n");
  std::vector<std::pair<Start, Start>> starts;
  fs::path largest;
  for (size_t k = 0; k < args.sizes_mb.size(); ++k) {
    const fs::path text = work / ("corpus_" + std::to_string(args.sizes_mb[k]) + ".txt");
    generate_corpus(text, words, args.sizes_mb[k] << 20, 42 + k);
    const fs::path out = work / ("shards_" + std::to_string(args.sizes_mb[k]));
    const Prepared s = prepare_child(out, vocab, cores, {text.string()});
    const Start first = start_child(out, vocab, text, args.seq_len, args.batch);
    const Start second = start_child(out, vocab, text, args.seq_len, args.batch);
    starts.push_back({first, second});
    std::printf("| %.0f MB | %.1f M | %.0f | %.1f MB/s (%.0f s) | %.0f MB | %.2f s, %.0f MB (%.0f + %.0f) | %.2f s, "
                "%.0f MB (%.0f + %.0f) | %.0f |\n",
                s.bytes / 1e6, s.tokens / 1e6, s.shards, s.mb_s(), s.seconds, s.peak_mb, first.seconds, first.peak_mb,
                first.anon_mb, first.file_mb, second.seconds, second.peak_mb, second.anon_mb, second.file_mb,
                first.sequences);
    std::fflush(stdout);
    if (k + 1 < args.sizes_mb.size()) {
      fs::remove(text);
      remove_folder(out);
      continue;
    }
    largest = out;
    bench_parallel_prepare(text, s.bytes, vocab, work, cores, args.repeats);
  }
  if (starts.size() >= 2) print_start_growth(starts);
  return largest;
}

// Section 3: the loader on one core, no prefetch: reading from the shards' maps, masking, [B, L] tensors.
void bench_loader(const fs::path& shards_dir, const WordPieceTokenizer& tok, int64_t seq_len, int64_t batch) {
  auto shards = std::make_shared<const PreparedShards>(open_prepared(shards_dir, tok));
  auto seqs = std::make_shared<ShardSequences>(shards, false, shards_dir, tok.special(), seq_len, Packing::full_sentences);
  MlmLoader loader(seqs, tok, {MaskingOptions{}, batch, 99, true});
  loader.next();
  int64_t real = 0;
  const int64_t batches = 200;
  const auto t0 = Clock::now();
  const double c0 = thread_cpu_seconds();
  for (int64_t b = 0; b < batches; ++b) real += loader.next().tokens;
  const double secs = seconds_since(t0), cpu = thread_cpu_seconds() - c0;
  const double positions = static_cast<double>(batches * batch * seq_len);
  std::printf("\nLoader on one core (largest corpus, random order, whole-word masking, B=%lld L=%lld): %.2f M "
              "tokens/s wall, %.2f M tokens/s per CPU-second (non-pad %.2f M/s wall). Target: >= 0.4 M/s (an H100's BERT-base step).\n",
              static_cast<long long>(batch), static_cast<long long>(seq_len), positions / secs / 1e6,
              positions / cpu / 1e6, real / secs / 1e6);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--child") return child_main(argc - 2, argv + 2);
  for (int i = 1; i < argc; ++i)  // before anything runs: the default sizes take many minutes
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return std::printf("%s", kUsage), 0;
  log::init(/*quiet=*/true);
  const Args args = parse_args(argc, argv);
  const fs::path vocab = fs::path(args.data) / "vocab/uncased/vocab.txt";
  if (!fs::exists(vocab)) {
    std::fprintf(stderr, "data_bench: %s not found (pass the shared data folder)\n", vocab.string().c_str());
    return 2;
  }
  const WordPieceTokenizer tok(vocab, true);
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  print_title(cores);

  // 1. Real English.
  std::vector<std::string> files;
  for (const char* f : {"corpus/brown.txt", "corpus/nlp-corpus.txt"})
    if (fs::exists(fs::path(args.data) / f)) files.push_back((fs::path(args.data) / f).string());
  std::printf("## Real English: %zu file(s) of ../shared/data/corpus, BERT uncased vocabulary (30,522)\n\n",
              files.size());
  std::printf("| measurement | value |\n|---|---|\n");
  bench_encode(files, tok);
  const fs::path work = fs::temp_directory_path() / ("rpe_data_bench_" + std::to_string(::getpid()));
  fs::create_directories(work);
  bench_prepare_real(files, vocab, work, cores);

  // 2. Synthetic corpora of growing size; 3. the loader on the largest.
  const fs::path largest = bench_synthetic(args, vocab, work, cores);
  bench_loader(largest, tok, args.seq_len, args.batch);
  remove_folder(largest);
  fs::remove(work);
  return 0;
}

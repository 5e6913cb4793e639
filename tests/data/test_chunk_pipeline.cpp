// The ordered chunk pipeline of prepare-data (chunk_pipeline.h): every chunk is committed
// once, in file order, with its file offset, whatever the thread count and window and however
// the tokenizing threads finish; the first error in file order is the one thrown, and nothing
// after it is committed.
// One read of a corpus file gives prepare-data both its text and its checksum (hashed_input.h):
// the checksum a ChunkReader takes while it reads is file_checksum's, the value manifests
// recorded when the checksum was a read of its own, for a file of many chunks whose lines cross
// the chunks' and the reads' boundaries, with or without a final newline, and for gzip (of the
// compressed bytes, a file of several members, bytes after the last one). A file that grows
// while prepare-data reads it is refused.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "data/chunk_pipeline.h"
#include "data/hashed_input.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/text_reader.h"
#include "data/wordpiece_tokenizer.h"
#include "util/log.h"
#include "data_test_util.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

// Documents "doc <i> ..." separated by blank lines; `marks` replaces some documents' text.
std::string corpus(int docs, const std::map<int, std::string>& marks = {}) {
  std::string text;
  for (int i = 0; i < docs; ++i) {
    const auto m = marks.find(i);
    text += m != marks.end() ? m->second : "doc " + std::to_string(i) + " has a few words\nand a second line";
    text += "\n\n";
  }
  return text;
}

// Tokenizing that finishes in a scrambled order: each chunk sleeps 0-2 ms (seeded by its text)
// and returns its bytes as ids.
void slow_copy(std::string_view text, ChunkResult& r) {
  std::seed_seq seq(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(text.size(), 64)));
  std::mt19937 rng(seq);
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
  for (const char c : text) r.ids.push_back(static_cast<unsigned char>(c));
}

TEST(ChunkPipeline, CommitsEveryChunkOnceInFileOrderOnAnyThreadCount) {
  const fs::path dir = test::temp_dir();
  const std::string text = corpus(3000);
  test::write_text(dir / "a.txt", text);
  for (const int threads : {1, 2, 4})
    for (const size_t window : {1, 3, 16}) {
      ChunkReader reader(dir / "a.txt", DocumentFormat::kBlankLine, 2048);  // ~50 documents a chunk
      std::string committed;
      int64_t chunks = 0;
      ChunkPipeline p;
      p.threads = threads;
      p.window = window;
      p.tokenize = slow_copy;
      p.commit = [&](const ChunkResult& r, uint64_t offset) {
        EXPECT_EQ(offset, committed.size());
        committed.append(r.ids.begin(), r.ids.end());
        ++chunks;
      };
      const PipelineTimes t = run_chunk_pipeline(reader, p);
      EXPECT_EQ(committed, text) << threads << " threads, window " << window;
      EXPECT_GT(chunks, 20);
      EXPECT_GT(t.tokenize, 0.0);
      EXPECT_GE(t.wait, 0.0);
    }
}

TEST(ChunkPipeline, TheFirstErrorInFileOrderWinsAndNothingAfterItIsCommitted) {
  const fs::path dir = test::temp_dir();
  // An error that takes long to happen early in the file, a quick one later, and a commit error
  // later still: the early one is thrown, on any number of threads.
  const std::string text = corpus(3000, {{900, "slow failure"}, {1800, "quick failure"}, {2500, "commit failure"}});
  test::write_text(dir / "a.txt", text);
  for (const int threads : {1, 2, 4}) {
    ChunkReader reader(dir / "a.txt", DocumentFormat::kBlankLine, 2048);
    std::string committed;
    ChunkPipeline p;
    p.threads = threads;
    p.window = 64;  // the quick failure, ~20 chunks later, is read and fails first
    p.tokenize = [](std::string_view t, ChunkResult& r) {
      if (t.find("slow failure") != std::string_view::npos) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        throw std::runtime_error("slow");
      }
      if (t.find("quick failure") != std::string_view::npos) throw std::runtime_error("quick");
      slow_copy(t, r);
    };
    p.commit = [&](const ChunkResult& r, uint64_t) {
      const std::string chunk(r.ids.begin(), r.ids.end());
      if (chunk.find("commit failure") != std::string::npos) throw std::runtime_error("commit");
      committed += chunk;
    };
    try {
      run_chunk_pipeline(reader, p);
      ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "slow") << threads << " threads";
    }
    // Exactly the chunks before the failing one: a prefix of the file ending at a document end.
    EXPECT_EQ(text.compare(0, committed.size(), committed), 0);
    EXPECT_EQ(committed.find("slow failure"), std::string::npos);
    EXPECT_GT(committed.size(), text.find("doc 850 "));
    EXPECT_LT(committed.size(), text.find("slow failure"));
  }
  // Without the early failures the commit error is the one thrown.
  test::write_text(dir / "b.txt", corpus(3000, {{2500, "commit failure"}}));
  ChunkReader reader(dir / "b.txt", DocumentFormat::kBlankLine, 2048);
  ChunkPipeline p;
  p.threads = 2;
  p.tokenize = slow_copy;
  p.commit = [](const ChunkResult& r, uint64_t) {
    if (std::string(r.ids.begin(), r.ids.end()).find("commit failure") != std::string::npos)
      throw std::runtime_error("commit");
  };
  EXPECT_THROW(run_chunk_pipeline(reader, p), std::runtime_error);
}

// prepare-data --threads 100000 ended in "terminate called without an active exception": the
// system refused a thread and the vector of started, joinable ones was destroyed. Now the
// started threads are joined and the refusal is a std::system_error (main() exits 1). Run in
// a child whose address space leaves room for a few thread stacks only.
TEST(ChunkPipeline, AThreadTheSystemRefusesIsAnErrorNotATerminate) {
  const fs::path dir = test::temp_dir();
  test::write_text(dir / "a.txt", corpus(3000));
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlimit limit{static_cast<rlim_t>(pages * ::sysconf(_SC_PAGESIZE) + (64 << 20)), RLIM_INFINITY};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(10);
    int code = 11;  // no error: the limit let 1000 threads start
    try {
      ChunkReader reader(dir / "a.txt", DocumentFormat::kBlankLine, 2048);
      ChunkPipeline p;
      p.threads = 1000;
      p.window = 4000;
      p.tokenize = slow_copy;
      p.commit = [](const ChunkResult&, uint64_t) {};
      run_chunk_pipeline(reader, p);
    } catch (const std::system_error& e) {
      const bool named = std::string(e.what()).rfind("cannot start tokenizer thread ", 0) == 0;
      code = e.code() == std::errc::resource_unavailable_try_again && named ? 0 : 12;
    } catch (...) {
      code = 13;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);  // 11: no refusal, 12: another error, 13: not a system_error
}

// ~`bytes` of documents (blank-line separated) whose lines are 1 to ~400 bytes long.
std::string uneven_text(size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string text;
  while (text.size() < bytes) {
    const int words = 1 + static_cast<int>(rng() % 60);
    for (int w = 0; w < words; ++w) {
      text += w ? " " : "";
      for (int c = 1 + static_cast<int>(rng() % 7); c > 0; --c) text += static_cast<char>('a' + rng() % 26);
    }
    text += rng() % 4 ? "\n" : "\n\n";
  }
  return text;
}

uint64_t hash_of(const std::string& bytes) {  // what the separate read computed: all bytes, in order
  ShardHasher h;
  h.update(bytes.data(), bytes.size());
  return h.value();
}

struct ReadBack {
  std::string text;
  int chunks = 0;
  uint64_t checksum = 0, file_bytes = 0;
};
ReadBack read_whole(const fs::path& file, size_t chunk_bytes) {
  ChunkReader r(file, DocumentFormat::kBlankLine, chunk_bytes);
  ReadBack b;
  std::string chunk;
  uint64_t offset = 0;
  while (r.next(chunk, offset)) b.text += chunk, ++b.chunks;
  b.checksum = r.file_checksum();
  b.file_bytes = r.file_bytes();
  return b;
}

std::string gzip_member(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(HashedInput, TheReadersChecksumIsFileChecksumsOverChunksAndReads) {
  const fs::path dir = test::temp_dir();
  // 2.5 MB: three 1 MB reads, ~600 chunks of 4 KB; lines cross both kinds of boundary.
  const std::string text = uneven_text(size_t{5} << 19, 7);
  for (const auto& [name, bytes] : {std::pair<std::string, std::string>{"final_newline.txt", text},
                                    {"no_final_newline.txt", text + "the last line"}}) {
    SCOPED_TRACE(name);
    test::write_text(dir / name, bytes);
    const ReadBack b = read_whole(dir / name, 4096);
    EXPECT_GT(b.chunks, 100);
    EXPECT_EQ(b.text, bytes);
    EXPECT_EQ(b.file_bytes, bytes.size());
    EXPECT_EQ(b.checksum, hash_of(bytes));
    EXPECT_EQ(b.checksum, file_checksum(dir / name));
  }
}

TEST(HashedInput, AGzipFilesChecksumIsOfItsCompressedBytes) {
  const fs::path dir = test::temp_dir();
  const std::string a = uneven_text(size_t{3} << 20, 1), b = uneven_text(size_t{1} << 19, 2);
  // Two members (a concatenated .gz is one text) and bytes after them that gzread ignores, more
  // than one read holds: they are hashed all the same.
  const std::string raw = gzip_member(a) + gzip_member(b) + std::string(size_t{3} << 19, '\0') + "junk";
  ASSERT_GT(raw.size(), size_t{3} << 20 >> 1);  // more than one 1 MB read
  test::write_text(dir / "c.txt.gz", raw);
  const ReadBack r = read_whole(dir / "c.txt.gz", 1 << 16);
  EXPECT_EQ(r.text, a + b);
  EXPECT_EQ(r.file_bytes, raw.size());
  EXPECT_EQ(r.checksum, hash_of(raw));
  EXPECT_EQ(r.checksum, file_checksum(dir / "c.txt.gz"));
  test::write_text(dir / "cut.txt.gz", raw.substr(0, raw.size() / 3));  // cut inside the first member
  EXPECT_NE(test::user_error([&] { read_whole(dir / "cut.txt.gz", 1 << 16); }).find("cut.txt.gz: truncated or corrupt gzip"),
            std::string::npos);
}

// Appends to the corpus the first time it tokenizes a line: the file grows under the reader.
class AppendingTokenizer : public WordPieceTokenizer {
 public:
  AppendingTokenizer(const std::string& vocab, fs::path file) : WordPieceTokenizer(vocab, true), file_(std::move(file)) {}
  Encoding encode_corpus(std::string_view text) const override {
    std::call_once(once_, [&] { std::ofstream(file_, std::ios::app) << test::random_corpus(20000, 3); });
    return WordPieceTokenizer::encode_corpus(text);
  }

 private:
  fs::path file_;
  mutable std::once_flag once_;
};

TEST(HashedInput, PrepareDataRefusesAFileThatGrewWhileItWasRead) {
  const fs::path dir = test::temp_dir();
  DataOptions d;
  d.tokenizer = "wordpiece";
  d.tokenizer_model = test::write_tiny_vocab(dir).string();
  d.train_files = {(dir / "a.txt").string()};
  test::write_text(dir / "a.txt", test::random_corpus(20000, 4));  // several 1 MB chunks
  const AppendingTokenizer tok(d.tokenizer_model, dir / "a.txt");
  const std::string err = test::user_error([&] { prepare_data(d, tok, {dir / "out", 2}); });
  // Named by the read's own count (the appended bytes were read, and hashed), not only by the
  // size and mtime compared after the last file.
  EXPECT_NE(err.find("a.txt: changed while prepare-data read it ("), std::string::npos) << err;
  EXPECT_NE(err.find("bytes read"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir / "out" / "manifest.json"));
}

// Every rank but one waits on each shard's verification in turn (stale stamps on a shared
// folder): one line says so for the whole wait (then one at most every 30 s), not one per shard
// (thousands at paper scale). A child holds every shard's verification lock and lets them go one
// at a time; this process waits on each.
TEST(VerifyWait, ARankThatWaitsOnEveryShardLogsOneLine) {
  const fs::path dir = test::temp_dir();
  DataOptions d;
  d.tokenizer = "wordpiece";
  d.tokenizer_model = test::write_tiny_vocab(dir).string();
  d.shard_tokens = 20000;
  d.train_files = {(dir / "a.txt").string()};
  test::write_text(dir / "a.txt", test::random_corpus(2000, 2));
  const WordPieceTokenizer tok(d.tokenizer_model, true);
  prepare_data(d, tok, {dir / "out", 2});
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(dir / "out"))
    if (e.path().extension() == ".shard") shards.push_back(e.path());
  std::sort(shards.begin(), shards.end());  // train-*, then valid-*: open_prepared's order
  ASSERT_GE(shards.size(), size_t{3});
  for (const auto& s : shards) fs::remove(s.string() + ".verified");
  const fs::path flag = dir / "child-holds-the-locks";
  const pid_t child = ::fork();
  if (child == 0) {
    std::vector<int> fds;
    for (const auto& s : shards) {
      const int fd = ::open((s.string() + ".verified.lock").c_str(), O_RDWR | O_CREAT, 0644);
      struct flock whole {};
      whole.l_type = F_WRLCK;
      whole.l_whence = SEEK_SET;
      if (fd < 0 || ::fcntl(fd, F_SETLKW, &whole) != 0) ::_exit(3);
      fds.push_back(fd);
    }
    std::ofstream(flag) << "1";
    for (const int fd : fds) ::usleep(100000), ::close(fd);
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  for (int i = 0; i < 60000 && !fs::exists(flag); ++i) ::usleep(1000);
  ASSERT_TRUE(fs::exists(flag));
  spdlog::default_logger()->set_level(spdlog::level::info);
  ::testing::internal::CaptureStdout();
  open_prepared(dir / "out", tok);
  const std::string out = ::testing::internal::GetCapturedStdout();
  spdlog::default_logger()->set_level(spdlog::level::warn);
  int status = 0;
  ::waitpid(child, &status, 0);
  size_t lines = 0;
  for (size_t at = out.find("for another process verifying"); at != std::string::npos;
       at = out.find("for another process verifying", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << out;
  EXPECT_NE(out.find("waiting for another process verifying shard 1 of " + std::to_string(shards.size())),
            std::string::npos) << out;
}

}  // namespace
}  // namespace rpe

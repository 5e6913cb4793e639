// The ordered chunk pipeline of prepare-data (chunk_pipeline.h): every chunk is committed
// once, in file order, with its file offset, whatever the thread count and window and however
// the tokenizing threads finish; the first error in file order is the one thrown, and nothing
// after it is committed.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "data/chunk_pipeline.h"
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

}  // namespace
}  // namespace rpe

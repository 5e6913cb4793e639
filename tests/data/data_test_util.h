// Helpers for the data tests: temporary folders, small files, a tiny WordPiece vocabulary.
#pragma once
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "test_paths.h"
#include "util/errors.h"

namespace rpe::test {

// Deletes a folder tree with POSIX calls: the std::filesystem::remove_all that LibTorch's
// libtorch.so exports crashes (null call) when the tests link against it.
inline void remove_tree(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return;
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) entries.push_back(e.path());
  for (const auto& p : entries) {
    if (std::filesystem::is_directory(std::filesystem::symlink_status(p, ec))) remove_tree(p);
    else ::unlink(p.c_str());
  }
  ::rmdir(dir.c_str());
}

// A fresh, empty folder in this process's scratch folder, named after the running test.
inline std::filesystem::path temp_dir(const std::string& tag = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = process_temp_dir() / (std::string(info->test_suite_name()) + "_" + info->name() + tag);
  remove_tree(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

// Vocabulary: specials at 0..4, then single letters, their "##" forms and a few words.
inline std::vector<std::string> tiny_vocab_lines() {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (char c = 'a'; c <= 'z'; ++c) v.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) v.push_back("##" + std::string(1, c));
  for (const char* w : {"the", "cat", "dog", "runs", "un", "##aff", "##able", "hello", "world", ",", ".", "!",
                        "##ing", "play", "é", "你", "好"})
    v.push_back(w);
  return v;
}

inline std::filesystem::path write_tiny_vocab(const std::filesystem::path& dir) {
  std::string text;
  for (const auto& l : tiny_vocab_lines()) text += l + "\n";
  write_text(dir / "vocab.txt", text);
  return dir / "vocab.txt";
}

// Another process holding the fcntl lock on `lock`, as a rank of the same job would (a fork of
// this test process: fcntl locks do not exclude threads of one process). It takes the lock,
// creates `flag`, waits `hold_us`, runs `then` and exits with 0 when that returned true
// (unlocking). Returns its pid once it holds the lock, -1 with a test failure when it exits
// before or takes none within a minute (a child that cannot lock fails the test, never hangs it).
inline pid_t fork_holding_lock(const std::filesystem::path& lock, const std::filesystem::path& flag, useconds_t hold_us,
                               const std::function<bool()>& then) {
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
    struct flock whole {};
    whole.l_type = F_WRLCK;
    whole.l_whence = SEEK_SET;
    if (fd < 0 || ::fcntl(fd, F_SETLKW, &whole) != 0) ::_exit(3);
    std::ofstream(flag) << "1";
    ::usleep(hold_us);
    ::_exit(then() ? 0 : 4);
  }
  for (int waited = 0; child > 0 && !std::filesystem::exists(flag); ++waited) {
    int early = 0;
    if (::waitpid(child, &early, WNOHANG) == child || waited >= 60000) {
      ADD_FAILURE() << "the child exited before taking the lock, or took none within a minute";
      return -1;
    }
    ::usleep(1000);
  }
  if (child < 0) ADD_FAILURE() << "fork failed";
  return child;
}

// The message of the UserError `f` throws ("" and a test failure when it throws none).
inline std::string user_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UserError";
  return "";
}

// `n` documents of 3 sentences in the tiny vocabulary's words (one varying letter word each),
// for packing into a few dozen short sequences.
inline std::vector<Document> small_documents(int n) {
  std::vector<Document> docs(n);
  for (int d = 0; d < n; ++d)
    for (int s = 0; s < 3; ++s)
      docs[d].sentences.push_back("the cat plays " + std::string(1, 'a' + (d * 5 + s) % 26) + "y hello world runs");
  return docs;
}

// Random English-like text: `docs` documents of a few sentences of lowercase words.
inline std::string random_corpus(int docs, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> words = {"the", "cat", "dog", "runs", "unaffable", "hello", "world", "playing",
                                          "zebra", "quixotic", "abc", "x"};
  std::string text;
  for (int d = 0; d < docs; ++d) {
    const int sentences = 1 + static_cast<int>(rng() % 6);
    for (int s = 0; s < sentences; ++s) {
      const int n = 1 + static_cast<int>(rng() % 30);
      for (int w = 0; w < n; ++w) text += (w ? " " : "") + words[rng() % words.size()];
      text += rng() % 2 ? " .\n" : "!\n";
    }
    text += "\n";
  }
  return text;
}

}  // namespace rpe::test

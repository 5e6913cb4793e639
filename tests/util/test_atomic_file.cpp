// write_files_atomic: several files (a table's .md, .csv and .json) all new or all as they were.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "test_paths.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = test::process_temp_dir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Nothing but the files a test put there: no temporary file left behind.
size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// A second file that cannot be created (its folder is a file): the first, written beside it,
// is not published either, and its old content stays.
TEST(WriteFilesAtomic, ASecondFileThatCannotBeCreatedLeavesTheFirstAsItWas) {
  const fs::path dir = fresh_dir("unopenable");
  write_file_atomic(dir / "t.md", "old");
  write_file_atomic(dir / "blocker", "a file, not a folder");
  EXPECT_THROW(write_files_atomic({{dir / "t.md", "new"}, {dir / "blocker" / "t.csv", "new"}}), UserError);
  EXPECT_EQ(read_file(dir / "t.md"), "old");
  EXPECT_EQ(entries(dir), 2u);
}

// A write that fails (here a file-size limit: EFBIG, as a full disk gives ENOSPC) after the
// first file was written in full: neither is published, no temporary file stays, and the error
// is the machine's (exit 1), naming the file that did not fit.
TEST(WriteFilesAtomic, AWriteFailingOnTheLastFileLeavesEveryFileAsItWas) {
  const fs::path dir = fresh_dir("too_large");
  write_file_atomic(dir / "t.md", "old md");
  const std::string small(1000, 'm'), large(8000, 'j');
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &before), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  rlimit limited = before;
  limited.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string error;
  bool environment = false;
  try {
    write_files_atomic({{dir / "t.md", small}, {dir / "t.json", large}});
  } catch (const std::system_error& e) {
    error = e.what();
    environment = environment_error(e.code());
  }
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(error, "cannot write " + (dir / "t.json").string() + ": File too large");
  EXPECT_TRUE(environment);
  EXPECT_EQ(read_file(dir / "t.md"), "old md");
  EXPECT_FALSE(fs::exists(dir / "t.json"));
  EXPECT_EQ(entries(dir), 1u);
  // Without the limit the same call publishes both.
  write_files_atomic({{dir / "t.md", small}, {dir / "t.json", large}});
  EXPECT_EQ(read_file(dir / "t.md"), small);
  EXPECT_EQ(read_file(dir / "t.json"), large);
  EXPECT_EQ(entries(dir), 2u);
}

}  // namespace
}  // namespace rpe

// The run logs: a file sink opens with the lines logged since the previous one opened or closed,
// so a run folder made after its inputs were checked (fine-tuning) still logs how the run began,
// and no line of an earlier run leaks into a later one's file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_paths.h"
#include "util/log.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

std::string slurp_log(const fs::path& f) {
  std::ifstream in(f);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Log, AFileSinkOpensWithTheLinesLoggedBeforeIt) {
  const fs::path dir = test::process_temp_dir() / "log_preamble";  // this process's own
  fs::create_directories(dir);
  const auto level = spdlog::default_logger()->level();
  spdlog::default_logger()->set_level(spdlog::level::info);  // the tests log warnings only
  { log::FileSink nothing(""); }                               // clears what earlier tests logged
  log::info("test", "before the first file");
  {
    log::FileSink first(dir / "first.log");
    log::info("test", "while the first file is open");
  }
  log::info("test", "between the files");
  { log::FileSink second(dir / "second.log"); }
  log::info("test", "a run without a file here");
  { log::FileSink another_rank(""); }
  { log::FileSink third(dir / "third.log"); }
  spdlog::default_logger()->set_level(level);
  EXPECT_EQ(slurp_log(dir / "third.log").find("without a file"), std::string::npos) << "a line of a run with no file";

  const std::string first = slurp_log(dir / "first.log"), second = slurp_log(dir / "second.log");
  const auto before = first.find("[test] before the first file"), during = first.find("[test] while the first file is open");
  ASSERT_NE(before, std::string::npos) << first;
  ASSERT_NE(during, std::string::npos) << first;
  EXPECT_LT(before, during) << first;
  EXPECT_EQ(first.find("between the files"), std::string::npos) << first;
  EXPECT_NE(second.find("[test] between the files"), std::string::npos) << second;
  EXPECT_EQ(second.find("first file"), std::string::npos) << "a line of the first file's run: " << second;
}

}  // namespace
}  // namespace rpe

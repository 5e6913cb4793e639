// A fresh temp folder per test with config files written into it, and the one-line
// UserError of loading one: the fixture every config test builds on.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "util/errors.h"

namespace rpe::test {

class ConfigFixture : public ::testing::Test {
 protected:
  // A new empty folder named after `prefix`, the process and the running test.
  void make_dir(const std::string& prefix) {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  // The UserError message of loading `file` with `sets`, or "" if it loads; with
  // expect_one_line_ also checks that the message is a single line.
  std::string error_of(const std::filesystem::path& file, const std::vector<std::string>& sets = {}) {
    try {
      load_config(file, sets);
    } catch (const UserError& e) {
      if (expect_one_line_) {
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
      }
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
  bool expect_one_line_ = false;
};

}  // namespace rpe::test

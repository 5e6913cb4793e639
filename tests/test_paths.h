// Where the tests find the repository and the built CLI. Defined in test_paths.cpp, the one
// test object compiled with these absolute paths, so every other test object stays
// path-independent and ccache can share it between checkouts.
#pragma once

#include <filesystem>
#include <string>

namespace rpe::test {
const std::string& source_dir();    // the repository root (../shared sits next to it)
const std::string& train_binary();  // the rpe-train executable built with the tests
// This process's scratch folder (<temp>/rpe_tests_<pid>), created on first use and removed with
// all it holds when the process exits: ctest runs every test in a process of its own, so
// folders left behind would pile up by the hundred with each run.
const std::filesystem::path& process_temp_dir();
}  // namespace rpe::test
